"""An approval's expiry (``WorkflowSteps.arbitrate_expiry``, when the workflow's wait
for a decision timed out) over the in-memory unit of work: past the deadline with no
decision the run expires and hands the writer reservation on; a decision recorded
first, or landing between the expiry's read and its write, is what happened, and the
expiry writes nothing. The same on moto and over HTTP:
tests/integration/test_decision_races.py, tests/e2e/test_approval_deadline.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runplane.domain.errors import ApprovalExpired, RunEnded
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.parts import ApprovalState
from runplane.domain.run import RunStatus, Stage, StageStatus
from runplane.domain.run_events import EventType
from tests.fakes import LedgerState
from tests.service.conftest import Tier
from tests.service.scenarios import awaiting_approval

APPROVER = Principal(
    kind=PrincipalKind.USER,
    id="bob",
    organization_id="org-acme",
    permissions=frozenset(Permission),
    display="bob",
)
WINDOW = timedelta(hours=4)


def _written(tier: Tier) -> tuple[LedgerState, dict[str, str], list[object], list[object]]:
    """What the run's stores, the writer queue and the workflow hold."""
    return (
        tier.run_reader.saved(),
        dict(tier.writer_queue.holders),
        list(tier.workflow.resumed),
        list(tier.workflow.failed),
    )


def test_past_the_deadline_with_no_decision_the_run_expires(tier: Tier) -> None:
    # Given a run whose approval deadline passed with no decision
    run = awaiting_approval(tier, window=WINDOW)
    tier.clock.advance(WINDOW)
    # When the workflow's wait times out and the expiry is arbitrated
    outcome = tier.steps.arbitrate_expiry(run.id)
    # Then the run expired at the next version, its approval with it, in one commit
    assert outcome == {"decision": "expired"}
    now = tier.run_reader.get_run(run.id)
    assert (now.status, now.version, now.status_reason) == (
        RunStatus.EXPIRED,
        run.version + 1,
        "APPROVAL_EXPIRED",
    )
    approval = tier.run_reader.parts(run.id)["approval"]
    assert (approval.state, approval.token) == (ApprovalState.EXPIRED, None)
    assert [uow.commits for uow in tier.units] == [1]
    assert tier.run_reader.stages(run.id)[Stage.APPLY].status is StageStatus.SKIPPED
    assert [(e.type, e.status) for e in tier.run_reader.announced] == [
        (EventType.EXPIRED, RunStatus.EXPIRED)
    ]
    # And the writer reservation passed to run-2, whose wait is resumed holding it
    assert tier.writer_queue.holders == {"ws-1": "run-2"}
    assert tier.workflow.resumed == [("tok-waiter", {"held": True})]
    # And a decision after the expiry is refused, writing nothing
    before = _written(tier)
    with pytest.raises(ApprovalExpired):
        tier.runs.decide(APPROVER, run.id, "approve", None)
    assert _written(tier) == before


def test_before_the_deadline_the_expiry_is_pending_and_writes_nothing(tier: Tier) -> None:
    # Given a run whose approval deadline has not passed
    run = awaiting_approval(tier, window=WINDOW)
    before = _written(tier)
    # When the expiry is arbitrated (a wait that timed out early)
    # Then the decision is still pending, and nothing is written
    assert tier.steps.arbitrate_expiry(run.id) == {"decision": "pending"}
    assert _written(tier) == before


def test_an_approval_before_the_deadline_wins_over_the_expiry(tier: Tier) -> None:
    # Given a run bob approved before its deadline, which then passed
    run = awaiting_approval(tier, window=WINDOW)
    tier.runs.decide(APPROVER, run.id, "approve", None)
    tier.clock.advance(WINDOW)
    before = _written(tier)
    # When the expiry is arbitrated
    outcome = tier.steps.arbitrate_expiry(run.id)
    # Then the approval is what happened, and the expiry writes nothing
    assert outcome == {"decision": "approve"}
    assert _written(tier) == before
    assert tier.run_reader.get_run(run.id).status is RunStatus.AWAITING_APPROVAL
    assert tier.units[-1].commits == 0


def test_an_expiry_after_a_rejection_ends_the_step_and_writes_nothing(tier: Tier) -> None:
    # Given a run bob rejected before its deadline, which then passed
    run = awaiting_approval(tier, window=WINDOW)
    tier.runs.decide(APPROVER, run.id, "reject", None)
    tier.clock.advance(WINDOW)
    before = _written(tier)
    # When the expiry is arbitrated
    # Then the run has ended (rejected): the step ends the workflow, writing nothing
    with pytest.raises(RunEnded):
        tier.steps.arbitrate_expiry(run.id)
    assert _written(tier) == before
    assert tier.run_reader.get_run(run.id).status is RunStatus.REJECTED


def test_an_approval_landing_between_the_expirys_read_and_write_wins(tier: Tier) -> None:
    # Given a run a moment before its deadline
    run = awaiting_approval(tier, window=WINDOW)
    tier.clock.advance(WINDOW - timedelta(milliseconds=10))

    def approved_then_deadline_passes() -> None:
        tier.runs.decide(APPROVER, run.id, "approve", None)
        tier.clock.advance(timedelta(seconds=1))

    # When bob's approval commits after the expiry read the approval waiting, and the
    # deadline passes before the expiry's write
    tier.clock.on_next_reading(approved_then_deadline_passes)
    outcome = tier.steps.arbitrate_expiry(run.id)
    # Then the expiry's commit is refused and the approval is what happened
    assert outcome == {"decision": "approve"}
    assert [uow.commits for uow in tier.units] == [0, 1]
    assert tier.run_reader.get_run(run.id).status is RunStatus.AWAITING_APPROVAL
    approval = tier.run_reader.parts(run.id)["approval"]
    assert (approval.state, approval.body["decided_by"]) == (
        ApprovalState.APPROVED,
        APPROVER.ref,
    )
    # And the reservation was not released
    assert tier.writer_queue.holders == {"ws-1": run.id}
    assert tier.workflow.resumed == [("tok-approval", {"decision": "approve"})]


def test_a_rejection_landing_between_the_expirys_read_and_write_wins(tier: Tier) -> None:
    # Given a run a moment before its deadline
    run = awaiting_approval(tier, window=WINDOW)
    tier.clock.advance(WINDOW - timedelta(milliseconds=10))

    def rejected_then_deadline_passes() -> None:
        tier.runs.decide(APPROVER, run.id, "reject", None)
        tier.clock.advance(timedelta(seconds=1))

    # When bob's rejection commits after the expiry read the run awaiting approval
    tier.clock.on_next_reading(rejected_then_deadline_passes)
    outcome = tier.steps.arbitrate_expiry(run.id)
    # Then the expiry's move is refused and the rejection is what happened
    assert outcome == {"decision": "reject"}
    assert tier.run_reader.get_run(run.id).status is RunStatus.REJECTED
    assert tier.run_reader.parts(run.id)["approval"].state == ApprovalState.REJECTED
    # And the reservation was handed on once, by the rejection
    assert tier.writer_queue.holders == {"ws-1": "run-2"}
    assert tier.workflow.resumed == [
        ("tok-waiter", {"held": True}),
        ("tok-approval", {"decision": "reject"}),
    ]
