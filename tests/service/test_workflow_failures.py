"""A failed workflow step (``WorkflowSteps.fail``) and a lost runner phase
(``WorkflowSteps.end_lost_phase``, its sandbox gone) over the in-memory unit of work:
a plan fails and hands the writer reservation on, an apply whose start was proven needs
recovery and keeps it, an apply that never started fails and hands it on; the open
attempt closes lost (its slot given back, its session revoked) and the apply record
says what is known, in one commit. A step on a run that ended, or one that loses to
the runner's own report, writes nothing. The same steps on moto:
tests/integration/test_sandbox_exits.py, tests/integration/test_apply_record.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runplane.domain.capabilities import Phase
from runplane.domain.entities import Run
from runplane.domain.errors import ConcurrentChange, TransitionRejected
from runplane.domain.parts import ApplyRecordState, AttemptState, RunPart
from runplane.domain.run import RunStatus
from runplane.domain.run_events import EventType
from tests.service.conftest import Tier
from tests.service.scenarios import open_attempt, run_at, settle, written

SLOT = "org#org-acme"
SESSION = "session-hash-1"


def _run(tier: Tier, status: RunStatus) -> Run:
    """``run-1`` at ``status``, holding the workspace's writer reservation with ``run-2``
    waiting."""
    run = run_at(tier, status)
    tier.writer_queue.holders["ws-1"] = run.id
    tier.writer_queue.waiting["ws-1"] = [("run-2", "tok-waiter")]
    return run


def _attempt(tier: Tier, run: Run, phase: Phase) -> RunPart:
    """An open attempt of ``phase`` in sandbox ``task-<phase>``."""
    return open_attempt(tier, run, phase.value, f"task-{phase.value}", SLOT, SESSION)


def _apply_record(tier: Tier, run: Run, state: ApplyRecordState) -> None:
    now = tier.clock.now()
    body = {"resulting_state_version_id": None}
    tier.run_reader.add_part(RunPart(run.id, "apply", state, body, None, now, now))


def test_a_failed_plan_phase_ends_the_run_failed_and_hands_the_writer_on(tier: Tier) -> None:
    # Given a run planning in its plan sandbox, holding the writer reservation with
    # run-2 waiting for it
    run = _run(tier, RunStatus.PLANNING)
    _attempt(tier, run, Phase.PLAN)
    settle(tier)
    # When the workflow's plan phase fails (its wait timed out)
    outcome = tier.steps.fail(run.id, "plan", "States.Timeout")
    # Then the run failed its plan at the next version, in one commit
    assert outcome == {"status": "plan_failed"}
    now = tier.run_reader.get_run(run.id)
    assert (now.status, now.version, now.status_reason) == (
        RunStatus.PLAN_FAILED,
        run.version + 1,
        "plan: States.Timeout",
    )
    assert [uow.commits for uow in tier.units] == [1]
    assert [(e.type, e.status) for e in tier.run_reader.announced] == [
        (EventType.ERRORED, RunStatus.PLAN_FAILED)
    ]
    # And its plan attempt closed lost in the same commit: its token removed, its slot
    # given back, its session revoked; then its sandbox stopped
    attempt = tier.run_reader.parts(run.id)["attempt#plan"]
    assert (attempt.state, attempt.token) == (AttemptState.LOST, None)
    assert "finished_at" in attempt.body
    assert tier.sandboxes.active == {SLOT: 0}
    assert tier.sandboxes.sessions[SESSION] is not None
    assert tier.launcher.stopped == ["task-plan"]
    # And the reservation passed to run-2, whose wait is resumed holding it
    assert tier.writer_queue.holders == {"ws-1": "run-2"}
    assert tier.workflow.resumed == [("tok-waiter", {"held": True})]


def test_a_lost_apply_whose_start_was_proven_needs_recovery(tier: Tier) -> None:
    # Given a run applying in its apply sandbox, its apply record started, holding the
    # writer reservation with run-2 waiting
    run = _run(tier, RunStatus.APPLYING)
    attempt = _attempt(tier, run, Phase.APPLY)
    _apply_record(tier, run, ApplyRecordState.STARTED)
    settle(tier)
    # When its sandbox is noticed gone before the apply's result
    target = tier.steps.end_lost_phase(
        run, Phase.APPLY, attempt, "sandbox stopped", attempt_reason="exit 137"
    )
    # Then the run needs recovery, in one commit
    assert target is RunStatus.NEEDS_RECOVERY
    assert tier.run_reader.get_run(run.id).status is RunStatus.NEEDS_RECOVERY
    assert [uow.commits for uow in tier.units] == [1]
    # And the attempt closed lost noting why, its slot given back, its session revoked
    closed = tier.run_reader.parts(run.id)["attempt#apply"]
    assert (closed.state, closed.token, closed.body["reason"]) == (
        AttemptState.LOST,
        None,
        "exit 137",
    )
    assert tier.sandboxes.active == {SLOT: 0}
    assert tier.sandboxes.sessions[SESSION] is not None
    # And the apply record says nothing is certain
    record = tier.run_reader.parts(run.id)["apply"]
    assert (record.state, record.body["reason"]) == (ApplyRecordState.UNCERTAIN, "sandbox stopped")
    # And the writer authority stays held for recovery: nothing handed on, nothing stopped
    # (the caller stops the sandbox)
    assert tier.writer_queue.holders == {"ws-1": run.id}
    assert tier.writer_queue.waiting["ws-1"] == [("run-2", "tok-waiter")]
    assert tier.workflow.resumed == []
    assert tier.launcher.stopped == []


def test_an_apply_that_never_started_fails_and_hands_the_writer_on(tier: Tier) -> None:
    # Given an approved run whose apply start recorded no attempt (refused for
    # capacity), its apply record pending
    run = _run(tier, RunStatus.AWAITING_APPROVAL)
    _apply_record(tier, run, ApplyRecordState.PENDING)
    settle(tier)
    # When the workflow's apply phase fails
    outcome = tier.steps.fail(run.id, "apply", "NoCapacity")
    # Then the apply is proven not to have started: the run failed its apply and the
    # apply record says so, in one commit
    assert outcome == {"status": "apply_failed"}
    assert tier.run_reader.get_run(run.id).status is RunStatus.APPLY_FAILED
    assert tier.run_reader.parts(run.id)["apply"].state == ApplyRecordState.FAILED
    assert [uow.commits for uow in tier.units] == [1]
    # And the reservation passed to run-2; no sandbox was there to stop
    assert tier.writer_queue.holders == {"ws-1": "run-2"}
    assert tier.workflow.resumed == [("tok-waiter", {"held": True})]
    assert tier.launcher.stopped == []


def test_a_step_on_a_run_that_ended_writes_nothing(tier: Tier) -> None:
    # Given a run whose plan already failed, its attempt closed
    run = _run(tier, RunStatus.PLANNING)
    attempt = _attempt(tier, run, Phase.PLAN)
    tier.run_reader.move(run, RunStatus.PLAN_FAILED, actor="workflow")
    tier.run_reader.set_part(replace(attempt, state=AttemptState.FAILED, token=None))
    settle(tier)
    before = written(tier)
    # When the workflow's failure step runs, and a late sandbox notice is handled
    outcome = tier.steps.fail(run.id, "plan", "States.Timeout")
    lost = tier.steps.end_lost_phase(
        tier.run_reader.get_run(run.id), Phase.PLAN, attempt, "sandbox stopped"
    )
    # Then both find the run ended: nothing is written, handed on or stopped
    assert outcome == {"status": "plan_failed"}
    assert lost is None
    assert written(tier) == before
    assert all(uow.commits == 0 for uow in tier.units)
    assert tier.launcher.stopped == []


def test_a_failure_losing_to_the_runners_report_writes_nothing(tier: Tier) -> None:
    # Given a run planning in its plan sandbox
    run = _run(tier, RunStatus.PLANNING)
    attempt = _attempt(tier, run, Phase.PLAN)
    settle(tier)

    def reported() -> None:
        tier.run_reader.set_part(replace(attempt, state=AttemptState.SUCCEEDED, token=None))

    before_report = tier.sandboxes.saved()
    # When the runner's report closes the attempt after the failure step read it open
    tier.clock.on_next_reading(reported)
    # Then the step's commit is refused on the attempt
    with pytest.raises(ConcurrentChange):
        tier.steps.fail(run.id, "plan", "States.Timeout")
    # And it wrote nothing: the run still planning, the attempt as the report left it,
    # the slot and session untouched, the reservation held, no sandbox stopped
    assert [uow.commits for uow in tier.units] == [0]
    assert tier.run_reader.get_run(run.id) == run
    assert tier.run_reader.parts(run.id)["attempt#plan"].state == AttemptState.SUCCEEDED
    assert tier.sandboxes.saved() == before_report
    assert tier.writer_queue.holders == {"ws-1": run.id}
    assert (tier.workflow.resumed, tier.launcher.stopped) == ([], [])
    assert tier.run_reader.announced == []


def test_a_lost_phase_losing_to_the_runs_move_writes_nothing(tier: Tier) -> None:
    # Given a run planning in its plan sandbox, read with its attempt
    run = _run(tier, RunStatus.PLANNING)
    attempt = _attempt(tier, run, Phase.PLAN)
    settle(tier)
    # When the plan completes after the sandbox notice read the run
    tier.clock.on_next_reading(
        lambda: tier.run_reader.move(
            tier.run_reader.get_run(run.id), RunStatus.PLAN_COMPLETE, actor="workflow"
        )
    )
    before = tier.sandboxes.saved()
    # Then the lost phase's move is refused, and nothing of it is written
    with pytest.raises(TransitionRejected):
        tier.steps.end_lost_phase(run, Phase.PLAN, attempt, "sandbox stopped")
    assert [uow.commits for uow in tier.units] == [0]
    assert tier.run_reader.get_run(run.id).status is RunStatus.PLAN_COMPLETE
    closed = tier.run_reader.parts(run.id)["attempt#plan"]
    assert (closed.state, closed.token) == (AttemptState.STARTED, "tok-plan")
    assert tier.sandboxes.saved() == before
    assert tier.writer_queue.holders == {"ws-1": run.id}
    assert tier.workflow.resumed == []
