"""Moving runs through the lifecycle, with the writer reservation kept consistent.

Every move is one transaction: when the target status releases the workspace writer
reservation, the release (and the hand-off to the oldest waiter) is part of it; a move
that ends the run closes an apply record still open; the move's run event (and any
other event the caller announces with it) is an outbox item of it
(services/run_events.py): nothing is sent on the move's path. The store composes
those writes (``store.moves.DynamoMover``); the in-memory unit of work keeps the same
promises (tests/fake_unit_of_work.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from runplane.domain.clock import Clock
from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.ids import IdGenerator
from runplane.domain.intents import MovedRun
from runplane.domain.run import RunStatus, Transitioned
from runplane.domain.run_events import RunEvent
from runplane.services.run_events import RunEvents
from runplane.store.moves import DynamoMover
from runplane.store.run_ledger import DynamoRunLedger
from runplane.store.runs import RunRepository
from runplane.store.transaction import Transaction
from runplane.store.writer import DynamoWriterAuthority

if TYPE_CHECKING:
    from runplane.services.repositories import RunLedger

# A committed move: its transition, the run as written, who the reservation went to.
Moved = MovedRun


class RunLifecycle:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        events: RunEvents | None = None,
        ledger: RunLedger | None = None,
    ) -> None:
        self._clock = clock
        self._ids = ids
        # Builds the outbox write of every move's event (triggers, notifications,
        # commit statuses) and of the events a caller announces with a move (drift).
        self.events = events
        self.runs = RunRepository(clock, ids)
        self.writer = DynamoWriterAuthority(clock, ids)
        self.ledger: RunLedger = ledger or DynamoRunLedger(self.runs, lambda: self.events)
        self.mover = DynamoMover(clock, self.runs, self.writer, lambda: self.events, self.ledger)

    def move(
        self,
        run: Run,
        target: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        state_published: bool = False,
        lock: ApplyLock | None = None,
        run_updates: Mapping[str, Any] | None = None,
        extra_writes: Iterable[Transaction] = (),
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
        workspace: Workspace | None = None,
    ) -> Moved:
        """Move ``run`` (a snapshot) to ``target``; see ``store.moves.DynamoMover.move``.
        A move with nothing beside it goes through the run ledger seam, so the rules can
        be tested over an in-memory ledger."""
        return self.mover.move(
            run,
            target,
            actor=actor,
            reason=reason,
            state_published=state_published,
            lock=lock,
            run_updates=run_updates,
            extra_writes=extra_writes,
            also_announce=also_announce,
            workspace=workspace,
        )
