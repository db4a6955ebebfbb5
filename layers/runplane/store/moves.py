"""A run's move on the table, with what it composes: one transaction.

When the target status releases the workspace writer reservation, the release (and the
hand-off to the oldest waiter) is part of the move's transaction, so no status is ever
visible with a reservation it should not have. A move that ends a run that may apply
closes its apply record still open, unless the move's own writes change it: a finished
run never shows a pending apply. The move's run event, and any other event the caller
announces with it, is an outbox item of that same transaction. The rules (which status
releases, what an ending does to the apply record) are the domain's
(``domain.transitions``, ``domain.run``); this module only writes them.

A move is conditioned on the run's status and version (``TransitionRejected`` when
the snapshot is stale, which is final) and on the writer queue as read; when the queue
moved under it (``ConcurrentChange``), the release is rebuilt from a fresh read, a
bounded number of times. A move with nothing beside it goes through the run ledger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from runplane.domain.clock import Clock
from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.errors import ConcurrentChange, TooMuchContention
from runplane.domain.intents import MovedRun
from runplane.domain.parts import OPEN_APPLY_RECORD, PartKind, check_move
from runplane.domain.run import RunStatus, Transitioned, apply_record_on_end
from runplane.domain.run_events import RunEvent
from runplane.domain.transitions import WRITER_ON_ENTRY, WriterEffect, check
from runplane.store import run_parts
from runplane.store.models import run_part_key
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.run_ledger import Announcer, DynamoRunLedger, announcer
from runplane.store.runs import RunRepository
from runplane.store.transaction import Transaction
from runplane.store.writer import MAX_ATTEMPTS, DynamoWriterAuthority, Release

logger = logging.getLogger("runplane.runs")


class PlainMoves(Protocol):
    """Where a move with nothing beside it goes (``services.repositories.RunLedger``)."""

    def move(
        self,
        run: Run,
        target: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
    ) -> Transitioned: ...


class DynamoMover:
    """Moves runs on the table (``services.lifecycle.RunLifecycle`` and the unit of work's
    commit both move through it). ``events`` is read at each move: whoever owns it may
    set the events after building it (as tests of the outbox do). A move's reads are
    served from the identity map it is given (the committing unit's), by default the
    request's (``scope``)."""

    def __init__(
        self,
        clock: Clock,
        runs: RunRepository,
        writer: DynamoWriterAuthority,
        events: Callable[[], Announcer | None] = lambda: None,
        ledger: PlainMoves | None = None,
        scope: RequestScope = REQUEST,
    ) -> None:
        self._clock = clock
        self._runs = runs
        self._writer = writer
        self._events = events
        self._scope = scope
        self.ledger: PlainMoves = ledger or DynamoRunLedger(runs, events)

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
        reads: IdentityMap | None = None,
    ) -> MovedRun:
        """Move ``run`` (a snapshot) to ``target`` with ``extra_writes``; see the module
        docstring.

        ``state_published`` says an apply published state, which makes ``apply_failed``
        keep the writer authority for recovery. ``lock`` is the apply lock the caller
        holds, released exactly (or ``StaleFence``). ``workspace``: the run's workspace as
        the caller read it, with no write since; a release on entry takes it instead of
        reading it again (its writes are conditioned on what it read, so one that changed
        since is refused and read). ``reads``: the identity map the move's reads are
        served from (the committing unit's), by default the request's."""
        # Refused before anything is read: the table alone decides what is allowed.
        check(run.status, target, run.facts)
        extra = list(extra_writes)
        served = self._scope.reads() if reads is None else reads
        given = workspace
        for _ in range(MAX_ATTEMPTS):
            release = self._release_on_entry(run, target, state_published, lock, workspace, served)
            workspace = None
            # The workspace as read for this move (its event carries its subscribers).
            read = release.workspace if release and release.workspace else given
            writes = [*extra, release.writes] if release else list(extra)
            writes.extend(self._close_apply_record(run, target, reason, extra, served))
            try:
                if writes:
                    moved = self._runs.transition(
                        run,
                        target,
                        writes,
                        actor=actor,
                        reason=reason,
                        run_updates=run_updates,
                        announce=announcer(
                            self._events(),
                            run,
                            target,
                            reason,
                            run_updates,
                            also_announce,
                            workspace=read,
                        ),
                    )
                else:
                    moved = self.ledger.move(
                        run,
                        target,
                        actor=actor,
                        reason=reason,
                        run_updates=run_updates,
                        also_announce=also_announce,
                    )
            except ConcurrentChange:
                # Only the queue can move under us here: a changed run raises
                # TransitionRejected, which is final.
                continue
            # One structured line per move: alarms count runs entering a status.
            logger.info(
                "run status changed",
                extra={
                    "run_id": run.id,
                    "workspace_id": run.workspace_id,
                    "from_status": run.status.value,
                    "to_status": target.value,
                },
            )
            return MovedRun(
                moved,
                replace(
                    run,
                    status=moved.status,
                    version=moved.version,
                    updated_at=moved.at,
                    status_reason=reason or None,
                    **dict(run_updates or {}),
                ),
                release.handoff if release else None,
            )
        raise TooMuchContention(f"run {run.id}: the workspace writer queue kept moving")

    def _close_apply_record(
        self,
        run: Run,
        target: RunStatus,
        reason: str | None,
        extra: list[Transaction],
        reads: IdentityMap,
    ) -> list[Transaction]:
        """Close the run's apply record if it is still open as the run ends."""
        if not target.is_terminal or not run.kind.may_apply:
            return []
        if any(write.touches(run_part_key(run.id, "apply")) for write in extra):
            return []
        record = run_parts.get(run.id, "apply", reads=reads)
        if record is None or record.state not in OPEN_APPLY_RECORD:
            return []
        ending = apply_record_on_end(target)
        check_move(PartKind.APPLY_RECORD, record.state, ending)
        # Conditioned on the state read here: a concurrent change retries the move.
        return [
            run_parts.change(
                run.id,
                "apply",
                expected_state=record.state,
                state=ending,
                body={
                    **record.body,
                    "reason": (reason or f"the run ended {target.value}")[:200],
                    "run_status": target.value,
                },
                now=self._clock.now(),
            )
        ]

    def _release_on_entry(
        self,
        run: Run,
        target: RunStatus,
        state_published: bool,
        lock: ApplyLock | None,
        workspace: Workspace | None,
        reads: IdentityMap,
    ) -> Release | None:
        effect = WRITER_ON_ENTRY[target]
        releases = effect is WriterEffect.RELEASE or (
            effect is WriterEffect.RELEASE_UNLESS_STATE_PUBLISHED and not state_published
        )
        if not releases or not run.kind.needs_writer_reservation:
            return None
        return self._writer.release_writes_if_involved(
            run.workspace_id, run.id, lock, workspace, reads=reads
        )
