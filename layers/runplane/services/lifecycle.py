"""Moving runs through the lifecycle, with the writer reservation kept consistent.

Every move is one transaction (see ``RunRepository.transition``). When the
target status releases the workspace writer reservation, the release (and the
hand-off to the oldest waiter) is part of that same transaction, so no status
is ever visible with a reservation it should not have. Likewise a move that
ends the run closes an apply record still open, unless the move itself writes
it: a finished run never shows a pending apply. And the move's run event (and any
other event the caller announces with it) is an outbox item of that same
transaction (services/run_events.py): nothing is sent on the move's path.

A move with nothing to commit beside it (no release, no apply record to close, no
writes of the caller's) goes through the run ledger seam
(``services.repositories.RunLedger``), so the lifecycle's rules can be tested over an
in-memory ledger; the others are composed on the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from runplane.domain.clock import Clock
from runplane.domain.entities import ApplyLock, Handoff, Run, Workspace
from runplane.domain.errors import ConcurrentChange, TooMuchContention
from runplane.domain.ids import IdGenerator
from runplane.domain.parts import OPEN_APPLY_RECORD, PartKind, check_move
from runplane.domain.run import RunStatus, Transitioned, apply_record_on_end
from runplane.domain.run_events import RunEvent
from runplane.domain.transitions import WRITER_ON_ENTRY, WriterEffect, check
from runplane.services.run_events import RunEvents
from runplane.services.writer import MAX_ATTEMPTS, Release, WriterAuthority
from runplane.store import run_parts
from runplane.store.models import run_part_key
from runplane.store.run_ledger import DynamoRunLedger, announcer
from runplane.store.runs import RunRepository
from runplane.store.transaction import Transaction

if TYPE_CHECKING:
    from runplane.services.repositories import RunLedger

logger = logging.getLogger("runplane.runs")


@dataclass(frozen=True)
class Moved:
    transition: Transitioned
    handoff: Handoff | None
    # The run as the move wrote it: what a consistent read right after would return.
    run: Run


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
        self.ledger: RunLedger = ledger or DynamoRunLedger(self.runs, lambda: self.events)
        self.writer = WriterAuthority(clock, ids)

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
        """Move ``run`` (a snapshot) to ``target``; see the module docstring.

        ``state_published`` says an apply published state, which makes
        ``apply_failed`` keep the writer authority for recovery. ``lock`` is the
        apply lock the caller holds, released exactly (or ``StaleFence``).
        ``also_announce`` makes further events of the move (committed with it).
        ``workspace``: the run's workspace as the caller read it, with no write since;
        a release on entry takes it instead of reading it again (its writes are
        conditioned on what it read, so one that changed since is refused and read).
        """
        # Refused before anything is read: the table alone decides what is allowed.
        check(run.status, target, run.facts)
        extra = list(extra_writes)
        for _ in range(MAX_ATTEMPTS):
            release = self._release_on_entry(run, target, state_published, lock, workspace)
            workspace = None
            writes = [*extra, release.writes] if release else list(extra)
            writes.extend(self._close_apply_record(run, target, reason, extra))
            try:
                if writes:
                    moved = self.runs.transition(
                        run,
                        target,
                        writes,
                        actor=actor,
                        reason=reason,
                        run_updates=run_updates,
                        announce=announcer(
                            self.events, run, target, reason, run_updates, also_announce
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
            return Moved(
                moved,
                release.handoff if release else None,
                replace(
                    run,
                    status=moved.status,
                    version=moved.version,
                    updated_at=moved.at,
                    status_reason=reason or None,
                    **dict(run_updates or {}),
                ),
            )
        raise TooMuchContention(f"run {run.id}: the workspace writer queue kept moving")

    def _close_apply_record(
        self, run: Run, target: RunStatus, reason: str | None, extra: list[Transaction]
    ) -> list[Transaction]:
        """Close the run's apply record if it is still open as the run ends."""
        if not target.is_terminal or not run.kind.may_apply:
            return []
        if any(write.touches(run_part_key(run.id, "apply")) for write in extra):
            return []
        record = run_parts.get(run.id, "apply")
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
    ) -> Release | None:
        effect = WRITER_ON_ENTRY[target]
        releases = effect is WriterEffect.RELEASE or (
            effect is WriterEffect.RELEASE_UNLESS_STATE_PUBLISHED and not state_published
        )
        if not releases or not run.kind.needs_writer_reservation:
            return None
        return self.writer.release_writes_if_involved(run.workspace_id, run.id, lock, workspace)
