"""The unit of work contract: a run's part intents and status move committed all or
nothing, the same cases against the DynamoDB unit of work (on moto, one transaction,
announcing through the outbox) and the in-memory one the service tier uses (tests/service),
so the fake cannot drift."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import (
    AlreadyDecided,
    ConcurrentChange,
    IllegalTransition,
    TransitionRejected,
)
from runplane.domain.run import RunKind, RunStatus, StageStatus
from runplane.domain.run_events import EventType, RunEvent
from runplane.services.lifecycle import RunLifecycle
from runplane.services.repositories import RunLedger, RunReader
from runplane.services.run_events import RunEvents
from runplane.services.unit_of_work import UnitOfWork
from runplane.store.models import OUTBOX_PREFIX, OutboxItem
from runplane.store.run_reader import DynamoRunReader
from runplane.store.unit_of_work import DynamoUnitOfWork
from tests.fake_unit_of_work import InMemoryUnitOfWork
from tests.fakes import FakeClock, InMemoryRunLedger, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)
LATER = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
INPUT = {"configuration_version_id": "cv-1"}


@dataclass
class Units:
    new: Callable[[], UnitOfWork]
    ledger: RunLedger
    reader: RunReader
    announced: Callable[[str], list[RunEvent]]

    def run(self, status: RunStatus = RunStatus.QUEUED, run_id: str = "run-1") -> Run:
        """A plan-only run created in ``status`` with an approval part waiting."""
        run = Run(
            id=run_id,
            organization_id="org-acme",
            workspace_id="ws-1",
            kind=RunKind.PLAN_ONLY,
            status=status,
            version=1,
            created_at=AT,
            updated_at=AT,
        )
        self.ledger.create(run, actor="user:ada", input=INPUT)
        with self.new() as uow:
            uow.parts.put(run_id, "approval", state="waiting", body={"n": 1}, token="t1", now=AT)
            uow.commit()
        return self.reader.get_run(run_id)

    def held(self, run_id: str = "run-1") -> tuple[object, ...]:
        """Everything held of the run, to prove a refused commit changed nothing."""
        return (
            self.reader.get_run(run_id),
            self.reader.stages(run_id),
            self.reader.parts(run_id),
            self.announced(run_id),
        )


def _outbox(run_id: str) -> list[RunEvent]:
    items = OutboxItem.query(f"RUN#{run_id}", OutboxItem.sk.startswith(OUTBOX_PREFIX))
    return [RunEvent.from_message(json.loads(item.message)["event"]) for item in items]


def _never_queued() -> object:
    raise AssertionError("a move's event is written to the outbox, never queued")


@pytest.fixture(params=["dynamodb", "memory"])
def units(request: pytest.FixtureRequest) -> Units:
    clock, ids = FakeClock(), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        lifecycle = RunLifecycle(clock, ids)
        lifecycle.events = RunEvents(clock, _never_queued)  # type: ignore[arg-type]
        return Units(
            lambda: DynamoUnitOfWork(lifecycle.runs, lifecycle.move),
            lifecycle.ledger,
            DynamoRunReader(lifecycle.runs),
            _outbox,
        )
    memory = InMemoryRunLedger(clock, ids)
    return Units(
        lambda: InMemoryUnitOfWork(memory),
        memory,
        memory,
        lambda run_id: [e for e in memory.announced if e.run_id == run_id],
    )


def test_a_part_changes_when_it_is_in_the_state_expected(units: Units) -> None:
    # Given a run whose approval waits, with a token
    units.run()
    # When a unit of work changes it from waiting to approved, keeping the token
    with units.new() as uow:
        uow.parts.change(
            "run-1",
            "approval",
            expected_state="waiting",
            state="approved",
            body={"n": 2},
            now=LATER,
        )
        assert uow.commit() is None
    # Then the approval reads approved with the new body, the token kept
    part = units.reader.parts("run-1")["approval"]
    assert (part.state, part.body, part.token, part.updated_at) == (
        "approved",
        {"n": 2},
        "t1",
        LATER,
    )
    # And a change that removes the token, from any of several states, removes it
    with units.new() as uow:
        uow.parts.change(
            "run-1", "approval", expected_state=("waiting", "approved"), token=None, now=LATER
        )
        uow.commit()
    part = units.reader.parts("run-1")["approval"]
    assert (part.state, part.body, part.token) == ("approved", {"n": 2}, None)


def test_a_change_from_another_state_is_refused_with_its_error_and_writes_nothing(
    units: Units,
) -> None:
    # Given a run whose approval waits
    units.run()
    before = units.held()
    seen: list[str | None] = []

    def decided(held: str | None) -> Exception:
        seen.append(held)
        return AlreadyDecided("run-1", RunStatus.QUEUED, held)

    # When a unit of work changes it from approved, naming its refusal
    with units.new() as uow:
        uow.parts.change(
            "run-1",
            "approval",
            expected_state="approved",
            state="rejected",
            now=LATER,
            on_refused=decided,
        )
        # Then the commit raises that refusal, given the state the part holds
        with pytest.raises(AlreadyDecided):
            uow.commit()
    assert seen == ["waiting"]
    # And a change of a part the run does not have is a concurrent change (held: None)
    with units.new() as uow:
        uow.parts.change("run-1", "plan", expected_state="recorded", state="x", now=LATER)
        with pytest.raises(ConcurrentChange, match="plan is missing, expected recorded"):
            uow.commit()
    # And nothing was written
    assert units.held() == before


def test_a_put_of_a_part_the_run_has_is_refused_and_writes_nothing(units: Units) -> None:
    # Given a run with its approval
    units.run()
    before = units.held()
    # When a unit of work puts another approval
    with units.new() as uow:
        uow.parts.put("run-1", "approval", state="approved", body={}, now=LATER)
        # Then the commit is refused: parts are created once
        with pytest.raises(ConcurrentChange, match="already has its approval"):
            uow.commit()
    assert units.held() == before


def test_a_move_commits_with_the_part_changes_beside_it(units: Units) -> None:
    # Given a queued run whose approval waits
    run = units.run()
    # When a unit of work cancels the run and the approval together
    with units.new() as uow:
        uow.parts.change(
            "run-1", "approval", expected_state="waiting", state="canceled", token=None, now=LATER
        )
        uow.runs.move(run, RunStatus.CANCELED, actor="user:bob", reason="canceled by bob")
        moved = uow.commit()
    # Then both are written: the run at the next version, as the move reports it
    assert moved is not None
    now = units.reader.get_run("run-1")
    assert (now.status, now.version, now.status_reason) == (
        RunStatus.CANCELED,
        run.version + 1,
        "canceled by bob",
    )
    assert (moved.run.status, moved.run.version) == (now.status, now.version)
    assert moved.transition.version == now.version
    assert moved.handoff is None
    assert units.reader.parts("run-1")["approval"].state == "canceled"
    # And its stages closed and its ending announced
    assert {s.status for s in units.reader.stages("run-1").values()} == {StageStatus.SKIPPED}
    assert [(e.type, e.status) for e in units.announced("run-1")] == [
        (EventType.ENDED, RunStatus.CANCELED)
    ]


def test_a_move_from_a_stale_snapshot_is_refused_and_nothing_is_written(units: Units) -> None:
    # Given a run read while queued, which then moved to planning
    stale = units.run()
    units.ledger.move(stale, RunStatus.PLANNING, actor="workflow")
    before = units.held()
    # When a unit of work cancels the stale snapshot and its approval
    with units.new() as uow:
        uow.parts.change("run-1", "approval", expected_state="waiting", state="canceled", now=LATER)
        uow.runs.move(stale, RunStatus.CANCELED, actor="user:bob")
        # Then the move's refusal is raised, and neither the move nor the approval is written
        with pytest.raises(TransitionRejected, match="it is planning at version 2"):
            uow.commit()
    assert units.held() == before


def test_a_move_the_table_does_not_allow_is_refused_at_once(units: Units) -> None:
    # Given a queued run
    run = units.run()
    before = units.held()
    # When a unit of work intends to approve it, then commits
    with units.new() as uow:
        with pytest.raises(IllegalTransition):
            uow.runs.move(run, RunStatus.APPLYING, actor="user:bob")
        uow.commit()
    # Then nothing was intended, so nothing is written
    assert units.held() == before


def test_when_the_second_intent_is_refused_the_first_is_not_written(units: Units) -> None:
    # Given two runs whose approvals wait
    units.run()
    units.run(run_id="run-2")
    before = (units.held("run-1"), units.held("run-2"))
    # When a unit of work approves the first and changes the second from a state it is not in
    with units.new() as uow:
        uow.parts.change("run-1", "approval", expected_state="waiting", state="approved", now=LATER)
        uow.parts.change(
            "run-2", "approval", expected_state="approved", state="rejected", now=LATER
        )
        # Then the second's refusal is raised and the first approval is not written either
        with pytest.raises(ConcurrentChange, match="run run-2: approval is waiting"):
            uow.commit()
    assert (units.held("run-1"), units.held("run-2")) == before


def test_intents_not_committed_are_discarded_when_the_unit_is_left(units: Units) -> None:
    # Given a run whose approval waits
    run = units.run()
    before = units.held()
    # When a unit of work intends a change and a move, and is left without a commit
    with units.new() as uow:
        uow.parts.change("run-1", "approval", expected_state="waiting", state="canceled", now=LATER)
        uow.runs.move(run, RunStatus.CANCELED, actor="user:bob")
    # Then nothing is written, and a commit after leaving it writes nothing either
    assert units.held() == before
    assert uow.commit() is None
    assert units.held() == before
    # And an error inside the block discards the intents as well
    other = units.new()

    def fails() -> None:
        with other:
            other.parts.put("run-1", "plan", state="recorded", body={}, now=LATER)
            raise RuntimeError("the use case failed before its commit")

    with pytest.raises(RuntimeError):
        fails()
    other.commit()
    assert units.held() == before
