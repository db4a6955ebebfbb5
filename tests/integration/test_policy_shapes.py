"""Input shapes through the policy service: publication refuses or warns about unknown
input roots, and a run's evidence records the digest of the document each set saw.

Real services on moto, the real Rego evaluator; the run is driven step by step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runplane.domain.errors import PolicyInputRootRefused
from runplane.domain.policy import load_policy_set_dir
from runplane.domain.policy_input import PolicyInputs, RunMetadata
from runplane.domain.policy_sanitize import input_digest
from runplane.domain.run import RunStatus
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import Arena, show_json
from tests.integration.conftest import Stack
from tests.integration.test_policy_checks import evaluated

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def hcp_style(name: str, **options: str) -> dict[str, Any]:
    """A set written for HCP Terraform (reads input.plan), with ``options``."""
    source = (
        "package runplane.hcp\n\nimport rego.v1\n\n"
        "deny contains msg if {\n"
        "\tsome rc in input.plan.resource_changes\n"
        '\t"delete" in rc.change.actions\n'
        '\tmsg := sprintf("%s is deleted", [rc.address])\n'
        "}\n"
    )
    return {
        "name": name,
        **options,
        "modules": [{"name": "hcp.rego", "source": source}],
        "policies": [
            {"name": "hcp", "enforcement": "hard_mandatory", "query": "data.runplane.hcp.deny"}
        ],
    }


def test_a_set_reading_a_root_its_shape_lacks_is_refused_and_nothing_is_written(
    arena: Arena, stack: Stack
) -> None:
    # Given an HCP-style set that declares no shape (so runplane)
    before = stack.scan()
    # When it is published / Then it is refused naming module, line and root
    with pytest.raises(PolicyInputRootRefused) as refused:
        arena.policies.publish(arena.admin, hcp_style("hcp-undeclared"))
    assert refused.value.http_status == 422
    assert "hcp.rego line 6 reads input.plan" in refused.value.message
    assert "the plan shape provides it" in refused.value.message
    # And nothing was written
    assert stack.scan() == before


def test_with_warn_the_set_is_published_with_its_warning(arena: Arena) -> None:
    published = arena.policies.publish(
        arena.admin, hcp_style("hcp-warned", unknown_input_roots="warn")
    )
    assert published.created
    [warning] = published.to_dict()["warnings"]
    assert warning.startswith("hcp.rego line 6 reads input.plan")
    # And reading it back carries no warning (warnings belong to the publication)
    assert arena.policies.get(arena.admin, "hcp-warned").to_dict()["warnings"] == []


def test_each_set_records_the_digest_of_the_document_of_its_own_shape(arena: Arena) -> None:
    # Given a plan that deletes a resource, judged by an HCP-shaped set
    plan = show_json(("keep", ["no-op"]), ("gone", ["delete"]))
    document = hcp_style("hcp-shaped", input_shape="plan")

    # When the policy stage runs
    run_id = evaluated(arena, document, "shaped", plan)

    # Then the HCP-style policy denied the plan it read through input.plan
    run = arena.runs.get(arena.admin, run_id)
    assert run.status is RunStatus.POLICY_FAILED
    check = run_parts.require(run_id, "policy")
    [result] = check.body["results"]
    assert result["messages"] == ["test_thing.gone is deleted"]
    # And the evidence names the shape and the digest of exactly what the set saw:
    # the plan-shaped document of this run, not the runplane document the check binds
    [entry] = check.body["policy_sets"]
    assert entry["input_shape"] == "plan"
    workspace = workspace_store.get_workspace(run.workspace_id, reads=IdentityMap())
    seen = PolicyInputs(
        json.loads(plan),
        RunMetadata(
            workspace=workspace.name,
            kind=run.kind.value,
            engine_version="1.0.3",
            run_id=run.id,
            created_at=run.created_at.isoformat(),
            workspace_id=workspace.id,
            tags=workspace.tag_names,
            origin=lambda: arena.policies.run_origin(run),
        ),
    ).document("plan")
    assert entry["input_digest"] == input_digest(seen)
    assert entry["input_digest"] != check.body["input_digest"]


def test_the_example_sets_of_every_shape_publish_cleanly(arena: Arena) -> None:
    for directory in ("hcp-plan", "scalr-tfplan", "spacelift-terraform", "conftest-bare"):
        content = load_policy_set_dir(EXAMPLES / directory)
        published = arena.policies.publish(arena.admin, content.to_document())
        assert published.digest == content.digest()
        assert published.warnings == ()
