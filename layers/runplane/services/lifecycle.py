"""Moving runs through the lifecycle, with the writer reservation kept consistent.

Every move is one transaction: when the target status releases the workspace writer
reservation, the release (and the hand-off to the oldest waiter) is part of it; a move
that ends the run closes an apply record still open; the move's run event (and any
other event the caller announces with it) is an outbox item of it
(services/run_events.py): nothing is sent on the move's path. The store composes
those writes (``store.moves.DynamoMover``); the in-memory unit of work keeps the same
promises (tests/fake_unit_of_work.py).

The lifecycle holds what a service needs to read and move a run: its records
(``RunRecords``), the workspace writer authority (``WriterAuthority``), the run ledger
(a run's creation and plain moves) and the mover; the composition root gives it the
table's (``wiring.run_lifecycle``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from runplane.domain.entities import ApplyLock, AuditEvent, Run, RunStage, Workspace
from runplane.domain.intents import MovedRun
from runplane.domain.run import RunStatus, Stage, Transitioned
from runplane.domain.run_events import RunEvent

if TYPE_CHECKING:
    from runplane.services.repositories import RunLedger
    from runplane.services.run_events import RunEvents
    from runplane.services.writer import WriterAuthority


class RunRecords(Protocol):
    """A run's records as the table holds them: the run (``NotFound`` for an unknown
    one), a workspace's runs newest first, its stages and its audit events."""

    def get(self, run_id: str) -> Run: ...

    def list_for_workspace(self, workspace_id: str) -> list[Run]: ...

    def stages(self, run_id: str) -> dict[Stage, RunStage]: ...

    def audit_trail(self, run_id: str) -> list[AuditEvent]: ...


class Mover(Protocol):
    """A run's move with what it composes, as one transaction (``store.moves``): the
    unit of work's commit moves through it, with its other intents as ``extra_writes``
    (the writes the store built for them, opaque here) and the identity map it owns as
    ``reads`` (the store's too: the move's reads are served from it)."""

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
        extra_writes: Iterable[Any] = (),
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
        workspace: Workspace | None = None,
        reads: Any = None,
    ) -> MovedRun: ...


class RunLifecycle:
    def __init__(
        self,
        *,
        runs: RunRecords,
        writer: WriterAuthority,
        ledger: RunLedger,
        mover: Mover,
        events: RunEvents | None = None,
    ) -> None:
        self.runs = runs
        self.writer = writer
        self.ledger = ledger
        self.mover = mover
        # Builds the outbox write of every move's event (triggers, notifications,
        # commit statuses) and of the events a caller announces with a move (drift);
        # the mover reads it at each move.
        self.events = events

    def move(
        self,
        run: Run,
        target: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
    ) -> MovedRun:
        """Move ``run`` (a snapshot) to ``target`` with nothing beside it but what the
        move itself composes; see ``store.moves.DynamoMover.move``. A move with other
        writes goes through a unit of work, whose commit moves through ``mover``."""
        return self.mover.move(
            run,
            target,
            actor=actor,
            reason=reason,
            run_updates=run_updates,
            also_announce=also_announce,
        )
