"""Cancellations (``Runs.cancel``) over the in-memory unit of work: before apply a run
ends canceled and gives up its writer reservation or its place in the queue, during
apply it ends apply_interrupted and keeps the reservation; its open attempts are
stopped (slots given back, sessions revoked, sandboxes stopped) and its waits ended;
a cancellation that loses to a decision or the run's end is refused with what the run
is, writing nothing. The same cancellations on moto and over HTTP:
tests/integration/test_sandbox_lifecycle.py, tests/e2e/test_cancellation.py."""

from __future__ import annotations

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import AlreadyDecided
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.parts import ApplyRecordState, ApprovalState, AttemptState, RunPart
from runplane.domain.run import RunStatus, Stage, StageStatus
from runplane.domain.run_events import EventType
from tests.fakes import RecordingLauncher
from tests.service.conftest import Tier
from tests.service.scenarios import open_attempt, run_at, settle, written

CANCELER = Principal(
    kind=PrincipalKind.USER,
    id="bob",
    organization_id="org-acme",
    permissions=frozenset(Permission),
    display="bob",
)
SLOT = "org#org-acme"
SESSION = "session-hash-1"


def _attempt(tier: Tier, run: Run, phase: str, reference: str) -> None:
    open_attempt(tier, run, phase, reference, SLOT, SESSION)


def _part(tier: Tier, run: Run, name: str, state: str, token: str | None, **body: object) -> None:
    now = tier.clock.now()
    tier.run_reader.add_part(RunPart(run.id, name, state, dict(body), token, now, now))


def test_before_apply_a_run_is_canceled_and_its_reservation_handed_on(tier: Tier) -> None:
    # Given a run awaiting approval that holds the workspace's writer reservation, run-2
    # waiting for it; the approval's wait holds its token
    run = run_at(tier, RunStatus.AWAITING_APPROVAL)
    _part(tier, run, "approval", ApprovalState.WAITING, "tok-approval", binding={})
    tier.writer_queue.holders["ws-1"] = run.id
    tier.writer_queue.waiting["ws-1"] = [("run-2", "tok-waiter")]
    settle(tier)
    launcher = RecordingLauncher()
    # When bob cancels it
    canceled = tier.runs.cancel(CANCELER, run.id, launcher)
    # Then the run is canceled at the next version, as one commit wrote it
    now = tier.run_reader.get_run(run.id)
    assert (now.status, now.version, now.status_reason) == (
        RunStatus.CANCELED,
        run.version + 1,
        "canceled by bob",
    )
    assert canceled == now
    assert [uow.commits for uow in tier.units] == [1]
    assert tier.run_reader.stages(run.id)[Stage.APPLY].status is StageStatus.SKIPPED
    assert [(e.type, e.status) for e in tier.run_reader.announced] == [
        (EventType.ENDED, RunStatus.CANCELED)
    ]
    # With its cancel signal, and its approval canceled, its token removed
    signal = tier.run_reader.parts(run.id)["signal#cancel"]
    assert (signal.state, signal.body["requested_by"]) == ("accepted", CANCELER.ref)
    approval = tier.run_reader.parts(run.id)["approval"]
    assert (approval.state, approval.token) == (ApprovalState.CANCELED, None)
    # And the reservation passed to run-2 in the same commit, whose wait is resumed
    # holding it; the canceled run's approval wait is ended
    assert tier.writer_queue.holders == {"ws-1": "run-2"}
    assert tier.workflow.resumed == [("tok-waiter", {"held": True})]
    assert tier.workflow.failed == [("tok-approval", "RunEnded")]
    assert launcher.stopped == []


def test_before_apply_a_waiting_run_is_canceled_and_leaves_the_queue(tier: Tier) -> None:
    # Given run-2 planning, in its plan sandbox, and waiting for the writer reservation
    # run-1 holds
    holder = run_at(tier, RunStatus.AWAITING_APPROVAL)
    run = run_at(tier, RunStatus.PLANNING, run_id="run-2")
    _attempt(tier, run, "plan", "task-plan")
    tier.writer_queue.holders["ws-1"] = holder.id
    tier.writer_queue.waiting["ws-1"] = [(run.id, "tok-queue")]
    settle(tier)
    launcher = RecordingLauncher()
    # When bob cancels it
    tier.runs.cancel(CANCELER, run.id, launcher)
    # Then it is canceled and has left the queue; run-1 still holds the reservation
    assert tier.run_reader.get_run(run.id).status is RunStatus.CANCELED
    assert tier.writer_queue.holders == {"ws-1": holder.id}
    assert tier.writer_queue.waiting["ws-1"] == []
    # And its plan attempt was stopped in the same commit: its slot given back, its
    # session revoked, its token removed; then its sandbox stopped
    attempt = tier.run_reader.parts(run.id)["attempt#plan"]
    assert (attempt.state, attempt.token) == (AttemptState.STOPPED, None)
    assert "finished_at" in attempt.body
    assert tier.sandboxes.active == {SLOT: 0}
    assert tier.sandboxes.sessions[SESSION] is not None
    assert launcher.stopped == ["task-plan"]
    # And both its waits were ended: its attempt's and its place in the queue's
    assert sorted(tier.workflow.failed) == [("tok-plan", "RunEnded"), ("tok-queue", "RunEnded")]
    assert tier.workflow.resumed == []


def test_during_apply_a_run_is_interrupted_and_keeps_the_writer_authority(tier: Tier) -> None:
    # Given a run applying in its apply sandbox, its apply record started, holding the
    # writer reservation with run-2 waiting
    run = run_at(tier, RunStatus.APPLYING)
    _attempt(tier, run, "apply", "task-apply")
    _part(tier, run, "apply", ApplyRecordState.STARTED, None, resulting_state_version_id=None)
    tier.writer_queue.holders["ws-1"] = run.id
    tier.writer_queue.waiting["ws-1"] = [("run-2", "tok-waiter")]
    settle(tier)
    launcher = RecordingLauncher()
    # When bob cancels it
    interrupted = tier.runs.cancel(CANCELER, run.id, launcher)
    # Then the apply is interrupted, and the apply record closed as uncertain with it
    assert interrupted.status is RunStatus.APPLY_INTERRUPTED
    assert tier.run_reader.get_run(run.id) == interrupted
    assert tier.run_reader.stages(run.id)[Stage.APPLY].status is StageStatus.FAILED
    record = tier.run_reader.parts(run.id)["apply"]
    assert (record.state, record.body["run_status"]) == (
        ApplyRecordState.UNCERTAIN,
        "apply_interrupted",
    )
    # And the writer authority stays held until recovery: nothing is handed on
    assert tier.writer_queue.holders == {"ws-1": run.id}
    assert tier.writer_queue.waiting["ws-1"] == [("run-2", "tok-waiter")]
    assert tier.workflow.resumed == []
    # And the apply attempt was stopped, its sandbox too, and its wait ended
    assert tier.run_reader.parts(run.id)["attempt#apply"].state == AttemptState.STOPPED
    assert tier.sandboxes.active == {SLOT: 0}
    assert launcher.stopped == ["task-apply"]
    assert tier.workflow.failed == [("tok-apply", "RunEnded")]


def test_a_cancel_that_loses_to_a_rejection_is_refused_with_it(tier: Tier) -> None:
    # Given a run awaiting approval
    run = run_at(tier, RunStatus.AWAITING_APPROVAL)
    _part(tier, run, "approval", ApprovalState.WAITING, "tok-approval", binding={})
    launcher = RecordingLauncher()
    # When ada's rejection commits after bob's cancellation read the run
    tier.clock.on_next_reading(lambda: tier.runs.decide(CANCELER, run.id, "reject", None))
    # Then the cancellation is refused with the run's real outcome
    with pytest.raises(AlreadyDecided, match="it is rejected and its approval is rejected"):
        tier.runs.cancel(CANCELER, run.id, launcher)
    # And it wrote nothing: its commit was refused (the rejection's is the only one),
    # and read again the run had ended
    assert [uow.commits for uow in tier.units] == [0, 1, 0, 0]
    assert "signal#cancel" not in tier.run_reader.parts(run.id)
    assert tier.run_reader.get_run(run.id).status is RunStatus.REJECTED
    assert tier.workflow.failed == []
    assert launcher.stopped == []


def test_a_cancel_that_loses_to_the_apply_result_is_refused_with_it(tier: Tier) -> None:
    # Given a run applying in its apply sandbox
    run = run_at(tier, RunStatus.APPLYING)
    _attempt(tier, run, "apply", "task-apply")
    launcher = RecordingLauncher()

    def applied() -> None:
        tier.run_reader.move(tier.run_reader.get_run(run.id), RunStatus.SUCCEEDED, actor="wf")

    # When the apply's success commits after bob's cancellation read the run
    tier.clock.on_next_reading(applied)
    # Then the cancellation is refused: the run succeeded
    with pytest.raises(AlreadyDecided, match="it is succeeded"):
        tier.runs.cancel(CANCELER, run.id, launcher)
    # And it wrote nothing: the attempt open, its slot held, no signal, no sandbox stopped
    assert all(uow.commits == 0 for uow in tier.units)
    parts = tier.run_reader.parts(run.id)
    assert "signal#cancel" not in parts
    assert parts["attempt#apply"].state == "started"
    assert tier.sandboxes.active == {SLOT: 1}
    assert tier.sandboxes.sessions[SESSION] is None
    assert (launcher.stopped, tier.workflow.failed) == ([], [])


def test_an_approval_that_lands_first_does_not_stop_the_cancel(tier: Tier) -> None:
    # Given a run awaiting approval
    run = run_at(tier, RunStatus.AWAITING_APPROVAL)
    _part(tier, run, "approval", ApprovalState.WAITING, "tok-approval", binding={})
    # When ada's approval commits after bob's cancellation read the run
    tier.clock.on_next_reading(lambda: tier.runs.decide(CANCELER, run.id, "approve", None))
    canceled = tier.runs.cancel(CANCELER, run.id, RecordingLauncher())
    # Then the cancellation's first commit was refused (the approval was no longer
    # waiting), and its second, reading the run again, canceled it, the approval kept
    assert [uow.commits for uow in tier.units] == [0, 1, 1]
    assert canceled.status is RunStatus.CANCELED
    assert tier.run_reader.parts(run.id)["approval"].state == ApprovalState.APPROVED


def test_a_cancel_of_a_run_that_ended_writes_nothing(tier: Tier) -> None:
    # Given a run that succeeded
    run = run_at(tier, RunStatus.SUCCEEDED)
    _part(tier, run, "approval", ApprovalState.APPROVED, None, binding={})
    before = written(tier)
    launcher = RecordingLauncher()
    # When bob cancels it
    # Then the cancellation is refused with the run's outcome, and nothing is written,
    # stopped or ended
    with pytest.raises(AlreadyDecided, match="it is succeeded and its approval is approved"):
        tier.runs.cancel(CANCELER, run.id, launcher)
    assert written(tier) == before
    assert all(uow.commits == 0 for uow in tier.units)
    assert launcher.stopped == []
