"""The run lifecycle's rules over the in-memory run ledger: which moves are allowed,
what a committed one writes and announces, and that a refused one writes nothing.

Only plain moves run here: a move that releases the workspace writer reservation or
closes an open apply record (a plan-and-apply run that ends) is composed on the store,
and is tested over moto (tests/integration/test_run_transitions.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import IllegalTransition, TransitionRejected
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus, Transitioned
from runplane.domain.run_events import EventType, RunEvent, drift_event_id
from runplane.domain.transitions import MAIN_PATH
from runplane.services.lifecycle import RunLifecycle
from runplane.wiring import run_lifecycle
from tests.fakes import FakeClock, InMemoryRunLedger, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)
S = RunStatus
BEFORE_APPLY = MAIN_PATH[: MAIN_PATH.index(S.AWAITING_APPROVAL)]
ENDED = [status for status in RunStatus if status.is_terminal]


@dataclass
class Lifecycle:
    ledger: InMemoryRunLedger
    lifecycle: RunLifecycle

    def run(
        self,
        status: RunStatus,
        kind: RunKind = RunKind.PLAN_ONLY,
        plan_has_changes: bool | None = None,
    ) -> Run:
        """A run created and walked along the main path to ``status`` (as the workflow
        would, through the lifecycle); an ending is written as the ledger's creation."""
        walks = status in MAIN_PATH and not status.is_terminal
        path = list(MAIN_PATH[: MAIN_PATH.index(status) + 1]) if walks else []
        run = Run(
            id=f"run-{len(self.ledger.runs) + 1}",
            organization_id="org-acme",
            workspace_id="ws-1",
            kind=kind,
            status=path[0] if path else status,
            version=1,
            created_at=AT,
            updated_at=AT,
        )
        self.ledger.create(run, actor="user:ada", input={"configuration_version_id": "cv-1"})
        for target in path[1:]:
            known = target is S.PLAN_COMPLETE and plan_has_changes is not None
            self.lifecycle.move(
                self.ledger.get_run(run.id),
                target,
                actor="workflow",
                run_updates={"plan_has_changes": plan_has_changes} if known else None,
            )
        self.ledger.announced.clear()
        self.ledger.audit.clear()
        return self.ledger.get_run(run.id)

    def written(self, run_id: str) -> tuple[object, ...]:
        return (
            self.ledger.get_run(run_id),
            self.ledger.stages(run_id),
            list(self.ledger.audit),
            list(self.ledger.announced),
        )


@pytest.fixture
def runs() -> Lifecycle:
    clock, ids = FakeClock(), SeededIds()
    ledger = InMemoryRunLedger(clock, ids)
    return Lifecycle(ledger, run_lifecycle(clock, ids, ledger=ledger))


def _stage_statuses(runs: Lifecycle, run_id: str) -> dict[Stage, StageStatus]:
    return {stage: held.status for stage, held in runs.ledger.stages(run_id).items()}


@pytest.mark.parametrize("status", BEFORE_APPLY)
def test_a_run_is_canceled_from_any_status_before_approval(
    runs: Lifecycle, status: RunStatus
) -> None:
    # Given a plan-only run resting in a status before approval
    run = runs.run(status)
    before = _stage_statuses(runs, run.id)
    # When it is canceled
    moved = runs.lifecycle.move(run, S.CANCELED, actor="user:bob", reason="canceled by bob")
    # Then it ended canceled at the next version, with the reason
    now = runs.ledger.get_run(run.id)
    assert (now.status, now.version, now.status_reason) == (
        S.CANCELED,
        run.version + 1,
        "canceled by bob",
    )
    assert moved.transition.version == now.version
    assert moved.handoff is None
    # And no stage is left open: the running one failed, those not started were
    # skipped, and those completed stayed completed
    after = _stage_statuses(runs, run.id)
    for stage, held in before.items():
        expected = {
            StageStatus.PENDING: StageStatus.SKIPPED,
            StageStatus.RUNNING: StageStatus.FAILED,
            StageStatus.COMPLETED: StageStatus.COMPLETED,
        }[held]
        assert after[stage] is expected, stage
    # And the move was audited and announced as the run's ending
    assert [(a.type, a.actor) for a in runs.ledger.audit] == [("run.canceled", "user:bob")]
    [event] = runs.ledger.announced
    assert (event.type, event.status, event.reason) == (
        EventType.ENDED,
        S.CANCELED,
        "canceled by bob",
    )


@pytest.mark.parametrize("status", [S.APPLYING, *ENDED])
def test_a_run_applying_or_ended_cannot_be_canceled_and_nothing_is_written(
    runs: Lifecycle, status: RunStatus
) -> None:
    # Given a plan-and-apply run applying, or a run that has ended
    run = runs.run(status, RunKind.PLAN_AND_APPLY, plan_has_changes=True)
    before = runs.written(run.id)
    # When it is canceled
    # Then the table refuses the move (an apply is interrupted, not canceled) before
    # anything is read, and nothing is written or announced
    with pytest.raises(IllegalTransition):
        runs.lifecycle.move(run, S.CANCELED, actor="user:bob")
    assert runs.written(run.id) == before


def test_an_approval_starts_the_apply_of_a_run_awaiting_it(runs: Lifecycle) -> None:
    # Given a plan-and-apply run with changes, awaiting approval
    run = runs.run(S.AWAITING_APPROVAL, RunKind.PLAN_AND_APPLY, plan_has_changes=True)
    # When it is approved
    runs.lifecycle.move(run, S.APPLYING, actor="user:bob")
    # Then it applies: the approval stage completed, the apply running; no event is
    # announced inside the active path
    assert runs.ledger.get_run(run.id).status is S.APPLYING
    stages = _stage_statuses(runs, run.id)
    assert (stages[Stage.APPROVAL], stages[Stage.APPLY]) == (
        StageStatus.COMPLETED,
        StageStatus.RUNNING,
    )
    assert [a.type for a in runs.ledger.audit] == ["run.apply_started"]
    assert runs.ledger.announced == []


@pytest.mark.parametrize("target", [S.APPLYING, S.REJECTED])
@pytest.mark.parametrize("status", [*BEFORE_APPLY, S.APPLYING, *ENDED])
def test_a_run_not_awaiting_approval_cannot_be_approved_or_discarded(
    runs: Lifecycle, status: RunStatus, target: RunStatus
) -> None:
    # Given a plan-and-apply run with changes that does not await approval
    run = runs.run(status, RunKind.PLAN_AND_APPLY, plan_has_changes=True)
    before = runs.written(run.id)
    # When it is approved (its apply started) or discarded (rejected)
    # Then the move is refused and nothing is written or announced
    with pytest.raises(IllegalTransition):
        runs.lifecycle.move(run, target, actor="user:bob")
    assert runs.written(run.id) == before


def test_a_run_without_changes_never_awaits_approval(runs: Lifecycle) -> None:
    # Given a plan-and-apply run past its policy whose plan has no changes
    run = runs.run(S.POLICY_PASSED, RunKind.PLAN_AND_APPLY, plan_has_changes=False)
    before = runs.written(run.id)
    # When it is moved to await approval
    # Then the table refuses it (there is nothing to approve) and nothing is written
    with pytest.raises(IllegalTransition, match="requires"):
        runs.lifecycle.move(run, S.AWAITING_APPROVAL, actor="workflow")
    assert runs.written(run.id) == before


def test_an_approval_request_announces_that_the_run_needs_attention(runs: Lifecycle) -> None:
    # Given a plan-and-apply run with changes, past its policy
    run = runs.run(S.POLICY_PASSED, RunKind.PLAN_AND_APPLY, plan_has_changes=True)
    deadline = AT + timedelta(hours=4)
    # When it moves to await approval until a deadline
    runs.lifecycle.move(
        run,
        S.AWAITING_APPROVAL,
        actor="workflow",
        run_updates={"approval_expires_at": deadline},
    )
    # Then the run holds the deadline and its event says it needs attention until then
    assert runs.ledger.get_run(run.id).approval_expires_at == deadline
    [event] = runs.ledger.announced
    assert (event.type, event.details["approval_expires_at"]) == (
        EventType.NEEDS_ATTENTION,
        deadline.isoformat(),
    )


def test_a_move_from_a_stale_snapshot_is_refused_at_once_and_writes_nothing(
    runs: Lifecycle,
) -> None:
    # Given a run read while queued, which its workflow then moved to planning
    stale = runs.run(S.QUEUED)
    runs.lifecycle.move(stale, S.PLANNING, actor="workflow")
    before = runs.written(stale.id)
    # When the stale snapshot is canceled
    # Then the move is refused for the run as it is now (not retried), and nothing
    # is written or announced
    with pytest.raises(TransitionRejected, match="it is planning at version 3"):
        runs.lifecycle.move(stale, S.CANCELED, actor="user:bob")
    assert runs.written(stale.id) == before


def test_a_caller_announces_further_events_with_the_move(runs: Lifecycle) -> None:
    # Given a plan-only run whose policy passed
    run = runs.run(S.POLICY_PASSED)

    def drift(moved: Transitioned) -> list[RunEvent]:
        return [
            RunEvent(
                id=drift_event_id(moved.run_id),
                type=EventType.DRIFT_DETECTED,
                run_id=moved.run_id,
                organization_id=run.organization_id,
                workspace_id=run.workspace_id,
                run_kind=run.kind,
                status=moved.status,
                at=moved.at,
            )
        ]

    # When it ends, announcing drift found by its plan with the move
    moved = runs.lifecycle.move(run, S.SUCCEEDED, actor="workflow", also_announce=drift)
    # Then its ending and the drift are both announced, made of the committed move
    assert [(e.type, e.status, e.at) for e in runs.ledger.announced] == [
        (EventType.ENDED, S.SUCCEEDED, moved.transition.at),
        (EventType.DRIFT_DETECTED, S.SUCCEEDED, moved.transition.at),
    ]
