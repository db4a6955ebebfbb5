"""The run ledger contract: creating a run and moving its status, the same cases against
the DynamoDB store (on moto, announcing through the outbox) and the in-memory fake the
service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import IllegalTransition, RunAlreadyExists, TransitionRejected
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus, Transitioned
from runplane.domain.run_events import EventType, RunEvent, drift_event_id
from runplane.services.repositories import RunLedger, RunReader
from runplane.services.run_events import RunEvents
from runplane.store.models import OUTBOX_PREFIX, OutboxItem
from runplane.store.outbox import DynamoEventOutbox
from runplane.store.run_ledger import DynamoRunLedger
from runplane.store.run_reader import DynamoRunReader
from runplane.store.runs import RunRepository
from tests.fakes import FakeClock, InMemoryRunLedger, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)
INPUT = {"configuration_version_id": "cv-1", "engine_version": "1.0.3"}


def _run(
    run_id: str = "run-1",
    status: RunStatus = RunStatus.DISPATCH_PENDING,
    kind: RunKind = RunKind.PLAN_ONLY,
    version: int = 1,
) -> Run:
    return Run(
        id=run_id,
        organization_id="org-acme",
        workspace_id="ws-1",
        kind=kind,
        status=status,
        version=version,
        created_at=AT,
        updated_at=AT,
        definition_version="def-1",
        build_sha="abc",
        created_by="user:ada",
        runner_release="r1",
    )


@dataclass
class Ledger:
    ledger: RunLedger
    reader: RunReader
    # What the ledger recorded of a run: (type, actor, details) of each audit event, and
    # the run events it announced.
    audit: Callable[[str], list[tuple[str, str, dict[str, str]]]]
    announced: Callable[[str], list[RunEvent]]


def _outbox(run_id: str) -> list[RunEvent]:
    items = OutboxItem.query(f"RUN#{run_id}", OutboxItem.sk.startswith(OUTBOX_PREFIX))
    return [RunEvent.from_message(json.loads(item.message)["event"]) for item in items]


def _never_queued() -> object:
    raise AssertionError("a move's event is written to the outbox, never queued")


@pytest.fixture(params=["dynamodb", "memory"])
def runs(request: pytest.FixtureRequest) -> Ledger:
    clock, ids = FakeClock(), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        repository = RunRepository(clock, ids)
        events = RunEvents(clock, _never_queued, DynamoEventOutbox())  # type: ignore[arg-type]
        return Ledger(
            DynamoRunLedger(repository, lambda: events),
            DynamoRunReader(repository),
            lambda run_id: [
                (e.type, e.actor, dict(e.details)) for e in repository.audit_trail(run_id)
            ],
            _outbox,
        )
    memory = InMemoryRunLedger(clock, ids)
    return Ledger(
        memory,
        memory,
        lambda run_id: [
            (e.type, e.actor, e.details) for e in memory.audit if e.subject_id == run_id
        ],
        lambda run_id: [e for e in memory.announced if e.run_id == run_id],
    )


def _snapshot(runs: Ledger, run_id: str) -> tuple[object, ...]:
    """Everything the ledger holds of a run, to prove a refused write changed nothing."""
    return (
        runs.reader.get_run(run_id),
        runs.reader.stages(run_id),
        runs.reader.parts(run_id),
        runs.audit(run_id),
        runs.announced(run_id),
    )


def test_a_created_run_reads_back_with_its_stages_input_and_creation_event(runs: Ledger) -> None:
    # Given a run created by ada
    runs.ledger.create(replace(_run(), created_by=None), actor="user:ada", input=INPUT)
    # When it is read back
    # Then it is whole, created by ada, its four stages pending, its input recorded,
    # its creation audited, and nothing announced (a run's first event is a move's)
    assert runs.reader.get_run("run-1") == _run()
    assert {s.status for s in runs.reader.stages("run-1").values()} == {StageStatus.PENDING}
    assert sorted(runs.reader.stages("run-1")) == sorted(Stage)
    input_part = runs.reader.parts("run-1")["input"]
    assert (input_part.state, input_part.body) == ("recorded", INPUT)
    assert runs.audit("run-1") == [
        ("run.created", "user:ada", {"kind": "plan_only", "status": "dispatch_pending"})
    ]
    assert runs.announced("run-1") == []


def test_a_taken_run_id_is_refused_and_the_first_run_stays(runs: Ledger) -> None:
    # Given a run
    runs.ledger.create(_run(), actor="user:ada", input=INPUT)
    before = _snapshot(runs, "run-1")
    # When another run is created with its ID
    with pytest.raises(RunAlreadyExists):
        runs.ledger.create(
            replace(_run(), kind=RunKind.PLAN_AND_APPLY), actor="user:bob", input={"other": "x"}
        )
    # Then the first run, its input and its trail are unchanged
    assert _snapshot(runs, "run-1") == before


def test_an_allowed_move_commits_with_its_stages_audit_and_event(runs: Ledger) -> None:
    # Given a plan-only run whose plan is running
    runs.ledger.create(_run(status=RunStatus.PLANNING), actor="user:ada", input=INPUT)
    run = runs.reader.get_run("run-1")
    # When it is canceled
    moved = runs.ledger.move(run, RunStatus.CANCELED, actor="user:bob", reason="not needed")
    # Then the run is canceled at the next version with the reason, the running plan
    # failed and the stages not started skipped, the move audited and its event announced
    assert (moved.source, moved.status, moved.version, moved.event) == (
        RunStatus.PLANNING,
        RunStatus.CANCELED,
        2,
        "run.canceled",
    )
    now = runs.reader.get_run("run-1")
    assert (now.status, now.version, now.status_reason, now.updated_at) == (
        RunStatus.CANCELED,
        2,
        "not needed",
        moved.at,
    )
    stages = runs.reader.stages("run-1")
    assert {stage: s.status for stage, s in stages.items()} == {
        Stage.PLAN: StageStatus.FAILED,
        Stage.POLICY: StageStatus.SKIPPED,
        Stage.APPROVAL: StageStatus.SKIPPED,
        Stage.APPLY: StageStatus.SKIPPED,
    }
    assert stages[Stage.PLAN].finished_at == moved.at
    assert runs.audit("run-1")[-1] == (
        "run.canceled",
        "user:bob",
        {"from": "planning", "to": "canceled", "reason": "not needed"},
    )
    [event] = runs.announced("run-1")
    assert (event.id, event.type, event.status, event.reason, dict(event.details)) == (
        "run-1.0000000002",
        EventType.ENDED,
        RunStatus.CANCELED,
        "not needed",
        {"from_status": "planning"},
    )


def test_a_move_inside_the_active_path_announces_nothing_and_sets_its_updates(
    runs: Ledger,
) -> None:
    # Given a plan-and-apply run whose plan completed, with no reason yet
    runs.ledger.create(_run(status=RunStatus.QUEUED), actor="user:ada", input=INPUT)
    run = runs.reader.get_run("run-1")
    # When its plan starts, then it records a plan with changes and its pinned state
    started = runs.ledger.move(run, RunStatus.PLANNING, actor="workflow")
    run = runs.reader.get_run("run-1")
    runs.ledger.move(
        run,
        RunStatus.PLAN_COMPLETE,
        actor="workflow",
        run_updates={"plan_has_changes": True, "predecessor_sv_id": "sv-1"},
    )
    # Then the plan stage ran from the first move, the updates are set, and neither
    # move announced anything
    now = runs.reader.get_run("run-1")
    assert (now.status, now.version, now.plan_has_changes, now.predecessor_sv_id) == (
        RunStatus.PLAN_COMPLETE,
        3,
        True,
        "sv-1",
    )
    plan = runs.reader.stages("run-1")[Stage.PLAN]
    assert (plan.status, plan.started_at) == (StageStatus.COMPLETED, started.at)
    assert runs.announced("run-1") == []


def test_an_approval_request_announces_its_deadline_and_what_the_caller_adds(
    runs: Ledger,
) -> None:
    # Given a plan-and-apply run past its policy, its plan with changes
    runs.ledger.create(
        _run(status=RunStatus.PLANNING, kind=RunKind.PLAN_AND_APPLY),
        actor="user:ada",
        input=INPUT,
    )
    changes = {"plan_has_changes": True}
    for step in (RunStatus.PLAN_COMPLETE, RunStatus.POLICY_EVALUATING, RunStatus.POLICY_PASSED):
        runs.ledger.move(runs.reader.get_run("run-1"), step, actor="workflow", run_updates=changes)
        changes = {}
    run = runs.reader.get_run("run-1")
    deadline = AT + timedelta(hours=1)

    def drift(moved: Transitioned) -> list[RunEvent]:
        return [
            RunEvent(
                id=drift_event_id(moved.run_id),
                type=EventType.DRIFT_DETECTED,
                run_id=moved.run_id,
                organization_id="org-acme",
                workspace_id="ws-1",
                run_kind=RunKind.PLAN_AND_APPLY,
                status=moved.status,
                at=moved.at,
            )
        ]

    # When it moves to await approval with a deadline, announcing drift with it
    runs.ledger.move(
        run,
        RunStatus.AWAITING_APPROVAL,
        actor="workflow",
        run_updates={"approval_expires_at": deadline},
        also_announce=drift,
    )
    # Then it awaits approval until the deadline, and both events are announced
    assert runs.reader.get_run("run-1").approval_expires_at == deadline
    announced = {e.type: e for e in runs.announced("run-1")}
    assert sorted(announced) == [EventType.DRIFT_DETECTED, EventType.NEEDS_ATTENTION]
    assert dict(announced[EventType.NEEDS_ATTENTION].details) == {
        "from_status": "policy_passed",
        "approval_expires_at": deadline.isoformat(),
    }
    assert announced[EventType.DRIFT_DETECTED].id == "run-1.drift"


@pytest.mark.parametrize(
    ("status", "target"),
    [
        (RunStatus.QUEUED, RunStatus.PLAN_COMPLETE),  # skips a step
        (RunStatus.CANCELED, RunStatus.QUEUED),  # out of an ending
        (RunStatus.POLICY_PASSED, RunStatus.AWAITING_APPROVAL),  # plan-only: nothing to apply
    ],
)
def test_a_move_the_table_does_not_allow_is_refused_and_writes_nothing(
    runs: Ledger, status: RunStatus, target: RunStatus
) -> None:
    # Given a plan-only run
    runs.ledger.create(_run(status=status), actor="user:ada", input=INPUT)
    before = _snapshot(runs, "run-1")
    # When it is moved where the table does not allow
    with pytest.raises(IllegalTransition):
        runs.ledger.move(runs.reader.get_run("run-1"), target, actor="user:bob")
    # Then nothing changed and nothing was announced
    assert _snapshot(runs, "run-1") == before


def test_a_stale_snapshot_is_refused_and_writes_nothing(runs: Ledger) -> None:
    # Given a run read at version 1, which then moved on to version 2
    runs.ledger.create(_run(status=RunStatus.QUEUED), actor="user:ada", input=INPUT)
    stale = runs.reader.get_run("run-1")
    runs.ledger.move(stale, RunStatus.PLANNING, actor="workflow")
    before = _snapshot(runs, "run-1")
    # When the stale snapshot is canceled (a move the table allows from queued)
    with pytest.raises(TransitionRejected) as refused:
        runs.ledger.move(stale, RunStatus.CANCELED, actor="user:bob")
    # Then it is refused for the run as it is now, and nothing changed or was announced
    assert "planning at version 2" in refused.value.message
    assert _snapshot(runs, "run-1") == before


def test_a_move_of_an_unknown_run_is_refused(runs: Ledger) -> None:
    with pytest.raises(TransitionRejected) as refused:
        runs.ledger.move(_run("run-none", RunStatus.QUEUED), RunStatus.CANCELED, actor="x")
    assert "does not exist" in refused.value.message
    assert runs.announced("run-none") == []
