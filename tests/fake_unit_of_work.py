"""The in-memory unit of work (``runplane.services.unit_of_work.UnitOfWork``) over an
``InMemoryRunLedger``: reads see the ledger at once; ``commit`` applies every intent or,
if one is refused, puts the ledger back as it was and raises that intent's error, as the
table's one transaction does (tests/integration/test_unit_of_work_contract.py holds the
two to the same cases).

The workspace writer reservation is modelled only as far as a move's release needs it
(``InMemoryWriterQueue``). An apply record still open when a run ends is not closed here
(no use case through the unit of work ends a run that applied yet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import TracebackType
from typing import Any

from runplane.domain import transitions
from runplane.domain.entities import Handoff, Run
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.intents import KEEP, Keep, MovedRun, Refused
from runplane.domain.parts import RunPart
from runplane.domain.run import RunStatus, Transitioned
from runplane.domain.run_events import RunEvent
from runplane.domain.transitions import WRITER_ON_ENTRY, WriterEffect
from tests.fakes import InMemoryRunLedger


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
class _Move:
    run: Run
    target: RunStatus
    actor: str
    reason: str | None
    run_updates: Mapping[str, Any] | None
    also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None


class InMemoryRunParts:
    def __init__(self, ledger: InMemoryRunLedger, intents: list[_Change | _Put]) -> None:
        self._ledger = ledger
        self._intents = intents

    def get(self, run_id: str, name: str) -> RunPart | None:
        return self._ledger.parts(run_id).get(name)

    def several(self, run_id: str, names: Sequence[str]) -> dict[str, RunPart | None]:
        held = self._ledger.parts(run_id)
        return {name: held.get(name) for name in names}

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
    """A unit of work over ``ledger`` (and ``writer``, the reservation a move releases)."""

    def __init__(
        self, ledger: InMemoryRunLedger, writer: InMemoryWriterQueue | None = None
    ) -> None:
        self._ledger = ledger
        self._writer = writer or InMemoryWriterQueue()
        self._intents: list[_Change | _Put] = []
        self._moves: list[_Move] = []
        self.parts = InMemoryRunParts(ledger, self._intents)
        self.runs = InMemoryRunMoves(ledger, self._moves)
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
        saved = self._ledger.saved()
        try:
            # The table's order of refusals: the move's conditions, then the intents.
            moved = [self._move(move) for move in moves]
            for intent in intents:
                intent.apply(self._ledger)
        except BaseException:
            self._ledger.restore(saved)
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
