"""The two-person rule over the in-memory unit of work: a workspace that requires a
second approver for destroy runs or for plans destroying more than N resources; the
approval records how many people it needs; the first approval keeps the run waiting,
the same person cannot give the second, another person's approval starts the apply,
and a rejection, an expiry or a cancellation ends a half-approved run like any other."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runplane.domain.errors import AlreadyDecided, SameApprover
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.parts import ApprovalState, RunPart
from runplane.domain.run import RunStatus
from runplane.domain.second_approval import SecondApprovalRule
from tests.service.conftest import Tier
from tests.service.scenarios import awaiting_approval
from tests.service.test_approval_requests import PLAN, passed_policy


def person(name: str) -> Principal:
    return Principal(
        kind=PrincipalKind.USER,
        id=name,
        organization_id="org-acme",
        permissions=frozenset(Permission),
        display=name,
    )


ADA, BOB = person("ada"), person("bob")


def needing_two(tier: Tier) -> str:
    """``run-1`` awaiting approval, its approval needing two people."""
    run = awaiting_approval(tier, policy="passed")
    held = tier.run_reader.parts(run.id)["approval"]
    body = {**held.body, "approvals_required": 2, "second_approval_reason": "a destroy run"}
    tier.run_reader.set_part(replace(held, body=body))
    return run.id


@pytest.mark.parametrize(
    ("rule", "destroy", "destroys", "needed"),
    [
        (SecondApprovalRule(), True, 9, 1),
        (SecondApprovalRule(destroy_runs=True), True, 0, 2),
        (SecondApprovalRule(destroy_runs=True), False, 9, 1),
        (SecondApprovalRule(destroys_over=2), False, 3, 2),
        (SecondApprovalRule(destroys_over=3), False, 3, 1),
    ],
)
def test_the_approval_records_how_many_people_the_workspaces_rule_needs(
    tier: Tier, rule: SecondApprovalRule, destroy: bool, destroys: int, needed: int
) -> None:
    # Given a run whose policy passed, its plan destroying `destroys` resources, in a
    # workspace with `rule`
    run = passed_policy(tier)
    ledger, now = tier.run_reader, tier.clock.now()
    plan = {**PLAN, "summary": {"adds": 0, "changes": 0, "destroys": destroys}}
    ledger.set_part(RunPart(run.id, "plan", "recorded", plan, None, now, now))
    options = {"destroy": destroy, "refresh_only": False, "targets": [], "replacements": []}
    ledger.set_part(RunPart(run.id, "input", "pinned", {"options": options}, None, now, now))
    workspace = tier.directory.workspaces["ws-1"]
    tier.directory.workspaces["ws-1"] = replace(workspace, second_approval=rule)

    # When the workflow asks for approval
    tier.steps.request_approval(run.id)

    # Then the approval says how many people must approve, and why when it is two
    body = tier.run_reader.parts(run.id)["approval"].body
    assert body.get("approvals_required", 1) == needed
    assert ("second_approval_reason" in body) is (needed == 2)


def test_two_different_people_approve_and_only_the_second_starts_the_apply(tier: Tier) -> None:
    # Given a run whose approval needs two people
    run_id = needing_two(tier)

    # When ada approves
    first = tier.runs.decide(ADA, run_id, "approve", "first look")

    # Then the run still waits, for another person, and the workflow was not resumed
    approval = tier.run_reader.parts(run_id)["approval"]
    assert approval.state == ApprovalState.WAITING_SECOND
    assert approval.body["first_approval"]["by"] == ADA.ref
    assert first.decision == "approve_first"
    assert tier.workflow.resumed == []
    assert tier.run_reader.get_run(run_id).status is RunStatus.AWAITING_APPROVAL

    # When ada approves again, then she is refused and nothing is written
    before = tier.run_reader.saved()
    with pytest.raises(SameApprover):
        tier.runs.decide(ADA, run_id, "approve", "me again")
    assert tier.run_reader.saved() == before

    # When bob approves
    tier.runs.decide(BOB, run_id, "approve", "second look")

    # Then the approval is decided by bob, ada's first approval kept, and the apply starts
    approval = tier.run_reader.parts(run_id)["approval"]
    assert approval.state == ApprovalState.APPROVED
    assert (approval.body["decided_by"], approval.body["first_approval"]["by"]) == (
        BOB.ref,
        ADA.ref,
    )
    assert tier.workflow.resumed == [("tok-approval", {"decision": "approve"})]
    # And no third decision is taken
    with pytest.raises(AlreadyDecided):
        tier.runs.decide(person("cy"), run_id, "reject", None)


def test_a_half_approved_run_is_rejected_by_anyone_even_its_first_approver(tier: Tier) -> None:
    # Given a run ada approved first
    run_id = needing_two(tier)
    tier.runs.decide(ADA, run_id, "approve", None)

    # When ada changes her mind and rejects it
    tier.runs.decide(ADA, run_id, "reject", "on second thoughts")

    # Then the run is rejected
    assert tier.run_reader.parts(run_id)["approval"].state == ApprovalState.REJECTED
    assert tier.run_reader.get_run(run_id).status is RunStatus.REJECTED


def test_a_half_approved_run_expires_at_its_deadline(tier: Tier) -> None:
    # Given a run ada approved first, its deadline passed
    run_id = needing_two(tier)
    tier.runs.decide(ADA, run_id, "approve", None)
    deadline = tier.run_reader.get_run(run_id).approval_expires_at
    assert deadline is not None
    tier.clock.advance(deadline - tier.clock.now())

    # When the workflow's wait times out
    decided = tier.steps.arbitrate_expiry(run_id)

    # Then the run expired: one approval of two approves nothing
    assert tier.run_reader.parts(run_id)["approval"].state == ApprovalState.EXPIRED
    assert tier.run_reader.get_run(run_id).status is RunStatus.EXPIRED
    assert decided.get("decision") != "approve"
