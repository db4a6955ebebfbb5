"""Approval decisions (``Runs.decide``) over the in-memory unit of work: what an approval
binds, what a rejection moves and hands off, and the decisions refused before or by the
write, each writing nothing. Decisions racing on moto and over HTTP:
tests/integration/test_decision_races.py, tests/e2e/test_managed_runs.py; the order of a
second decision or cancellation: tests/service/test_lifecycle_rules.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import (
    AlreadyDecided,
    ApprovalExpired,
    Conflict,
    PolicyOverrideRequired,
)
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.parts import ApprovalState, RunPart
from runplane.domain.run import RunStatus, Stage, StageStatus
from tests.fakes import LedgerState
from tests.service.conftest import Tier
from tests.service.scenarios import awaiting_approval

PLAN = "sha256:plan-reviewed"
BINDING = {
    "plan_sha256": PLAN,
    "predecessor_state_version_id": "sv-1",
    "policy_input_digest": "in-1",
    "policy_result_digest": "out-1",
}
# The token of the rejected or approved run's wait for its decision.
WAIT = "tok-1"
APPROVER = Principal(
    kind=PrincipalKind.USER,
    id="bob",
    organization_id="org-acme",
    permissions=frozenset(Permission),
    display="bob",
)


def _awaiting(tier: Tier, policy: str | None = "passed", token: str | None = WAIT) -> Run:
    """A run awaiting approval for four hours, its approval bound to ``BINDING``."""
    return awaiting_approval(tier, binding=BINDING, policy=policy, token=token)


def _written(tier: Tier) -> tuple[LedgerState, dict[str, str], list[object]]:
    """What the run's stores and the workflow hold, to prove nothing was written."""
    return tier.run_reader.saved(), dict(tier.writer_queue.holders), list(tier.workflow.resumed)


def test_an_approval_binds_the_plan_that_was_reviewed(tier: Tier) -> None:
    # Given a run awaiting approval of the plan bob reviewed, its policy passed
    run = _awaiting(tier)
    policy = tier.run_reader.parts(run.id)["policy"]
    # When bob approves it, naming the plan he reviewed
    decided = tier.runs.decide(APPROVER, run.id, "approve", "looks right", {"plan_sha256": PLAN})
    # Then the approval is recorded for that binding, by bob, with his comment
    approval = tier.run_reader.parts(run.id)["approval"]
    assert approval.state == ApprovalState.APPROVED
    assert approval.body["binding"] == BINDING
    assert (
        approval.body["decision"],
        approval.body["decided_by"],
        approval.body["comment"],
    ) == ("approve", APPROVER.ref, "looks right")
    # And the policy evidence it holds for was written unchanged in the same commit
    held = tier.run_reader.parts(run.id)["policy"]
    assert (held.state, held.body) == (policy.state, policy.body)
    assert held.updated_at > policy.updated_at
    assert [uow.commits for uow in tier.units] == [1]
    # And the run still awaits the workflow's apply, whose wait is resumed with the decision
    assert decided.run == run
    assert (decided.decision, decided.token) == ("approve", "tok-1")
    assert tier.run_reader.get_run(run.id) == run
    assert tier.workflow.resumed == [("tok-1", {"decision": "approve"})]
    assert tier.writer_queue.holders == {"ws-1": run.id}


def test_a_rejection_moves_the_run_and_hands_the_writer_reservation_on(tier: Tier) -> None:
    # Given a run awaiting approval that holds the writer reservation, run-2 waiting
    run = _awaiting(tier)
    # When bob rejects it
    decided = tier.runs.decide(APPROVER, run.id, "reject", None)
    # Then the run is rejected at the next version: its approval stage completed (it was
    # decided), its apply skipped
    now = tier.run_reader.get_run(run.id)
    assert (now.status, now.version, now.status_reason) == (
        RunStatus.REJECTED,
        run.version + 1,
        "rejected",
    )
    assert decided.run == now
    stages = tier.run_reader.stages(run.id)
    assert (stages[Stage.APPROVAL].status, stages[Stage.APPLY].status) == (
        StageStatus.COMPLETED,
        StageStatus.SKIPPED,
    )
    assert tier.run_reader.parts(run.id)["approval"].state == ApprovalState.REJECTED
    assert [a.type for a in tier.run_reader.audit] == ["run.rejected"]
    # And in the same commit the reservation passed to run-2, whose wait is resumed
    # holding it, before the rejected run's own wait learns the decision
    assert [uow.commits for uow in tier.units] == [1]
    assert tier.writer_queue.holders == {"ws-1": "run-2"}
    assert tier.workflow.resumed == [
        ("tok-waiter", {"held": True}),
        ("tok-1", {"decision": "reject"}),
    ]


def test_a_decision_on_a_different_binding_is_refused_and_writes_nothing(tier: Tier) -> None:
    # Given a run awaiting approval of one plan
    run = _awaiting(tier)
    before = _written(tier)
    # When bob approves another plan (his review is stale)
    # Then the decision is refused, naming what differs, and nothing is written or resumed
    with pytest.raises(Conflict, match="different plan_sha256"):
        tier.runs.decide(APPROVER, run.id, "approve", None, {"plan_sha256": "sha256:other"})
    assert _written(tier) == before
    assert [uow.commits for uow in tier.units] == [0]


def test_a_second_decision_loses_with_already_decided(tier: Tier) -> None:
    # Given a run bob approved
    run = _awaiting(tier)
    tier.runs.decide(APPROVER, run.id, "approve", None)
    before = _written(tier)
    # When it is rejected afterwards
    # Then the rejection is refused as already decided, writing nothing
    with pytest.raises(AlreadyDecided, match="its approval is approved"):
        tier.runs.decide(APPROVER, run.id, "reject", None)
    assert _written(tier) == before


def test_a_decision_that_loses_the_race_after_its_read_is_already_decided(tier: Tier) -> None:
    # Given a run awaiting approval
    run = _awaiting(tier)
    # When bob's rejection reads it waiting, and ada's approval commits before bob's write
    ada = Principal(
        kind=PrincipalKind.USER,
        id="ada",
        organization_id="org-acme",
        permissions=frozenset(Permission),
        display="ada",
    )
    tier.clock.on_next_reading(lambda: tier.runs.decide(ada, run.id, "approve", None))
    # Then bob's commit is refused as already decided (by the approval as it is now)
    with pytest.raises(AlreadyDecided, match="its approval is approved"):
        tier.runs.decide(APPROVER, run.id, "reject", None)
    # And only ada's decision was written: the run was not rejected, nothing handed off
    assert tier.run_reader.get_run(run.id).status is RunStatus.AWAITING_APPROVAL
    assert tier.run_reader.parts(run.id)["approval"].body["decided_by"] == ada.ref
    assert tier.writer_queue.holders == {"ws-1": run.id}
    assert tier.workflow.resumed == [("tok-1", {"decision": "approve"})]


def test_a_decision_before_the_wait_resumes_nothing_and_reads_once(tier: Tier) -> None:
    # Given a run awaiting approval whose workflow has not stored its wait's token yet
    run = _awaiting(tier, token=None)
    # When bob approves it
    decided = tier.runs.decide(APPROVER, run.id, "approve", None)
    # Then it commits once and resumes nothing: the wait finds the decision when it starts
    assert decided.token is None
    assert [uow.commits for uow in tier.units] == [1]
    assert tier.workflow.resumed == []
    assert tier.steps.wait_for_approval(run.id, "tok-wait") == {"waiting": False}
    assert tier.workflow.resumed == [("tok-wait", {"decision": "approve"})]


def test_a_decision_after_the_deadline_is_expired_and_writes_nothing(tier: Tier) -> None:
    # Given a run whose approval deadline passed (the workflow has not expired it yet)
    run = _awaiting(tier)
    tier.clock.advance(timedelta(hours=4))
    before = _written(tier)
    # When bob approves it
    # Then the approval has expired, and nothing is written or resumed
    with pytest.raises(ApprovalExpired):
        tier.runs.decide(APPROVER, run.id, "approve", None)
    assert _written(tier) == before


def test_a_soft_failed_policy_needs_an_override_before_an_approval(tier: Tier) -> None:
    # Given a run awaiting approval whose policy check soft-failed, not overridden
    run = _awaiting(tier, policy="soft_failed")
    before = _written(tier)
    # When bob approves it
    # Then the approval needs the policy override first, and nothing is written
    with pytest.raises(PolicyOverrideRequired):
        tier.runs.decide(APPROVER, run.id, "approve", None)
    assert _written(tier) == before
    assert [uow.commits for uow in tier.units] == [0]
    # But a rejection needs no override
    assert tier.runs.decide(APPROVER, run.id, "reject", None).run.status is RunStatus.REJECTED


def test_a_token_stored_after_the_read_is_the_one_resumed(tier: Tier) -> None:
    # Given a run whose approval wait had not stored its token when bob's decision read it
    run = _awaiting(tier, token=None)

    def store_token() -> None:
        part = tier.run_reader.parts(run.id)["approval"]
        tier.run_reader.set_part(
            RunPart(
                run.id,
                "approval",
                part.state,
                dict(part.body),
                "tok-late",
                part.created_at,
                part.updated_at,
            )
        )

    tier.clock.on_next_reading(store_token)
    # When bob approves it
    decided = tier.runs.decide(APPROVER, run.id, "approve", None)
    # Then the token read after the write is the one resumed
    assert decided.token == "tok-late"
    assert tier.workflow.resumed == [("tok-late", {"decision": "approve"})]
