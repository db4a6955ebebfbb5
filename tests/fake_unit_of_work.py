"""The in-memory unit of work (``runplane.services.unit_of_work.UnitOfWork``) over an
``InMemoryRunLedger``: reads see the ledger at once; ``commit`` applies every intent or,
if one is refused, puts the ledger back as it was and raises that intent's error, as the
table's one transaction does (tests/integration/test_unit_of_work_contract.py holds the
two to the same cases).

The workspace writer reservation is modelled only as far as a move's release and the
read of a waiter's token need it (``InMemoryWriterQueue``); sandbox slots and runner
sessions only as far as an attempt's close gives back and revokes them
(``InMemorySandboxes``). A move that ends a run closes its apply record still open, as
``RunLifecycle.move`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from runplane.domain import transitions
from runplane.domain.entities import Handoff, Run
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.intents import KEEP, Keep, MovedRun, Refused
from runplane.domain.parts import (
    OPEN_APPLY_RECORD,
    AttemptBody,
    AttemptState,
    PartKind,
    RunPart,
    check_move,
)
from runplane.domain.run import RunStatus, Transitioned, apply_record_on_end
from runplane.domain.run_events import RunEvent
from runplane.domain.transitions import WRITER_ON_ENTRY, WriterEffect
from tests.fakes import InMemoryRunLedger

# As ``store.capabilities.RETENTION``: a session is surely held until a day after its
# attempt started; an attempt closed later revokes none.
SESSION_RETENTION = timedelta(days=1)


@dataclass
class InMemoryWriterQueue:
    """Who holds each workspace's writer reservation and who waits for it (oldest first,
    each with the token that resumes its wait)."""

    holders: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def release(self, run: Run) -> Handoff | None:
        """As ``WriterAuthority.release_writes_if_involved``: the holder's release hands
        the reservation to the oldest waiter; a waiter just leaves the queue."""
        queue = self.waiting.setdefault(run.workspace_id, [])
        if self.holders.get(run.workspace_id) != run.id:
            queue[:] = [(waiter, token) for waiter, token in queue if waiter != run.id]
            return None
        if not queue:
            del self.holders[run.workspace_id]
            return None
        run_id, token = queue.pop(0)
        self.holders[run.workspace_id] = run_id
        return Handoff(run.workspace_id, run_id, token)

    def waiter_token(self, run: Run) -> str | None:
        """As ``WriterAuthority.waiter_token``: the token of ``run``'s wait, if it waits."""
        if not run.kind.needs_writer_reservation:
            return None
        waiting = self.waiting.get(run.workspace_id, [])
        return next((token for waiter, token in waiting if waiter == run.id), None)


@dataclass
class InMemorySandboxes:
    """The sandboxes running per slot scope (``store.sandbox_slots``) and the runner
    sessions held, by key, each with when it was revoked (None: not revoked)."""

    active: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, datetime | None] = field(default_factory=dict)

    def saved(self) -> tuple[dict[str, int], dict[str, datetime | None]]:
        return dict(self.active), dict(self.sessions)

    def restore(self, saved: tuple[dict[str, int], dict[str, datetime | None]]) -> None:
        self.active, self.sessions = dict(saved[0]), dict(saved[1])


@dataclass(frozen=True)
class _Change:
    run_id: str
    name: str
    expected: tuple[str, ...]
    now: datetime
    state: str | None
    body: Mapping[str, Any] | None
    token: str | Keep | None
    on_refused: Refused | None

    def apply(self, ledger: InMemoryRunLedger) -> None:
        current = ledger.parts(self.run_id).get(self.name)
        if current is None or current.state not in self.expected:
            held = None if current is None else current.state
            if self.on_refused is not None:
                raise self.on_refused(held)
            raise ConcurrentChange(
                f"run {self.run_id}: {self.name} is {held or 'missing'}, "
                f"expected {'/'.join(self.expected)}"
            )
        ledger.set_part(
            replace(
                current,
                state=current.state if self.state is None else str(self.state),
                body=current.body if self.body is None else dict(self.body),
                token=current.token if isinstance(self.token, Keep) else self.token,
                updated_at=self.now,
            )
        )


@dataclass(frozen=True)
class _Put:
    part: RunPart
    on_refused: Refused | None

    def apply(self, ledger: InMemoryRunLedger) -> None:
        current = ledger.parts(self.part.run_id).get(self.part.name)
        if current is not None:
            if self.on_refused is not None:
                raise self.on_refused(current.state)
            raise ConcurrentChange(f"run {self.part.run_id} already has its {self.part.name}")
        ledger.set_part(self.part)


@dataclass(frozen=True)
class _Close:
    """An attempt's close, as ``store.attempts.close_attempt`` writes it."""

    attempt: RunPart
    state: AttemptState
    now: datetime
    evidence: Mapping[str, Any]
    sandboxes: InMemorySandboxes

    @property
    def run_id(self) -> str:
        return self.attempt.run_id

    @property
    def name(self) -> str:
        return self.attempt.name

    def apply(self, ledger: InMemoryRunLedger) -> None:
        read = self.attempt
        current = ledger.parts(read.run_id).get(read.name)
        if current is None or current.state != read.state:
            held = "missing" if current is None else current.state
            raise ConcurrentChange(
                f"run {read.run_id}: {read.name} is {held}, expected {read.state}"
            )
        body = {**read.body, "finished_at": self.now.isoformat(), **self.evidence}
        ledger.set_part(
            replace(current, state=str(self.state), body=body, token=None, updated_at=self.now)
        )
        for scope in AttemptBody.from_body(read.body).slots:
            self.sandboxes.active[scope] = self.sandboxes.active.get(scope, 0) - 1
        if self.now - read.created_at >= SESSION_RETENTION:
            return
        for key in sorted(read.session_keys):
            if key not in self.sandboxes.sessions:
                raise ConcurrentChange("a runner session of the attempt expired meanwhile")
            # A revocation that raced this one keeps its instant.
            self.sandboxes.sessions[key] = self.sandboxes.sessions[key] or self.now


@dataclass(frozen=True)
class _Move:
    run: Run
    target: RunStatus
    actor: str
    reason: str | None
    run_updates: Mapping[str, Any] | None
    also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None


_Intent = _Change | _Put | _Close


class InMemoryRunParts:
    def __init__(self, ledger: InMemoryRunLedger, intents: list[_Intent]) -> None:
        self._ledger = ledger
        self._intents = intents

    def get(self, run_id: str, name: str) -> RunPart | None:
        return self._ledger.parts(run_id).get(name)

    def several(self, run_id: str, names: Sequence[str]) -> dict[str, RunPart | None]:
        held = self._ledger.parts(run_id)
        return {name: held.get(name) for name in names}

    def all_of(self, run_id: str) -> dict[str, RunPart]:
        return dict(self._ledger.parts(run_id))

    def change(
        self,
        run_id: str,
        name: str,
        *,
        expected_state: str | tuple[str, ...],
        now: datetime,
        state: str | None = None,
        body: Mapping[str, Any] | None = None,
        token: str | Keep | None = KEEP,
        on_refused: Refused | None = None,
    ) -> None:
        expected = (
            (str(expected_state),)
            if isinstance(expected_state, str)
            else tuple(str(s) for s in expected_state)
        )
        body = None if body is None else dict(body)
        self._intents.append(_Change(run_id, name, expected, now, state, body, token, on_refused))

    def put(
        self,
        run_id: str,
        name: str,
        *,
        state: str,
        body: Mapping[str, Any],
        now: datetime,
        token: str | None = None,
        on_refused: Refused | None = None,
    ) -> None:
        part = RunPart(run_id, name, str(state), dict(body), token, now, now)
        self._intents.append(_Put(part, on_refused))


class InMemoryAttempts:
    def __init__(self, sandboxes: InMemorySandboxes, intents: list[_Intent]) -> None:
        self._sandboxes = sandboxes
        self._intents = intents

    def close(
        self, attempt: RunPart, state: AttemptState, *, now: datetime, **evidence: Any
    ) -> None:
        check_move(PartKind.ATTEMPT, attempt.state, state)
        self._intents.append(_Close(attempt, state, now, dict(evidence), self._sandboxes))


class InMemoryRunMoves:
    def __init__(self, ledger: InMemoryRunLedger, moves: list[_Move]) -> None:
        self._ledger = ledger
        self._moves = moves

    def get(self, run_id: str) -> Run:
        return self._ledger.get_run(run_id)

    def with_parts(
        self, run_id: str, names: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None]]:
        if run_id not in self._ledger.runs:
            raise NotFound("run", run_id)
        held = self._ledger.parts(run_id)
        return self._ledger.get_run(run_id), {name: held.get(name) for name in names}

    def move(
        self,
        run: Run,
        target: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
    ) -> None:
        if self._moves:
            raise ValueError("a unit of work moves one run once")
        transitions.check(run.status, target, run.facts)
        self._moves.append(_Move(run, target, actor, reason, run_updates, also_announce))


class InMemoryUnitOfWork:
    """A unit of work over ``ledger`` (and ``writer``, the reservation a move releases;
    ``sandboxes``, the slots and sessions an attempt's close gives back and revokes)."""

    def __init__(
        self,
        ledger: InMemoryRunLedger,
        writer: InMemoryWriterQueue | None = None,
        sandboxes: InMemorySandboxes | None = None,
    ) -> None:
        self._ledger = ledger
        self._writer = writer or InMemoryWriterQueue()
        self._sandboxes = sandboxes or InMemorySandboxes()
        self._intents: list[_Intent] = []
        self._moves: list[_Move] = []
        self.parts = InMemoryRunParts(ledger, self._intents)
        self.attempts = InMemoryAttempts(self._sandboxes, self._intents)
        self.runs = InMemoryRunMoves(ledger, self._moves)
        self.writer = self._writer
        self.commits = 0

    def __enter__(self) -> InMemoryUnitOfWork:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._discard()

    def commit(self) -> MovedRun | None:
        intents, moves = list(self._intents), list(self._moves)
        self._discard()
        keys = [
            (i.part.run_id, i.part.name) if isinstance(i, _Put) else (i.run_id, i.name)
            for i in intents
        ]
        if len(set(keys)) != len(keys):
            raise ValueError("a transaction may touch each item once")
        if not intents and not moves:
            return None
        saved, sandboxes = self._ledger.saved(), self._sandboxes.saved()
        try:
            # The table's order of refusals: the move's conditions, then the intents.
            moved = [self._move(move) for move in moves]
            for intent in intents:
                intent.apply(self._ledger)
            for move, transition in zip(moves, moved, strict=True):
                self._close_apply_record(move, transition, set(keys))
        except BaseException:
            self._ledger.restore(saved)
            self._sandboxes.restore(sandboxes)
            raise
        self.commits += 1
        if not moved:
            return None
        [(move, transition)] = zip(moves, moved, strict=True)
        return MovedRun(transition, self._ledger.get_run(move.run.id), self._release(move))

    def _move(self, move: _Move) -> Transitioned:
        return self._ledger.move(
            move.run,
            move.target,
            actor=move.actor,
            reason=move.reason,
            run_updates=move.run_updates,
            also_announce=move.also_announce,
        )

    def _close_apply_record(
        self, move: _Move, transition: Transitioned, touched: set[tuple[str, str]]
    ) -> None:
        """As ``RunLifecycle.move``: a move that ends a run that may apply closes its apply
        record still open, unless an intent of the same commit changes it."""
        run = move.run
        if not move.target.is_terminal or not run.kind.may_apply or (run.id, "apply") in touched:
            return
        record = self._ledger.parts(run.id).get("apply")
        if record is None or record.state not in OPEN_APPLY_RECORD:
            return
        ending = apply_record_on_end(move.target)
        check_move(PartKind.APPLY_RECORD, record.state, ending)
        body = {
            **record.body,
            "reason": (move.reason or f"the run ended {move.target.value}")[:200],
            "run_status": move.target.value,
        }
        self._ledger.set_part(
            replace(record, state=str(ending), body=body, updated_at=transition.at)
        )

    def _release(self, move: _Move) -> Handoff | None:
        """The writer reservation's release on entry, as ``RunLifecycle.move`` composes
        it (a run's apply never published state through a unit of work)."""
        effect = WRITER_ON_ENTRY[move.target]
        releases = effect in {WriterEffect.RELEASE, WriterEffect.RELEASE_UNLESS_STATE_PUBLISHED}
        if not releases or not move.run.kind.needs_writer_reservation:
            return None
        return self._writer.release(move.run)

    def _discard(self) -> None:
        self._intents.clear()
        self._moves.clear()
