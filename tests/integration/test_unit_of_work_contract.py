"""The unit of work contract: a run's part intents and status move committed all or
nothing, the same cases against the DynamoDB unit of work (on moto, one transaction,
announcing through the outbox) and the in-memory one the service tier uses (tests/service),
so the fake cannot drift."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.capabilities import Binding, Phase, RunnerSession
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    AlreadyDecided,
    ConcurrentChange,
    IllegalPartMove,
    IllegalTransition,
    PartTokenChanged,
    TransitionRejected,
)
from runplane.domain.parts import ApplyRecordState, AttemptState, RunPart
from runplane.domain.run import RunKind, RunStatus, StageStatus
from runplane.domain.run_events import EventType, RunEvent
from runplane.services.repositories import RunLedger, RunReader
from runplane.services.run_events import RunEvents
from runplane.services.unit_of_work import UnitOfWork
from runplane.store import capabilities as capability_store
from runplane.store import run_parts, sandbox_slots
from runplane.store.models import OUTBOX_PREFIX, OutboxItem
from runplane.store.outbox import DynamoEventOutbox
from runplane.store.run_reader import DynamoRunReader
from runplane.store.runs import RunRepository
from runplane.store.unit_of_work import DynamoUnitOfWork
from runplane.store.writer import DynamoWriterAuthority
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import (
    InMemorySandboxes,
    InMemoryUnitOfWork,
    InMemoryWriterQueue,
)
from tests.fakes import FakeClock, InMemoryRunLedger, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)
LATER = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
INPUT = {"configuration_version_id": "cv-1"}
SLOT = "org#org-acme"
SESSION = "session-hash-1"


@dataclass
class Sandboxes:
    """Each implementation's sandbox slots and runner sessions, as an attempt holds them."""

    # Take one slot of a scope; start a runner session (by key) for an attempt's binding.
    take: Callable[[str], None]
    start_session: Callable[[str, Binding], None]
    active: Callable[[str], int]
    revoked: Callable[[str], bool]


@dataclass
class Units:
    new: Callable[[], UnitOfWork]
    ledger: RunLedger
    reader: RunReader
    announced: Callable[[str], list[RunEvent]]
    sandboxes: Sandboxes
    # Reserve the workspace writer for a run, with its wait's token (queued if held).
    reserve: Callable[[Run, str], None]
    workspace_id: str = "ws-1"

    def run(
        self,
        status: RunStatus = RunStatus.QUEUED,
        run_id: str = "run-1",
        kind: RunKind = RunKind.PLAN_ONLY,
    ) -> Run:
        """A run (plan-only unless ``kind``) created in ``status`` with an approval part
        waiting."""
        run = Run(
            id=run_id,
            organization_id="org-acme",
            workspace_id=self.workspace_id,
            kind=kind,
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

    def attempt(self, run_id: str = "run-1", phase: Phase = Phase.PLAN) -> RunPart:
        """An open attempt of the run's ``phase``, holding a sandbox slot of ``SLOT`` and
        a runner session ``SESSION``; as read after its session started."""
        name = f"attempt#{phase.value}"
        body = {
            "attempt_id": "att-1",
            "sandbox_id": "sbx-1",
            "phase": phase.value,
            "launched_at": AT.isoformat(),
            "slots": [SLOT],
            "sandbox_ref": "task-1",
        }
        with self.new() as uow:
            uow.parts.put(run_id, name, state="started", body=body, token="t-attempt", now=AT)
            uow.commit()
        self.sandboxes.take(SLOT)
        self.sandboxes.start_session(SESSION, Binding(run_id, "att-1", phase, "sbx-1"))
        attempt = self.reader.parts(run_id)[name]
        assert attempt.session_keys == {SESSION}
        return attempt

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


def _dynamo_sandboxes(clock: FakeClock) -> Sandboxes:
    def start_session(key: str, binding: Binding) -> None:
        session = RunnerSession(
            id=f"rs-{key}",
            organization_id="org-acme",
            jti=f"jti-{key}",
            binding=binding,
            inputs=(),
            expires_at=AT + timedelta(hours=1),
        )
        capability_store.create_session(key, session, AT).commit()
        name = f"attempt#{binding.phase.value}"

        run_parts.note_session(
            binding.run_id, name, key, AT, lambda current: AssertionError("the attempt closed")
        ).commit()

    def revoked(key: str) -> bool:
        session = capability_store.get_session(key)
        return session is not None and session.revoked

    return Sandboxes(
        lambda scope: sandbox_slots.take(scope, None, "test").commit(),
        start_session,
        sandbox_slots.active,
        revoked,
    )


def _reserved(reservation: object) -> None:
    """A reservation taken or a place in the queue: either is what the case sets up."""


def _memory_sandboxes(ledger: InMemoryRunLedger, sandboxes: InMemorySandboxes) -> Sandboxes:
    def take(scope: str) -> None:
        sandboxes.active[scope] = sandboxes.active.get(scope, 0) + 1

    def start_session(key: str, binding: Binding) -> None:
        sandboxes.sessions[key] = None
        attempt = ledger.parts(binding.run_id)[f"attempt#{binding.phase.value}"]
        ledger.set_part(replace(attempt, session_keys=attempt.session_keys | {key}))

    return Sandboxes(
        take,
        start_session,
        lambda scope: sandboxes.active.get(scope, 0),
        lambda key: sandboxes.sessions.get(key) is not None,
    )


@pytest.fixture(params=["dynamodb", "memory"])
def units(request: pytest.FixtureRequest) -> Units:
    clock, ids = FakeClock(), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        workspace: Workspace = request.getfixturevalue("workspace")
        lifecycle = run_lifecycle(clock, ids)
        lifecycle.events = RunEvents(clock, _never_queued, DynamoEventOutbox())  # type: ignore[arg-type]
        return Units(
            lambda: DynamoUnitOfWork(RunRepository(clock, ids), lifecycle.mover.move),
            lifecycle.ledger,
            DynamoRunReader(RunRepository(clock, ids)),
            _outbox,
            _dynamo_sandboxes(clock),
            lambda run, token: _reserved(DynamoWriterAuthority(clock, ids).reserve(run, token)),
            workspace.id,
        )
    memory, queue, sandboxes = (
        InMemoryRunLedger(clock, ids),
        InMemoryWriterQueue(),
        InMemorySandboxes(),
    )

    return Units(
        lambda: InMemoryUnitOfWork(memory, queue, sandboxes),
        memory,
        memory,
        lambda run_id: [e for e in memory.announced if e.run_id == run_id],
        _memory_sandboxes(memory, sandboxes),
        queue.reserve,
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


def test_a_change_expecting_a_token_is_refused_naming_the_token_held(units: Units) -> None:
    # Given a run whose approval waits, holding token t1
    units.run()
    before = units.held()
    # When a unit of work changes it expecting no token, or another token
    for expected in (None, "t2"):
        with units.new() as uow:
            uow.parts.change(
                "run-1",
                "approval",
                expected_state="waiting",
                expected_token=expected,
                state="approved",
                now=LATER,
                on_refused=lambda held: AlreadyDecided("run-1", RunStatus.QUEUED, held),
            )
            # Then the commit is refused naming the token the part holds, writing nothing
            with pytest.raises(PartTokenChanged) as refused:
                uow.commit()
            assert refused.value.token == "t1"
    assert units.held() == before
    # And a change expecting a token from another state is refused as that state is
    with units.new() as uow:
        uow.parts.change(
            "run-1",
            "approval",
            expected_state="approved",
            expected_token="t1",
            state="rejected",
            now=LATER,
            on_refused=lambda held: AlreadyDecided("run-1", RunStatus.QUEUED, held),
        )
        with pytest.raises(AlreadyDecided, match="its approval is waiting"):
            uow.commit()
    # And expecting the token it holds, the change is made
    with units.new() as uow:
        uow.parts.change(
            "run-1",
            "approval",
            expected_state="waiting",
            expected_token="t1",
            state="approved",
            now=LATER,
        )
        uow.commit()
    assert units.reader.parts("run-1")["approval"].state == "approved"


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


def test_all_of_a_runs_parts_are_read_together(units: Units) -> None:
    # Given a run with its input and its approval
    units.run()
    # When a unit of work reads all of its parts
    with units.new() as uow:
        parts = uow.parts.all_of("run-1")
    # Then each is there by name, as the reader holds it; a run without parts has none
    assert parts == units.reader.parts("run-1")
    assert set(parts) == {"input", "approval"}
    with units.new() as uow:
        assert uow.parts.all_of("run-unknown") == {}


def test_an_attempts_close_gives_back_its_slot_and_revokes_its_sessions_with_the_move(
    units: Units,
) -> None:
    # Given a queued run with an open plan attempt holding a slot and a runner session
    run = units.run()
    attempt = units.attempt()
    assert units.sandboxes.active(SLOT) == 1
    # When a unit of work stops the attempt and cancels the run together
    with units.new() as uow:
        uow.attempts.close(attempt, AttemptState.STOPPED, now=LATER, reason="canceled")
        uow.runs.move(run, RunStatus.CANCELED, actor="user:bob")
        assert uow.commit() is not None
    # Then the attempt is stopped, its body with when and why, its token removed
    closed = units.reader.parts("run-1")[attempt.name]
    assert (closed.state, closed.token) == (AttemptState.STOPPED, None)
    assert closed.body == {**attempt.body, "finished_at": LATER.isoformat(), "reason": "canceled"}
    # And its slot was given back and its session revoked, with the run's move
    assert units.sandboxes.active(SLOT) == 0
    assert units.sandboxes.revoked(SESSION)
    assert units.reader.get_run("run-1").status is RunStatus.CANCELED


def test_a_close_of_an_attempt_changed_since_it_was_read_is_refused_and_writes_nothing(
    units: Units,
) -> None:
    # Given a queued run whose open attempt was read, then moved on (its sandbox
    # reported it launching no more: started -> succeeded is not needed, any change is)
    run = units.run()
    read = units.attempt()
    with units.new() as uow:
        uow.parts.change("run-1", read.name, expected_state="started", state="launching", now=AT)
        uow.commit()
    before = units.held()
    # When a unit of work closes the attempt as read, and cancels the run
    with units.new() as uow:
        uow.attempts.close(read, AttemptState.STOPPED, now=LATER)
        uow.runs.move(run, RunStatus.CANCELED, actor="user:bob")
        # Then the close is refused as a concurrent change
        with pytest.raises(ConcurrentChange, match="attempt#plan is launching, expected started"):
            uow.commit()
    # And nothing was written: the run, the attempt, its slot and its session
    assert units.held() == before
    assert units.sandboxes.active(SLOT) == 1
    assert not units.sandboxes.revoked(SESSION)


def test_a_close_its_state_table_does_not_allow_is_refused_at_once(units: Units) -> None:
    # Given a run whose attempt succeeded
    units.run()
    attempt = units.attempt()
    with units.new() as uow:
        uow.attempts.close(attempt, AttemptState.SUCCEEDED, now=LATER)
        uow.commit()
    succeeded = units.reader.parts("run-1")[attempt.name]
    before = units.held()
    # When a unit of work stops it, then commits
    with units.new() as uow:
        with pytest.raises(IllegalPartMove):
            uow.attempts.close(succeeded, AttemptState.STOPPED, now=LATER)
        uow.commit()
    # Then nothing was intended, so nothing is written
    assert units.held() == before


def test_a_waiters_token_is_read_and_its_move_to_an_end_takes_it_out_of_the_queue(
    units: Units,
) -> None:
    # Given run-1 holding the workspace writer reservation and run-2 waiting for it
    holder = units.run(kind=RunKind.PLAN_AND_APPLY)
    waiter = units.run(run_id="run-2", kind=RunKind.PLAN_AND_APPLY)
    plan_only = units.run(run_id="run-3")
    units.reserve(holder, "t-holder")
    units.reserve(waiter, "t-waiter")
    # When a unit of work reads their waits' tokens
    with units.new() as uow:
        tokens = [uow.writer.waiter_token(run) for run in (holder, waiter, plan_only)]
    # Then only the waiter has one (the holder waits for nothing; a plan-only run takes
    # no reservation)
    assert tokens == [None, "t-waiter", None]
    # And when the waiter is canceled, it leaves the queue and nobody is handed anything
    with units.new() as uow:
        uow.runs.move(waiter, RunStatus.CANCELED, actor="user:bob")
        moved = uow.commit()
    assert moved is not None
    assert moved.handoff is None
    with units.new() as uow:
        assert uow.writer.waiter_token(waiter) is None
    # So the holder's release, later, hands the reservation to no one
    with units.new() as uow:
        uow.runs.move(holder, RunStatus.CANCELED, actor="user:bob")
        released = uow.commit()
    assert released is not None
    assert released.handoff is None


def test_a_move_that_ends_an_applying_run_closes_its_open_apply_record(units: Units) -> None:
    # Given a plan-and-apply run applying, its apply record started
    run = units.run(RunStatus.APPLYING, kind=RunKind.PLAN_AND_APPLY)
    with units.new() as uow:
        uow.parts.put("run-1", "apply", state=ApplyRecordState.STARTED, body={"n": 1}, now=AT)
        uow.commit()
    # When a unit of work interrupts the apply
    with units.new() as uow:
        uow.runs.move(run, RunStatus.APPLY_INTERRUPTED, actor="user:bob", reason="canceled")
        uow.commit()
    # Then the apply record is closed as uncertain in the same commit, saying why
    record = units.reader.parts("run-1")["apply"]
    assert record.state == ApplyRecordState.UNCERTAIN
    assert record.body == {"n": 1, "reason": "canceled", "run_status": "apply_interrupted"}
    assert units.reader.get_run("run-1").status is RunStatus.APPLY_INTERRUPTED


def test_a_workspace_read_before_the_unit_is_built_on_as_one_it_read(units: Units) -> None:
    if units.workspace_id == "ws-1":
        pytest.skip("the in-memory units read no workspace here, and announce no subscribers")
    # Given two runs of a workspace, and the workspace as a step read it before its unit
    first, second = units.run(run_id="run-1"), units.run(run_id="run-2")
    with units.new() as reading:
        workspace = reading.writer.workspace(units.workspace_id)
    # When a unit told of that read cancels one run with its approval, and a unit that
    # reads the workspace itself the other
    with units.new() as told:
        told.writer.read_before(workspace)
        told.parts.change(
            "run-1", "approval", expected_state="waiting", state="canceled", token=None, now=LATER
        )
        told.runs.move(first, RunStatus.CANCELED, actor="user:bob")
        told.commit()
    with units.new() as reads:
        reads.writer.workspace(units.workspace_id)
        reads.parts.change(
            "run-2", "approval", expected_state="waiting", state="canceled", token=None, now=LATER
        )
        reads.runs.move(second, RunStatus.CANCELED, actor="user:bob")
        reads.commit()
    # Then both moves' events name the workspace's subscribers alike
    [told_event], [read_event] = units.announced("run-1"), units.announced("run-2")
    assert told_event.subscribers == read_event.subscribers
    assert told_event.subscribers is not None
