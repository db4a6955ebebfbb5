"""Input shapes on the embedded stack: a set written like an HCP Terraform OPA policy
judges a real plan, over HTTP, with the real engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runplane.cli import main
from runplane.client import ApiError
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO

# Written as for HCP Terraform: input.plan is the plan JSON, input.run the run. It
# denies creating a resource whose id is known only after apply (every test_thing):
# it can only fire if after_unknown is derived from the engine's real plan.
HCP_POLICY = """package terraform.review

import rego.v1

deny contains msg if {
\tsome rc in input.plan.resource_changes
\trc.change.actions == ["create"]
\trc.change.after_unknown.id == true
\tnot rc.change.after.id
\tworkspace := input.run.workspace.name
\tmsg := sprintf("%s in %s: new resources need a reviewed id", [rc.address, workspace])
}
"""


def hcp_set(name: str, **options: str) -> dict[str, object]:
    return {
        "name": name,
        **options,
        "modules": [{"name": "review.rego", "source": HCP_POLICY}],
        "policies": [
            {
                "name": "reviewed_ids",
                "enforcement": "hard_mandatory",
                "query": "data.terraform.review.deny",
            }
        ],
    }


def test_a_plan_shaped_set_written_like_an_hcp_policy_denies_a_real_plan(local: Local) -> None:
    client = local.client
    workspace_name = unique("shape")
    ws = str(client.create_workspace(workspace_name)["id"])

    # Given an HCP-style set declaring the plan shape, attached to the workspace
    published = client.publish_policy_set(hcp_set(unique("hcp"), input_shape="plan"))
    assert published["warnings"] == []
    client.attach_policy_set(published["name"], [ws])

    # When a run creating a resource plans
    run = client.create_run(ws, HELLO)
    review = client.watch(run["id"], timeout=120)

    # Then the policy read input.plan and input.run and failed the run
    assert review["status"] == "policy_failed"
    [denied] = review["policy"]["results"]
    assert denied["outcome"] == "failed"
    assert denied["messages"] == [
        f"test_thing.greeting in {workspace_name}: new resources need a reviewed id"
    ]
    # And the evidence records the shape and the digest of the document the set saw
    [entry] = review["policy"]["policy_sets"]
    assert entry["input_shape"] == "plan"
    assert entry["input_digest"].startswith("sha256:")
    assert entry["input_digest"] != review["policy"]["input_digest"]


def test_the_same_set_without_its_shape_is_refused_or_warned_over_http(local: Local) -> None:
    client = local.client
    # When the HCP-style set is published without declaring its shape
    name = unique("hcp-undeclared")
    with pytest.raises(ApiError) as refused:
        client.publish_policy_set(hcp_set(name))
    # Then it is refused: it would pass every plan silently
    assert refused.value.status == 422
    assert refused.value.body["code"] == "policy_input_root_unknown"
    assert "review.rego line 6 reads input.plan" in refused.value.body["message"]
    assert name not in {s["name"] for s in client.list_policy_sets()}

    # And with "unknown_input_roots": "warn" it is published with the warnings: the
    # root it lacks, and input.run.workspace, a string in the runplane shape
    warned = client.publish_policy_set(hcp_set(name, unknown_input_roots="warn"))
    first, second = warned["warnings"]
    assert first.startswith("review.rego line 6 reads input.plan")
    assert second.startswith("review.rego line 10 reads input.run.workspace.name")


def test_the_cli_prints_publication_warnings(
    local: Local, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a set directory reading input.plan without declaring the shape, asking to warn
    org, token = local.other_organization(unique("shape-cli"))
    directory = tmp_path / "hcp"
    directory.mkdir()
    (directory / "review.rego").write_text(HCP_POLICY, encoding="utf-8")
    document = hcp_set("hcp-warned", unknown_input_roots="warn")
    del document["modules"]
    (directory / "policy-set.json").write_text(json.dumps(document), encoding="utf-8")

    # When it is published with the CLI
    connect = ["--url", local.url, "--token", token, "--organization", org]
    status = main(["policy", "publish", str(directory), *connect])

    # Then it is published, and the warning is printed on stderr
    captured = capsys.readouterr()
    assert status == 0
    assert captured.out.startswith("hcp-warned  sha256:")
    assert "warning: review.rego line 6 reads input.plan" in captured.err
