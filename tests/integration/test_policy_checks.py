"""Policy sets and a run's policy check: publication, binding order, enforcement levels.

Real services on moto, the real Rego evaluator; the run is driven step by step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runplane.domain.errors import (
    Conflict,
    NotFound,
    PolicyBindingRefused,
    PolicyModuleRefused,
    PolicyOverrideRequired,
)
from runplane.domain.identity import Forbidden, Permission
from runplane.domain.policy import load_policy_set_dir
from runplane.domain.run import RunStatus
from runplane.services.policy import Policies
from runplane.services.workspaces import create_workspace
from runplane.store import policy_sets, run_parts
from runplane.store.models import PolicySetTallyItem, policy_set_tally_key
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import Arena, plan_complete, planning, show_json
from tests.integration.conftest import Stack

S = RunStatus
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def one_policy(name: str, enforcement: str, body: str) -> dict[str, Any]:
    """A policy set with one policy, ``deny`` built from ``body`` (Rego, rego.v1)."""
    package = name.replace("-", "_")
    source = f"package runplane.{package}\n\nimport rego.v1\n\n{body}\n"
    return {
        "name": name,
        "modules": [{"name": f"{package}.rego", "source": source}],
        "policies": [
            {"name": package, "enforcement": enforcement, "query": f"data.runplane.{package}.deny"}
        ],
    }


EVERY_CHANGE = (
    'deny := [m | some rc in input.resource_changes; m := concat(" ", [rc.address, "changes"])]'
)


def attach_to(arena: Arena, document: dict[str, Any], workspace_id: str) -> None:
    arena.policies.publish(arena.admin, document)
    arena.policies.attach(arena.admin, document["name"], [workspace_id], False)


def evaluated(arena: Arena, document: dict[str, Any] | None, name: str, plan: bytes) -> str:
    """A run of a fresh workspace with ``document`` attached, through its policy stage."""
    ws = arena.stack.tenancy.create_workspace(arena.org.id, name + "-ws")
    if document is not None:
        attach_to(arena, document, ws.id)
    _, run_id = plan_complete(arena, name, plan, workspace_id=ws.id)
    # As the workflow runs it: the run, its parts, its workspace, the plan JSON's record
    # and the organization's policy-set tally read ahead together
    plan_json = run_parts.require(run_id, "plan").body["plan_json_artifact_id"]
    arena.orchestration.evaluate_policy(
        run_id, arena.scope_of(run_id), plan_json_artifact_id=plan_json
    )
    return run_id


# -- publication -----------------------------------------------------------------------------


def test_a_module_calling_http_send_is_refused_at_publication(arena: Arena, stack: Stack) -> None:
    # Given a policy that reaches the network
    document = one_policy(
        "exfiltrate",
        "advisory",
        'deny := [m | r := http.send({"method": "get", "url": "https://example.com"})\n'
        "  m := r.body]",
    )
    before = stack.scan()

    # When it is published / Then it is refused naming the builtin and line
    with pytest.raises(PolicyModuleRefused) as refused:
        arena.policies.publish(arena.admin, document)
    assert refused.value.http_status == 422
    assert "http.send" in str(refused.value)
    assert "exfiltrate.rego line 5" in str(refused.value)
    # And nothing was written
    assert stack.scan() == before


def test_publication_is_content_addressed_and_immutable(arena: Arena) -> None:
    # Given the example deny-delete set published once
    content = load_policy_set_dir(EXAMPLES / "deny-delete")
    first = arena.policies.publish(arena.admin, content.to_document())
    assert first.created
    assert first.digest == content.digest()
    assert first.version == 1

    # When the same content is published again / Then nothing new is created
    again = arena.policies.publish(arena.admin, content.to_document())
    assert not again.created
    assert again.digest == first.digest
    assert again.version == 1

    # When a changed version is published, then the first content again
    changed = content.to_document()
    changed["policies"][0]["enforcement"] = "advisory"
    second = arena.policies.publish(arena.admin, changed)
    back = arena.policies.publish(arena.admin, content.to_document())

    # Then each version keeps its digest, and the old content becomes current again
    assert second.digest != first.digest
    assert second.version == 2
    assert back.digest == first.digest
    assert back.version == 2


def test_publishing_and_attaching_need_policy_manage(arena: Arena) -> None:
    token = arena.stack.identity.issue_token(
        arena.org.id, "dev", [Permission.WORKSPACE_READ, Permission.POLICY_OVERRIDE], created_by="t"
    ).token
    developer = arena.stack.identity.authenticate(f"Bearer {token}")
    with pytest.raises(Forbidden):
        arena.policies.publish(developer, one_policy("p", "advisory", "deny := []"))


def test_attaching_to_an_unknown_workspace_is_refused(arena: Arena) -> None:
    arena.policies.publish(arena.admin, one_policy("p", "advisory", "deny := []"))
    with pytest.raises(NotFound) as refused:
        arena.policies.attach(arena.admin, "p", ["ws-" + "a" * 26], False)
    assert refused.value.http_status == 404
    assert refused.value.pointer == "/workspaces/0"


def test_attaching_to_another_organizations_workspace_is_not_found(
    arena: Arena, stack: Stack
) -> None:
    # Given a policy set, a workspace of ours and a workspace of another organization
    arena.policies.publish(arena.admin, one_policy("p", "advisory", "deny := []"))
    ours = stack.tenancy.create_workspace(arena.org.id, "ours")
    other = stack.tenancy.create_organization("someone-else")
    theirs = stack.tenancy.create_workspace(other.id, "theirs")
    before = stack.scan()

    # When the set is attached to both
    with pytest.raises(NotFound) as refused:
        arena.policies.attach(arena.admin, "p", [ours.id, theirs.id], False)

    # Then it is 404, as for a workspace that does not exist, naming the field; nothing changed
    assert refused.value.http_status == 404
    assert refused.value.to_body() == {
        "code": "NOT_FOUND",
        "message": f"workspace {theirs.id} was not found",
    }
    assert refused.value.pointer == f"/workspaces/{sorted([ours.id, theirs.id]).index(theirs.id)}"
    assert stack.scan() == before
    assert arena.policies.get(arena.admin, "p").attached_workspaces == ()


# -- binding order ---------------------------------------------------------------------------


def test_results_cannot_be_recorded_before_binding(arena: Arena, stack: Stack) -> None:
    # Given a run whose policy check is reserved (running, no digest)
    _, run_id = plan_complete(arena, "order-unbound")
    run = arena.stack.lifecycle.runs.get(run_id)
    check = run_parts.require(run_id, "policy")
    assert check.state == "running"
    assert check.body["input_digest"] is None
    evaluation = arena.policies.evaluate(run, arena.policies.policy_input(run))
    before = stack.scan()

    # When results (a completion) are recorded on the unbound row
    # Then it is refused and nothing is written
    with pytest.raises(PolicyBindingRefused), arena.stack.units() as uow:
        Policies.record(uow.parts, run, check, evaluation, stack.clock.now())
    assert stack.scan() == before


def test_a_bound_row_cannot_be_rebound_or_completed_with_another_digest(
    arena: Arena, stack: Stack
) -> None:
    # Given a run whose policy check was bound to its input's digest
    _, run_id = plan_complete(arena, "order-bound")
    run = arena.stack.lifecycle.runs.get(run_id)
    policy_input = arena.policies.policy_input(run)
    evaluation = arena.policies.evaluate(run, policy_input)
    check = run_parts.require(run_id, "policy")
    plan = run_parts.get(run_id, "plan", reads=IdentityMap())
    with arena.stack.units() as uow:
        as_written = Policies.bind(
            uow.parts, run, check, evaluation.input_digest, stack.clock.now(), plan
        )
        uow.commit()
    bound = run_parts.require(run_id, "policy")
    # (the row the bind says it wrote is the row a read finds)
    assert (as_written.state, as_written.body) == (bound.state, bound.body)
    before = stack.scan()

    # When another digest is bound (from the stale read, or the fresh one)
    # Then both are refused
    with arena.stack.units() as uow:
        Policies.bind(uow.parts, run, check, "sha256:" + "0" * 64, stack.clock.now(), plan)
        with pytest.raises(PolicyBindingRefused):
            uow.commit()
    with arena.stack.units() as uow, pytest.raises(PolicyBindingRefused):
        Policies.bind(uow.parts, run, bound, "sha256:" + "0" * 64, stack.clock.now(), plan)
    # And results for a different input are refused too
    other = arena.policies.evaluate(run, {**policy_input, "run": {"workspace": "elsewhere"}})
    with arena.stack.units() as uow, pytest.raises(PolicyBindingRefused):
        Policies.record(uow.parts, run, bound, other, stack.clock.now())
    # And nothing was written
    assert stack.scan() == before


def test_only_the_row_reserved_by_a_committed_plan_can_be_bound(arena: Arena, stack: Stack) -> None:
    # Given a planning run (no plan committed) with a policy row someone wrote directly
    _, run_id = planning(arena, "order-no-plan")
    run_parts.put(
        run_id, "policy", state="running", body={"input_digest": None}, now=stack.clock.now()
    ).commit()
    run = arena.stack.lifecycle.runs.get(run_id)
    check = run_parts.require(run_id, "policy")
    before = stack.scan()

    # When it is bound / Then it is refused: no committed plan reserved it
    with arena.stack.units() as uow, pytest.raises(PolicyBindingRefused):
        Policies.bind(
            uow.parts,
            run,
            check,
            "sha256:" + "1" * 64,
            stack.clock.now(),
            run_parts.get(run_id, "plan", reads=IdentityMap()),
        )
    assert stack.scan() == before


# -- enforcement levels ----------------------------------------------------------------------


def test_no_attached_set_passes_with_a_bound_digest(arena: Arena) -> None:
    run_id = evaluated(arena, None, "none", show_json(("a", ["create"])))
    check = run_parts.require(run_id, "policy")
    assert arena.runs.get(arena.admin, run_id).status is S.AWAITING_APPROVAL
    assert check.state == "passed"
    assert check.body["input_digest"].startswith("sha256:")
    assert check.body["results"] == []
    assert check.body["policy_sets"] == []


def test_a_hard_mandatory_failure_fails_the_run_with_digest_bound_evidence(arena: Arena) -> None:
    # Given the deny-delete set attached and a plan that deletes a resource
    document = load_policy_set_dir(EXAMPLES / "deny-delete").to_document()
    plan = show_json(("keep", ["no-op"]), ("gone", ["delete"]))

    # When the policy stage runs
    run_id = evaluated(arena, document, "hard", plan)

    # Then the run failed its policy check, and the evidence says exactly why
    run = arena.runs.get(arena.admin, run_id)
    assert run.status is S.POLICY_FAILED
    assert run.status_reason == "POLICY_FAILED: deny-delete/deny_delete"
    # And it will apply nothing: its apply record is closed
    assert run_parts.require(run_id, "apply").state == "closed"
    check = run_parts.require(run_id, "policy")
    assert check.state == "failed"
    assert check.body["outcome"] == "hard_failed"
    # (a runplane-shaped set saw exactly the document the check is bound to)
    assert check.body["policy_sets"] == [
        {
            "name": "deny-delete",
            "digest": load_policy_set_dir(EXAMPLES / "deny-delete").digest(),
            "input_shape": "runplane",
            "input_digest": check.body["input_digest"],
        }
    ]
    assert check.body["runtime"].startswith("gordon-to-regorus@0.13.0 regorus@")
    [result] = check.body["results"]
    assert result["outcome"] == "failed"
    assert result["messages"] == ["test_thing.gone would be deleted"]
    assert check.body["result_digest"].startswith("sha256:")


def test_a_set_created_in_an_organization_that_had_none_judges_its_next_run(
    arena: Arena,
) -> None:
    # Given an organization that has no policy set (its tally, read ahead, counts none)
    assert policy_sets.tally(arena.org.id) == 0
    none = evaluated(arena, None, "before-any", show_json(("gone", ["delete"])))
    # (it passed, and the policy step asked for its approval)
    assert arena.runs.get(arena.admin, none).status is S.AWAITING_APPROVAL
    # When it publishes a hard-mandatory set and attaches it
    document = load_policy_set_dir(EXAMPLES / "deny-delete").to_document()
    run_id = evaluated(arena, document, "after-one", show_json(("gone", ["delete"])))
    # Then the next run's policy step read it, and it failed the run
    assert policy_sets.tally(arena.org.id) == 1
    assert arena.runs.get(arena.admin, run_id).status is S.POLICY_FAILED
    assert [s["name"] for s in run_parts.require(run_id, "policy").body["policy_sets"]] == [
        "deny-delete"
    ]


def test_an_organization_older_than_tallies_still_has_its_sets_evaluated(arena: Arena) -> None:
    # Given a hard-mandatory set attached to a workspace, in an organization whose tally
    # does not exist (created before tallies)
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "legacy-ws")
    attach_to(arena, load_policy_set_dir(EXAMPLES / "deny-delete").to_document(), ws.id)
    PolicySetTallyItem(*policy_set_tally_key(arena.org.id)).delete()
    # When a run of it deletes a resource and reaches its policy step (the missing tally
    # read ahead with the run)
    _, run_id = plan_complete(arena, "legacy", show_json(("gone", ["delete"])), workspace_id=ws.id)
    arena.orchestration.evaluate_policy(run_id, arena.scope_of(run_id))
    # Then the set judged it, and failed it
    assert arena.runs.get(arena.admin, run_id).status is S.POLICY_FAILED
    assert run_parts.require(run_id, "policy").body["outcome"] == "hard_failed"
    # And the organization's next set counts both into a new tally
    arena.policies.publish(arena.admin, one_policy("second", "advisory", "deny := []"))
    assert policy_sets.tally(arena.org.id) == 2


def test_an_advisory_failure_only_warns(arena: Arena) -> None:
    run_id = evaluated(
        arena,
        one_policy("warn", "advisory", EVERY_CHANGE),
        "advisory",
        show_json(("a", ["create"])),
    )
    check = run_parts.require(run_id, "policy")
    assert arena.runs.get(arena.admin, run_id).status is S.AWAITING_APPROVAL
    assert check.state == "passed"
    assert check.body["results"][0]["outcome"] == "failed"
    assert check.body["results"][0]["messages"] == ["test_thing.a changes"]


def test_a_soft_mandatory_failure_waits_for_an_override_bound_into_the_approval(
    arena: Arena,
) -> None:
    # Given a soft-mandatory policy that fails, and the run awaiting approval (the policy
    # step asked for it)
    run_id = evaluated(
        arena,
        one_policy("review", "soft_mandatory", EVERY_CHANGE),
        "soft",
        show_json(("a", ["create"])),
    )
    assert arena.runs.get(arena.admin, run_id).status is S.AWAITING_APPROVAL
    assert run_parts.require(run_id, "policy").state == "soft_failed"
    run = arena.runs.get(arena.admin, run_id)

    # When it is approved without an override / Then that is refused
    with pytest.raises(PolicyOverrideRequired) as refused:
        arena.runs.decide(arena.admin, run_id, "approve", None)
    assert refused.value.http_status == 409
    assert run_parts.require(run_id, "approval").state == "waiting"

    # When someone without policy:override overrides / Then that is refused
    token = arena.stack.identity.issue_token(
        arena.org.id, "approver", [Permission.RUN_READ, Permission.RUN_APPROVE], created_by="t"
    ).token
    approver = arena.stack.identity.authenticate(f"Bearer {token}")
    with pytest.raises(Forbidden):
        arena.policies.override(approver, run, "ship it")

    # When an admin overrides with a reason, then approves
    arena.policies.override(arena.admin, run, "reviewed with the owning team")
    arena.runs.decide(arena.admin, run_id, "approve", None)

    # Then the override is evidence on the check and bound into the approved decision
    check = run_parts.require(run_id, "policy")
    approval = run_parts.require(run_id, "approval")
    assert check.state == "overridden"
    assert check.body["override"]["reason"] == "reviewed with the owning team"
    assert approval.state == "approved"
    assert (
        approval.body["binding"]["policy_override"]["result_digest"]
        == (check.body["result_digest"])
    )
    # And a second override is refused
    with pytest.raises(Conflict):
        arena.policies.override(arena.admin, run, "again")


def test_a_set_attached_to_all_workspaces_judges_a_workspace_created_later(
    arena: Arena,
) -> None:
    # Given a set attached to every workspace before this workspace existed
    document = one_policy("everywhere", "hard_mandatory", EVERY_CHANGE)
    arena.policies.publish(arena.admin, document)
    arena.policies.attach(arena.admin, "everywhere", [], True)

    # When a run in a new workspace reaches its policy stage
    run_id = evaluated(arena, None, "later", show_json(("a", ["create"])))

    # Then the set was evaluated, and failed it
    check = run_parts.require(run_id, "policy")
    assert [s["name"] for s in check.body["policy_sets"]] == ["everywhere"]
    assert arena.runs.get(arena.admin, run_id).status is S.POLICY_FAILED


def test_a_mandatory_policy_that_errors_fails_closed(arena: Arena) -> None:
    # Given a soft-mandatory policy that divides by zero at evaluation
    broken = one_policy(
        "broken",
        "soft_mandatory",
        "deny := [m | some rc in input.resource_changes; m := 1 / (count(rc.actions) - 1)]",
    )
    # When a run is evaluated with it
    run_id = evaluated(arena, broken, "errored", show_json(("a", ["create"])))
    # Then the error is not a finding anyone could override: the run fails its check
    check = run_parts.require(run_id, "policy")
    assert check.body["results"][0]["outcome"] == "errored"
    assert check.body["outcome"] == "hard_failed"
    assert arena.runs.get(arena.admin, run_id).status is S.POLICY_FAILED


def test_a_set_attached_to_a_bound_workspace_judges_its_pull_request_previews(
    arena: Arena,
) -> None:
    # Given a set attached by name to a bound workspace, and a preview made from it
    parent = arena.stack.tenancy.create_workspace(arena.org.id, "network")
    attach_to(arena, one_policy("parent-only", "hard_mandatory", EVERY_CHANGE), parent.id)
    preview = create_workspace(
        arena.stack.services.directory,
        arena.stack.clock,
        arena.stack.ids,
        arena.org.id,
        "network-pr-7",
        preview_of=parent.id,
    )

    # When a run of the preview reaches its policy stage
    _, run_id = plan_complete(
        arena, "preview", show_json(("a", ["create"])), workspace_id=preview.id
    )
    arena.orchestration.evaluate_policy(run_id, arena.scope_of(run_id))

    # Then the bound workspace's set judged it, and failed it
    check = run_parts.require(run_id, "policy")
    assert [s["name"] for s in check.body["policy_sets"]] == ["parent-only"]
    assert arena.runs.get(arena.admin, run_id).status is S.POLICY_FAILED
