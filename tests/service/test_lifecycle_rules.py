"""The run lifecycle's rules the other service-tier files leave out, over the in-memory
unit of work: a decision or cancellation that comes second is refused with the run's
status in every order, a cancellation ends a run in every status it can rest in, a run
that ends before its apply closes its apply record whatever ended it, and a run that
ended never moves again."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import AlreadyDecided, IllegalTransition
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.parts import ApplyRecordState, RunPart
from runplane.domain.run import RunStatus
from runplane.domain.transitions import MAIN_PATH
from runplane.wiring import run_lifecycle
from tests.fakes import RecordingLauncher
from tests.service.conftest import Tier
from tests.service.scenarios import awaiting_approval, open_attempt, run_at, settle, written

S = RunStatus
REVIEWER = Principal(
    kind=PrincipalKind.USER,
    id="bob",
    organization_id="org-acme",
    permissions=frozenset(Permission),
    display="bob",
)


def _act(tier: Tier, run_id: str, action: str) -> object:
    if action == "cancel":
        return tier.runs.cancel(REVIEWER, run_id, RecordingLauncher())
    return tier.runs.decide(REVIEWER, run_id, action, None)


@pytest.mark.parametrize(
    ("first", "second", "status", "approval"),
    [
        # The workflow has not yet moved the approved run: it still awaits approval.
        ("approve", "reject", "awaiting_approval", "approved"),
        ("reject", "approve", "rejected", "rejected"),
        ("approve", "approve", "awaiting_approval", "approved"),
        ("reject", "reject", "rejected", "rejected"),
        ("cancel", "reject", "canceled", "canceled"),
        ("cancel", "approve", "canceled", "canceled"),
        ("reject", "cancel", "rejected", "rejected"),
    ],
)
def test_a_second_decision_or_cancellation_is_refused_naming_the_runs_status(
    tier: Tier, first: str, second: str, status: str, approval: str
) -> None:
    # Given a run awaiting approval that was just decided (or canceled)
    run = awaiting_approval(tier)
    _act(tier, run.id, first)
    before = written(tier)
    # When another decision (or a cancellation) arrives
    with pytest.raises(AlreadyDecided) as refused:
        _act(tier, run.id, second)
    # Then it is a 409 with a code, naming the run's status and its approval
    assert refused.value.http_status == 409
    body = refused.value.to_body()
    assert (body["code"], body["run_id"], body["status"], body["approval"]) == (
        "ALREADY_DECIDED",
        run.id,
        status,
        approval,
    )
    assert status in body["message"]
    # And nothing was written, resumed or ended
    assert written(tier) == before
    assert tier.run_reader.parts(run.id)["approval"].state == approval


def _pending_apply_record(tier: Tier, run: Run, state: str = ApplyRecordState.PENDING) -> None:
    now = tier.clock.now()
    body = {"resulting_state_version_id": None}
    tier.run_reader.add_part(RunPart(run.id, "apply", state, body, None, now, now))


def _apply_record(tier: Tier, run_id: str) -> RunPart:
    return tier.run_reader.parts(run_id)["apply"]


def test_a_rejected_run_closes_its_apply_record(tier: Tier) -> None:
    # Given a run awaiting approval, its apply record pending
    run = awaiting_approval(tier)
    _pending_apply_record(tier, run)
    # When bob rejects the plan
    tier.runs.decide(REVIEWER, run.id, "reject", "not today")
    # Then the run is rejected and, in the same commit, its apply record closed: nothing
    # was applied
    assert tier.run_reader.get_run(run.id).status is S.REJECTED
    record = _apply_record(tier, run.id)
    assert (record.state, record.body["run_status"]) == (ApplyRecordState.CLOSED, "rejected")
    assert [uow.commits for uow in tier.units] == [1]


def test_an_expired_run_closes_its_apply_record(tier: Tier) -> None:
    # Given a run awaiting approval whose deadline has passed, its apply record pending
    run = awaiting_approval(tier, window=timedelta(minutes=10))
    _pending_apply_record(tier, run)
    tier.clock.advance(timedelta(minutes=11))
    # When the workflow's wait times out and the expiry is arbitrated
    assert tier.steps.arbitrate_expiry(run.id) == {"decision": "expired"}
    # Then the run expired and its apply record is closed with it
    assert tier.run_reader.get_run(run.id).status is S.EXPIRED
    record = _apply_record(tier, run.id)
    assert (record.state, record.body["run_status"]) == (ApplyRecordState.CLOSED, "expired")


def _at(status: RunStatus) -> Callable[[Tier], Run]:
    def reach(tier: Tier) -> Run:
        run = run_at(tier, status)
        _pending_apply_record(tier, run)
        return run

    return reach


def _awaiting(tier: Tier) -> Run:
    run = awaiting_approval(tier)
    _pending_apply_record(tier, run)
    return run


def _approved_and_launched(tier: Tier) -> Run:
    """Approved, its apply sandbox launched, the start not yet proven."""
    run = awaiting_approval(tier)
    tier.runs.decide(REVIEWER, run.id, "approve", None)
    _pending_apply_record(tier, run, ApplyRecordState.STARTING)
    open_attempt(tier, run, "apply", "task-apply", "org#org-acme", "session-1")
    return tier.run_reader.get_run(run.id)


BEFORE_APPLY: dict[str, Callable[[Tier], Run]] = {
    "plan_complete": _at(S.PLAN_COMPLETE),
    "policy_passed": _at(S.POLICY_PASSED),
    "awaiting_approval": _awaiting,
    "approved_apply_launched": _approved_and_launched,
}


@pytest.mark.parametrize("where", list(BEFORE_APPLY))
def test_a_run_canceled_before_apply_closes_its_apply_record(tier: Tier, where: str) -> None:
    # Given a run with an apply record that has not started applying
    run = BEFORE_APPLY[where](tier)
    settle(tier)
    # When bob cancels it
    ended = tier.runs.cancel(REVIEWER, run.id, RecordingLauncher())
    # Then it is canceled and its apply record closed (the apply never started)
    assert ended.status is S.CANCELED
    record = _apply_record(tier, run.id)
    assert (record.state, record.body["run_status"]) == (ApplyRecordState.CLOSED, "canceled")
    assert str(record.body["reason"]).startswith("canceled by")


def test_a_policy_step_that_errors_closes_the_apply_record(tier: Tier) -> None:
    # Given a run whose policy evaluation has started, its apply record pending
    run = run_at(tier, S.POLICY_EVALUATING)
    _pending_apply_record(tier, run)
    # When the policy step errors and the workflow's catch ends the run
    outcome = tier.steps.fail(run.id, "policy", "States.TaskFailed")
    # Then the run failed closed and its apply record is closed with it, in one commit
    assert outcome == {"status": "policy_failed"}
    record = _apply_record(tier, run.id)
    assert (record.state, record.body["run_status"]) == (ApplyRecordState.CLOSED, "policy_failed")
    assert [uow.commits for uow in tier.units] == [1]


def _ended(tier: Tier, status: RunStatus) -> Run:
    """A plan-and-apply run that ended ``status`` by a move the table allows."""
    before = {
        S.CANCELED: S.QUEUED,
        S.REJECTED: S.AWAITING_APPROVAL,
        S.EXPIRED: S.AWAITING_APPROVAL,
        S.PLAN_FAILED: S.PLANNING,
        S.SUCCEEDED: S.APPLYING,
    }[status]
    run = run_at(tier, before)
    tier.run_reader.move(run, status, actor="workflow")
    return tier.run_reader.get_run(run.id)


@pytest.mark.parametrize("status", [S.CANCELED, S.REJECTED, S.EXPIRED, S.PLAN_FAILED, S.SUCCEEDED])
def test_a_run_that_ended_never_moves_again(tier: Tier, status: RunStatus) -> None:
    # Given a run that ended, its stages all closed
    run = _ended(tier, status)
    assert all(held.status.is_closed for held in tier.run_reader.stages(run.id).values())
    lifecycle = run_lifecycle(tier.clock, tier.ids, ledger=tier.run_reader)
    settle(tier)
    before = written(tier)
    for target in RunStatus:
        # When it is moved anywhere
        # Then the table refuses the move, and nothing is written or announced
        with pytest.raises(IllegalTransition):
            lifecycle.move(run, target, actor="workflow")
    assert written(tier) == before
    assert tier.run_reader.get_run(run.id) == run


SLOT, SESSION = "org#org-acme", "session-1"
PAST_THE_WAIT = MAIN_PATH[MAIN_PATH.index(S.PLANNING) : MAIN_PATH.index(S.SUCCEEDED)]


def _resting(tier: Tier, status: RunStatus) -> Run:
    """``run-1`` resting in ``status`` as the workflow leaves it there: past the writer
    wait it holds the reservation; planning or applying, its phase's sandbox runs;
    awaiting approval, its approval waits; applying, its apply record started."""
    run = run_at(tier, status)
    now = tier.clock.now()
    if status in PAST_THE_WAIT:
        tier.writer_queue.holders["ws-1"] = run.id
    if status is S.PLANNING:
        open_attempt(tier, run, "plan", "task-plan", SLOT, SESSION)
    if status is S.AWAITING_APPROVAL:
        body: dict[str, object] = {"binding": {}}
        tier.run_reader.add_part(RunPart(run.id, "approval", "waiting", body, "tok", now, now))
    if status is S.APPLYING:
        open_attempt(tier, run, "apply", "task-apply", SLOT, SESSION)
        _pending_apply_record(tier, run, ApplyRecordState.STARTED)
    return tier.run_reader.get_run(run.id)


@pytest.mark.parametrize("status", MAIN_PATH[: MAIN_PATH.index(S.SUCCEEDED)])
def test_a_cancellation_ends_the_run_in_every_status_it_can_rest_in(
    tier: Tier, status: RunStatus
) -> None:
    # Given a run resting in ``status``
    run = _resting(tier, status)
    running = [
        str(part.body["sandbox_ref"])
        for name, part in tier.run_reader.parts(run.id).items()
        if name.startswith("attempt#")
    ]
    launcher = RecordingLauncher()
    # When bob cancels it
    ended = tier.runs.cancel(REVIEWER, run.id, launcher)
    # Then it ends canceled (apply_interrupted while applying), its cancel signal accepted
    interrupted = status is S.APPLYING
    assert ended.status is (S.APPLY_INTERRUPTED if interrupted else S.CANCELED)
    assert tier.run_reader.get_run(run.id) == ended
    assert tier.run_reader.parts(run.id)["signal#cancel"].state == "accepted"
    # And every sandbox it had running is stopped, its attempt closed, its slot returned
    assert launcher.stopped == running
    for name, part in tier.run_reader.parts(run.id).items():
        if name.startswith("attempt#"):
            assert part.state not in {"launching", "started"}, (name, part.state)
    assert all(taken == 0 for taken in tier.sandboxes.active.values())
    # And the workspace is free unless the apply's outcome needs recovery
    assert tier.writer_queue.holders.get("ws-1") == (run.id if interrupted else None)
    # And a second cancellation is refused with the run's status, writing nothing
    before = written(tier)
    with pytest.raises(AlreadyDecided) as again:
        tier.runs.cancel(REVIEWER, run.id, RecordingLauncher())
    assert (again.value.http_status, again.value.status) == (409, ended.status.value)
    assert written(tier) == before
