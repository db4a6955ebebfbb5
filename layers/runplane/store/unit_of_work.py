"""The DynamoDB unit of work (``services.unit_of_work.UnitOfWork``).

Reads go to the table at once (strongly consistent), or are served from the unit's
identity map: the unit is built with the map of the request it serves
(``store.request_reads``; a new empty one outside a request), hands it to every read
of its repositories (``reads=``) and to its move, and forgets it when it commits, as a
commit's transaction forgets the request's. Each intent becomes the
conditional write ``store.run_parts`` builds for it (an attempt's close: the writes
``store.attempts.close_attempt`` builds, its part, sandbox slots and runner sessions);
``commit`` sends them as ONE TransactWriteItems (``store.transaction``), whose refused
conditions raise the intents' typed errors.

A move is committed through the lifecycle's move (``services.lifecycle.RunLifecycle.move``,
given as ``mover``) with the other intents as its extra writes: the move's own writes
(``RunRepository.transition_writes``: the conditional status and version update, stage
changes, audit event, outbox events) and what the lifecycle composes with it on the
store (the workspace writer reservation's release and hand-off, an open apply record's
close, and the rebuild of those from a fresh read while the writer queue moves) are one
transaction with the intents. The lifecycle tries a move again when the writer queue
moved under it (``ConcurrentChange``); a refused intent is final, so its error is carried
through unchanged and raised as the intent's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol

from runplane.domain import transitions
from runplane.domain.artifacts import ArtifactRecord
from runplane.domain.audit import AuditRecord
from runplane.domain.entities import ApplyLock, Run, Waiter, Workspace
from runplane.domain.intents import KEEP, Keep, MovedRun, Refused
from runplane.domain.parts import AttemptState, RunPart
from runplane.domain.recovery import Recovery
from runplane.domain.run import RunStatus, Transitioned
from runplane.domain.run_events import RunEvent
from runplane.domain.schedules import Drift
from runplane.domain.state import StateVersion
from runplane.store import (
    audit,
    capabilities,
    recovery,
    run_batch,
    run_parts,
    state_versions,
    workspaces,
    writer_queue,
    writer_recovery,
)
from runplane.store.artifact_records import registration_writes
from runplane.store.attempts import close_attempt
from runplane.store.models import workspace_key
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST
from runplane.store.runs import RunRepository, expect_status
from runplane.store.security_records import security_record
from runplane.store.transaction import Item, OnRefused, Transaction


class Mover(Protocol):
    """The lifecycle's move (``services.lifecycle.RunLifecycle.move``): one transaction
    of the move, its companions on the store and ``extra_writes``."""

    def __call__(
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
    ) -> MovedRun: ...


def _refusal(on_refused: Refused | None, attribute: str = "state") -> OnRefused | None:
    """The store's refusal callback: the intent's, given the state the item holds."""
    if on_refused is None:
        return None

    def refused(current: Item | None) -> Exception:
        held = None if current is None else current.get(attribute)
        return on_refused(None if held is None else str(held))

    return refused


class _IntentRefused(Exception):
    """An intent's refusal on its way through the lifecycle's move (which would take a
    ``ConcurrentChange`` for the queue moving and try again)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class DynamoRunParts:
    def __init__(self, writes: list[Transaction], reads: IdentityMap) -> None:
        self._writes = writes
        self._reads = reads

    def get(self, run_id: str, name: str) -> RunPart | None:
        return run_parts.get(run_id, name, reads=self._reads)

    def several(self, run_id: str, names: Sequence[str]) -> dict[str, RunPart | None]:
        return {
            name: run_parts.get(run_id, name, reads=self._reads) for name in dict.fromkeys(names)
        }

    def all_of(self, run_id: str) -> dict[str, RunPart]:
        return run_parts.all_of(run_id)

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
        expected_token: str | Keep | None = KEEP,
        on_refused: Refused | None = None,
    ) -> None:
        kept: dict[str, str | None] = {} if isinstance(token, Keep) else {"token": token}
        if not isinstance(expected_token, Keep):
            kept["expected_token"] = expected_token
        self._writes.append(
            run_parts.change(
                run_id,
                name,
                expected_state=expected_state,
                state=state,
                body=body,
                now=now,
                on_refused=_refusal(on_refused),
                **kept,
            )
        )

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
        self._writes.append(
            run_parts.put(
                run_id,
                name,
                state=state,
                body=body,
                now=now,
                token=token,
                on_refused=_refusal(on_refused),
            )
        )


class DynamoAttempts:
    def __init__(self, writes: list[Transaction]) -> None:
        self._writes = writes

    def close(
        self, attempt: RunPart, state: AttemptState, *, now: datetime, **evidence: Any
    ) -> None:
        self._writes.extend(
            close_attempt(attempt.run_id, attempt.name, attempt, state, now, **evidence)
        )

    def revoke_sessions(self, attempt_id: str, now: datetime) -> None:
        self._writes.append(capabilities.revoke_attempt_sessions(attempt_id, now))


class DynamoWriterQueue:
    def __init__(self, writes: list[Transaction], reads: IdentityMap) -> None:
        self._writes = writes
        self._reads = reads
        # Each workspace as this unit read it; a move's release may build on it rather
        # than read it again (its writes are conditioned on what was read).
        self.read: dict[str, Workspace] = {}

    def workspace(self, workspace_id: str) -> Workspace:
        self.read[workspace_id] = workspaces.get_workspace(workspace_id, reads=self._reads)
        return self.read[workspace_id]

    def read_before(self, workspace: Workspace) -> None:
        self.read[workspace.id] = workspace

    def waiter_token(self, run: Run) -> str | None:
        # As ``WriterAuthority.waiter_token``.
        if not run.kind.needs_writer_reservation:
            return None
        mine = writer_queue.waiter_of(run.workspace_id, run.id)
        return mine.token if mine else None

    def oldest_waiter(self, workspace_id: str) -> Waiter | None:
        return writer_queue.oldest_waiter(workspace_id)

    def take_free_reservation(self, workspace_id: str, run_id: str, now: datetime) -> None:
        self._writes.append(writer_queue.take_free_reservation(workspace_id, run_id, now))

    def recover(
        self,
        observed: Workspace,
        run_id: str,
        handoff_to: Waiter | None,
        now: datetime,
        new_state: tuple[str, int, str] | None = None,
    ) -> None:
        self._writes.append(
            writer_recovery.recover_writer(observed, run_id, handoff_to, now, new_state)
        )


class DynamoRecoveries:
    def __init__(self, writes: list[Transaction]) -> None:
        self._writes = writes

    def get(self, run_id: str) -> Recovery | None:
        return recovery.get(run_id)

    def prepare(self, prepared: Recovery) -> None:
        self._writes.append(recovery.prepare(prepared))

    def lease(
        self,
        leased: Recovery,
        holder: str,
        expires_at: datetime,
        body: Mapping[str, Any],
        now: datetime,
    ) -> None:
        self._writes.append(recovery.lease(leased, holder, expires_at, body, now))

    def record_target(self, held: Recovery, artifact_id: str, now: datetime) -> None:
        self._writes.append(recovery.record_target(held, artifact_id, now))

    def complete(self, held: Recovery, body: Mapping[str, Any], now: datetime) -> None:
        self._writes.append(recovery.complete(held, body, now))


class DynamoStateVersions:
    def __init__(self, writes: list[Transaction], reads: IdentityMap) -> None:
        self._writes = writes
        self._reads = reads

    def get(self, sv_id: str) -> StateVersion:
        return state_versions.get(sv_id, reads=self._reads)

    def pending_of_run(self, workspace_id: str, run_id: str) -> list[StateVersion]:
        return state_versions.pending_of_run(workspace_id, run_id)

    def discard_pending(self, version: StateVersion) -> None:
        self._writes.append(state_versions.discard_pending(version))

    def put_finalized(self, version: StateVersion) -> None:
        self._writes.append(state_versions.put_finalized(version))


class DynamoArtifacts:
    def __init__(self, writes: list[Transaction]) -> None:
        self._writes = writes

    def register(self, records: Sequence[ArtifactRecord], now: datetime) -> None:
        if records:
            self._writes.append(registration_writes(records, now))


class DynamoAudit:
    def __init__(self, writes: list[Transaction]) -> None:
        self._writes = writes

    def security(self, record: AuditRecord) -> None:
        self._writes.append(security_record(record))

    def record(
        self,
        *,
        organization_id: str,
        subject_id: str,
        event_id: str,
        type: str,
        actor: str,
        at: datetime,
        details: Mapping[str, str],
    ) -> None:
        self._writes.append(
            audit.org_event(
                organization_id=organization_id,
                subject_id=subject_id,
                event_id=event_id,
                type=type,
                actor=actor,
                at=at,
                details=details,
            )
        )


class DynamoDrift:
    def __init__(self, writes: list[Transaction], reads: IdentityMap) -> None:
        self._writes = writes
        self._reads = reads

    # Drift records are kept with the schedules' (loaded only by a step that finds drift).
    def get(self, workspace_id: str) -> Drift | None:
        from runplane.store import schedules

        return schedules.get_drift(workspace_id, reads=self._reads)

    def put(self, drift: Drift) -> None:
        from runplane.store import schedules

        self._writes.append(schedules.put_drift(drift))


@dataclass(frozen=True)
class _MoveIntent:
    run: Run
    target: RunStatus
    actor: str
    reason: str | None
    run_updates: Mapping[str, Any] | None
    also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None
    state_published: bool = False
    lock: ApplyLock | None = None


class DynamoRunMoves:
    def __init__(
        self,
        runs: RunRepository,
        moves: list[_MoveIntent],
        writes: list[Transaction],
        reads: IdentityMap,
    ) -> None:
        self._runs = runs
        self._moves = moves
        self._writes = writes
        self._reads = reads

    def get(self, run_id: str) -> Run:
        return self._runs.get(run_id, reads=self._reads)

    def with_parts(
        self, run_id: str, names: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None]]:
        return run_batch.run_and_parts(run_id, names, reads=self._reads)

    def with_parts_and_artifacts(
        self, run_id: str, names: Sequence[str], artifact_ids: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None], dict[str, ArtifactRecord]]:
        return run_batch.run_parts_and_artifacts(run_id, names, artifact_ids, reads=self._reads)

    def move(
        self,
        run: Run,
        target: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
        state_published: bool = False,
        lock: ApplyLock | None = None,
    ) -> None:
        if self._moves:
            raise ValueError("a unit of work moves one run once")
        # Refused before anything is read or written: the table alone decides.
        transitions.check(run.status, target, run.facts)
        self._moves.append(
            _MoveIntent(
                run, target, actor, reason, run_updates, also_announce, state_published, lock
            )
        )

    def expect_unchanged(self, run: Run, *, on_refused: Refused) -> None:
        self.expect_status(run.id, run.status, on_refused=on_refused)

    def expect_status(self, run_id: str, status: RunStatus, *, on_refused: Refused) -> None:
        refused = _refusal(on_refused, "status")
        assert refused is not None
        self._writes.append(expect_status(run_id, status, refused))


class DynamoUnitOfWork:
    """One use case's reads and intents over the table; ``commit`` is one transaction.

    ``reads`` is the identity map of the request the unit serves (by default the
    request's in progress, a new empty one outside a request): the unit owns it for its
    use case, serves its repositories' reads from it alone, and forgets it when it
    commits (tries to commit) a write."""

    def __init__(
        self, runs: RunRepository, mover: Mover, *, reads: IdentityMap | None = None
    ) -> None:
        self._writes: list[Transaction] = []
        self._moves: list[_MoveIntent] = []
        self._mover = mover
        self.reads = REQUEST.reads() if reads is None else reads
        # A phase's start: its capabilities, sandbox slots and apply lock.
        from runplane.store import uow_start

        self.parts = DynamoRunParts(self._writes, self.reads)
        self.attempts = DynamoAttempts(self._writes)
        self.runs = DynamoRunMoves(runs, self._moves, self._writes, self.reads)
        self.writer = uow_start.DynamoStartWriter(self._writes, self.reads)
        self.recoveries = DynamoRecoveries(self._writes)
        self.state_versions = DynamoStateVersions(self._writes, self.reads)
        self.audit = DynamoAudit(self._writes)
        self.artifacts = DynamoArtifacts(self._writes)
        self.drift = DynamoDrift(self._writes, self.reads)
        self.capabilities = uow_start.DynamoCapabilityIntents(self._writes)
        self.sandboxes = uow_start.DynamoSandboxIntents(self._writes)

    def __enter__(self) -> DynamoUnitOfWork:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._discard()

    def commit(self) -> MovedRun | None:
        writes, moves = list(self._writes), list(self._moves)
        # A workspace another intent writes is no longer what the release may build on.
        read = {
            workspace_id: workspace
            for workspace_id, workspace in self.writer.read.items()
            if not any(write.touches(workspace_key(workspace_id)) for write in self._writes)
        }
        # Spent either way: a refused commit is not sent again by a later one.
        self._discard()
        try:
            return self._commit(writes, moves, read)
        finally:
            # The unit wrote, or tried to: nothing read before is served after (as its
            # transaction forgot the request's map when it was sent).
            if moves or any(len(write) for write in writes):
                self.reads.forget()

    def _commit(
        self, writes: list[Transaction], moves: list[_MoveIntent], read: dict[str, Workspace]
    ) -> MovedRun | None:
        if not moves:
            Transaction().extend(writes).commit()
            return None
        [move] = moves
        try:
            moved = self._mover(
                move.run,
                move.target,
                actor=move.actor,
                reason=move.reason,
                state_published=move.state_published,
                lock=move.lock,
                run_updates=move.run_updates,
                extra_writes=[write.refused_as(_IntentRefused) for write in writes],
                also_announce=move.also_announce,
                workspace=read.get(move.run.workspace_id),
                reads=self.reads,
            )
        except _IntentRefused as refused:
            raise refused.error from None
        return moved

    def _discard(self) -> None:
        self._writes.clear()
        self._moves.clear()
        self.writer.read.clear()
