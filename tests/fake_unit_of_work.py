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
from functools import cached_property
from types import TracebackType
from typing import TYPE_CHECKING, Any

from runplane.domain import transitions
from runplane.domain.artifacts import ArtifactRecord
from runplane.domain.audit import AuditRecord
from runplane.domain.entities import ApplyLock, Handoff, Run, Waiter, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    Conflict,
    NotFound,
    NotWriter,
    PartTokenChanged,
    StaleDriftFinding,
    StaleFence,
)
from runplane.domain.intents import KEEP, Keep, MovedRun, Refused
from runplane.domain.parts import (
    OPEN_APPLY_RECORD,
    AttemptBody,
    AttemptState,
    PartKind,
    RunPart,
    check_move,
)
from runplane.domain.recovery import Recovery, RecoveryState
from runplane.domain.run import RunStatus, Transitioned, apply_record_on_end
from runplane.domain.run_events import RunEvent
from runplane.domain.schedules import Drift
from runplane.domain.state import PENDING, StateVersion
from runplane.domain.transitions import WRITER_ON_ENTRY, WriterEffect
from tests.fakes import (
    AuditedChange,
    InMemoryArtifactRecords,
    InMemoryRunLedger,
    InMemoryStateVersions,
    InMemoryWorkspaces,
    changed,
)

if TYPE_CHECKING:
    from tests.fake_uow_start import (
        InMemoryCapabilityIntents,
        InMemorySandboxIntents,
        InMemoryStartRecords,
        InMemoryStartWriter,
    )

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

    def reserve(self, run: Run, token: str) -> None:
        """As ``WriterAuthority.reserve``: a free reservation is taken, else the run queues
        with the token that resumes its wait."""
        waiting = self.waiting.setdefault(run.workspace_id, [])
        if self.holders.get(run.workspace_id) is None and not waiting:
            self.holders[run.workspace_id] = run.id
        else:
            waiting.append((run.id, token))

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
    # Each attempt's sessions, as the table's index of sessions by attempt finds them.
    of_attempt: dict[str, set[str]] = field(default_factory=dict)

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
    expected_token: str | Keep | None = KEEP

    def apply(self, ledger: InMemoryRunLedger) -> None:
        current = ledger.parts(self.run_id).get(self.name)
        if (
            current is None
            or current.state not in self.expected
            or (not isinstance(self.expected_token, Keep) and current.token != self.expected_token)
        ):
            held = None if current is None else current.state
            if current is not None and held in self.expected:
                raise PartTokenChanged(self.run_id, self.name, current.token)
            if self.on_refused is not None:
                raise self.on_refused(held)
            raise ConcurrentChange(
                f"run {self.run_id}: {self.name} is {held or 'missing'}, "
                f"expected {'/'.join(self.expected)}"
            )
        ledger.set_part(
            changed(
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
            changed(current, state=str(self.state), body=body, token=None, updated_at=self.now)
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
    state_published: bool = False
    lock: ApplyLock | None = None


@dataclass
class InMemoryRecoveries:
    """Runs' recovery operations by run, and the organization audit events written with
    them (a recovery's completion records ``run.recovered`` and ``state.recovered``)."""

    held: dict[str, Recovery] = field(default_factory=dict)
    org_audit: list[AuditedChange] = field(default_factory=list)
    # The security trail records committed with them (``domain.audit``).
    security_trail: list[AuditRecord] = field(default_factory=list)

    def saved(self) -> tuple[dict[str, Recovery], list[AuditedChange], list[AuditRecord]]:
        return dict(self.held), list(self.org_audit), list(self.security_trail)

    def restore(
        self, saved: tuple[dict[str, Recovery], list[AuditedChange], list[AuditRecord]]
    ) -> None:
        self.held, self.org_audit = dict(saved[0]), list(saved[1])
        self.security_trail = list(saved[2])


@dataclass(frozen=True)
class _Effect:
    """An intent on a repository other than the run parts: ``key`` is the item it
    touches (a transaction touches each once), ``apply`` checks its condition and writes,
    or raises its refusal."""

    key: tuple[str, str]
    effect: Callable[[], None]

    def apply(self, ledger: InMemoryRunLedger) -> None:
        self.effect()


_Intent = _Change | _Put | _Close | _Effect


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
        expected_token: str | Keep | None = KEEP,
        on_refused: Refused | None = None,
    ) -> None:
        expected = (
            (str(expected_state),)
            if isinstance(expected_state, str)
            else tuple(str(s) for s in expected_state)
        )
        body = None if body is None else dict(body)
        self._intents.append(
            _Change(run_id, name, expected, now, state, body, token, on_refused, expected_token)
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

    def revoke_sessions(self, attempt_id: str, now: datetime) -> None:
        sandboxes = self._sandboxes
        # As the table's index: the sessions not yet revoked, found now.
        found = [
            key
            for key in sorted(sandboxes.of_attempt.get(attempt_id, ()))
            if not sandboxes.sessions.get(key)
        ]

        def revoke() -> None:
            for key in found:
                if key not in sandboxes.sessions:
                    raise ConcurrentChange("a runner session of the attempt expired meanwhile")
                sandboxes.sessions[key] = sandboxes.sessions[key] or now

        self._intents.append(_Effect(("sessions", attempt_id), revoke))


class InMemoryRunMoves:
    def __init__(
        self,
        ledger: InMemoryRunLedger,
        moves: list[_Move],
        intents: list[_Intent],
        artifacts: InMemoryArtifactRecords,
    ) -> None:
        self._ledger = ledger
        self._moves = moves
        self._intents = intents
        self._artifacts = artifacts

    def get(self, run_id: str) -> Run:
        return self._ledger.get_run(run_id)

    def with_parts(
        self, run_id: str, names: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None]]:
        if run_id not in self._ledger.runs:
            raise NotFound("run", run_id)
        held = self._ledger.parts(run_id)
        return self._ledger.get_run(run_id), {name: held.get(name) for name in names}

    def with_parts_and_artifacts(
        self, run_id: str, names: Sequence[str], artifact_ids: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None], dict[str, ArtifactRecord]]:
        run, parts = self.with_parts(run_id, names)
        held = self._artifacts.records
        return run, parts, {a: held[a] for a in artifact_ids if a in held}

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
        transitions.check(run.status, target, run.facts)
        self._moves.append(
            _Move(run, target, actor, reason, run_updates, also_announce, state_published, lock)
        )

    def expect_unchanged(self, run: Run, *, on_refused: Refused) -> None:
        self.expect_status(run.id, run.status, on_refused=on_refused)

    def expect_status(self, run_id: str, status: RunStatus, *, on_refused: Refused) -> None:
        ledger = self._ledger

        def check() -> None:
            current = ledger.runs.get(run_id)
            if current is None or current.status is not status:
                raise on_refused(None if current is None else current.status.value)

        self._intents.append(_Effect(("run", run_id), check))


class InMemoryWriter:
    """The writer reservation (``InMemoryWriterQueue``) and the workspace it belongs to
    (the directory's: fence, apply lock, current state)."""

    def __init__(
        self, queue: InMemoryWriterQueue, directory: InMemoryWorkspaces, intents: list[_Intent]
    ) -> None:
        self._queue = queue
        self._directory = directory
        self._intents = intents

    def workspace(self, workspace_id: str) -> Workspace:
        held = self._directory.get_workspace(workspace_id)
        return replace(
            held,
            writer_run_id=self._queue.holders.get(workspace_id),
            queue_length=len(self._queue.waiting.get(workspace_id, [])),
        )

    def read_before(self, workspace: Workspace) -> None:
        pass  # the fake's moves read no workspace: their events name no subscribers

    def waiter_token(self, run: Run) -> str | None:
        return self._queue.waiter_token(run)

    def take_free_reservation(self, workspace_id: str, run_id: str, now: datetime) -> None:
        def take() -> None:
            current = self.workspace(workspace_id)
            if current.writer_run_id is not None or current.queue_length:
                raise ConcurrentChange(f"workspace {workspace_id} writer changed")
            self._queue.holders[workspace_id] = run_id

        self._intents.append(_Effect(("workspace", workspace_id), take))

    def oldest_waiter(self, workspace_id: str) -> Waiter | None:
        waiting = self._queue.waiting.get(workspace_id, [])
        if not waiting:
            return None
        run_id, token = waiting[0]
        return Waiter(workspace_id, run_id, token, 1)

    def recover(
        self,
        observed: Workspace,
        run_id: str,
        handoff_to: Waiter | None,
        now: datetime,
        new_state: tuple[str, int, str] | None = None,
    ) -> None:
        def recover() -> None:
            current = self.workspace(observed.id)
            if current.writer_run_id != run_id:
                raise NotWriter(observed.id, run_id, current.writer_run_id)
            queue = self._queue.waiting.setdefault(observed.id, [])
            same = (current.fence, current.lock_id, current.current_state_version_id) == (
                observed.fence,
                observed.lock_id,
                observed.current_state_version_id,
            )
            handing = (handoff_to is None and not queue) or (
                handoff_to is not None and any(w == handoff_to.run_id for w, _ in queue)
            )
            if not same or not handing:
                raise ConcurrentChange(
                    f"workspace {observed.id} changed during recovery (fence, lock, state or "
                    "queue); review the run again"
                )
            state = {}
            if new_state is not None:
                sv_id, serial, lineage = new_state
                state = {
                    "current_state_version_id": sv_id,
                    "current_serial": serial,
                    "current_lineage": lineage,
                    "current_publication": None,
                }
            self._directory.workspaces[observed.id] = replace(
                self._directory.workspaces[observed.id],
                fence=current.fence + 1,
                lock_id=None,
                lock_run_id=None,
                locked_at=None,
                lock_holder=None,
                lock_holder_display=None,
                lock_reason=None,
                **state,  # type: ignore[arg-type]
            )
            if handoff_to is None:
                del self._queue.holders[observed.id]
            else:
                queue[:] = [(w, t) for w, t in queue if w != handoff_to.run_id]
                self._queue.holders[observed.id] = handoff_to.run_id

        self._intents.append(_Effect(("workspace", observed.id), recover))


class InMemoryRecoveryIntents:
    def __init__(self, recoveries: InMemoryRecoveries, intents: list[_Intent]) -> None:
        self._recoveries = recoveries
        self._intents = intents

    def get(self, run_id: str) -> Recovery | None:
        return self._recoveries.held.get(run_id)

    def _exactly(self, read: Recovery, *, holder: bool = False) -> Recovery:
        current = self._recoveries.held.get(read.run_id)
        if (
            current is None
            or current.state is not RecoveryState.PREPARED
            or current.generation != read.generation
            or (holder and current.holder != read.holder)
        ):
            raise ConcurrentChange(f"the recovery of run {read.run_id} changed meanwhile")
        return current

    def _intend(self, run_id: str, write: Callable[[], None]) -> None:
        self._intents.append(_Effect(("recovery", run_id), write))

    def prepare(self, recovery: Recovery) -> None:
        def prepare() -> None:
            if recovery.run_id in self._recoveries.held:
                raise ConcurrentChange(f"the recovery of run {recovery.run_id} changed meanwhile")
            self._recoveries.held[recovery.run_id] = recovery

        self._intend(recovery.run_id, prepare)

    def lease(
        self,
        recovery: Recovery,
        holder: str,
        expires_at: datetime,
        body: Mapping[str, Any],
        now: datetime,
    ) -> None:
        def lease() -> None:
            current = self._exactly(recovery)
            self._recoveries.held[recovery.run_id] = replace(
                current,
                holder=holder,
                generation=current.generation + 1,
                lease_expires_at=expires_at,
                body=dict(body),
                updated_at=now,
            )

        self._intend(recovery.run_id, lease)

    def record_target(self, recovery: Recovery, artifact_id: str, now: datetime) -> None:
        def record() -> None:
            current = self._exactly(recovery, holder=True)
            if current.target_artifact_id is not None:
                raise ConcurrentChange(f"the recovery of run {recovery.run_id} changed meanwhile")
            self._recoveries.held[recovery.run_id] = replace(
                current, target_artifact_id=artifact_id, updated_at=now
            )

        self._intend(recovery.run_id, record)

    def complete(self, recovery: Recovery, body: Mapping[str, Any], now: datetime) -> None:
        def complete() -> None:
            current = self._exactly(recovery, holder=True)
            if current.lease_expires_at <= now:
                raise ConcurrentChange(f"the recovery of run {recovery.run_id} changed meanwhile")
            self._recoveries.held[recovery.run_id] = replace(
                current, state=RecoveryState.COMPLETED, body=dict(body), updated_at=now
            )

        self._intend(recovery.run_id, complete)


class InMemoryStateVersionIntents:
    def __init__(self, versions: InMemoryStateVersions, intents: list[_Intent]) -> None:
        self._versions = versions
        self._intents = intents

    def get(self, sv_id: str) -> StateVersion:
        return self._versions.get(sv_id)

    def pending_of_run(self, workspace_id: str, run_id: str) -> list[StateVersion]:
        return [
            version
            for version in self._versions.versions.values()
            if version.workspace_id == workspace_id
            and version.status == PENDING
            and (version.provenance or {}).get("run_id") == run_id
        ]

    def discard_pending(self, version: StateVersion) -> None:
        def discard() -> None:
            current = self._versions.versions.get(version.id)
            if (
                current is None
                or current.status != PENDING
                or current.claimed_at != version.claimed_at
            ):
                raise Conflict(
                    f"state version {version.id} changed while recovery was discarding it"
                )
            del self._versions.versions[version.id]

        self._intents.append(_Effect(("state_version", version.id), discard))

    def put_finalized(self, version: StateVersion) -> None:
        def put() -> None:
            if version.id in self._versions.versions:
                raise ConcurrentChange(f"item state version {version.id} changed concurrently")
            self._versions.versions[version.id] = version

        self._intents.append(_Effect(("state_version", version.id), put))


class InMemoryArtifactIntents:
    def __init__(self, records: InMemoryArtifactRecords, intents: list[_Intent]) -> None:
        self._records = records
        self._intents = intents

    def register(self, records: Sequence[ArtifactRecord], now: datetime) -> None:
        for record in records:

            def register(record: ArtifactRecord = record) -> None:
                if record.artifact.id in self._records.records:
                    raise ConcurrentChange(f"artifact {record.artifact.id} is already registered")
                self._records.records[record.artifact.id] = record

            self._intents.append(_Effect(("artifact", record.artifact.id), register))


class InMemoryAudit:
    def __init__(self, recoveries: InMemoryRecoveries, intents: list[_Intent]) -> None:
        self._recoveries = recoveries
        self._intents = intents

    def security(self, record: AuditRecord) -> None:
        def append() -> None:
            self._recoveries.security_trail.append(record)

        self._intents.append(_Effect(("security", record.id), append))

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
        event = AuditedChange(event_id, type, subject_id, actor, dict(details))

        def record() -> None:
            self._recoveries.org_audit.append(event)

        self._intents.append(_Effect(("audit", event_id), record))


@dataclass
class InMemoryDriftRecords:
    """Each workspace's drift record (``store.schedules``' drift item)."""

    records: dict[str, Drift] = field(default_factory=dict)


class InMemoryDriftIntents:
    def __init__(self, drift: InMemoryDriftRecords, intents: list[_Intent]) -> None:
        self._drift = drift
        self._intents = intents

    def get(self, workspace_id: str) -> Drift | None:
        return self._drift.records.get(workspace_id)

    def put(self, drift: Drift) -> None:
        records = self._drift.records

        def put() -> None:
            held = records.get(drift.workspace_id)
            if held is not None and held.as_of > drift.as_of:
                raise StaleDriftFinding(
                    f"a newer run wrote workspace {drift.workspace_id}'s drift record"
                )
            records[drift.workspace_id] = drift

        self._intents.append(_Effect(("drift", drift.workspace_id), put))


class InMemoryUnitOfWork:
    """A unit of work over ``ledger`` (and ``writer``, the reservation a move releases;
    ``sandboxes``, the slots and sessions an attempt's close gives back and revokes)."""

    def __init__(
        self,
        ledger: InMemoryRunLedger,
        writer: InMemoryWriterQueue | None = None,
        sandboxes: InMemorySandboxes | None = None,
        *,
        directory: InMemoryWorkspaces | None = None,
        versions: InMemoryStateVersions | None = None,
        recoveries: InMemoryRecoveries | None = None,
        artifacts: InMemoryArtifactRecords | None = None,
        drift: InMemoryDriftRecords | None = None,
        start: InMemoryStartRecords | None = None,
    ) -> None:
        self._ledger = ledger
        self._writer = writer or InMemoryWriterQueue()
        self._sandboxes = sandboxes or InMemorySandboxes()
        self._directory = directory or InMemoryWorkspaces()
        self._versions = versions or InMemoryStateVersions()
        self._recoveries = recoveries or InMemoryRecoveries()
        self._artifact_records = artifacts or InMemoryArtifactRecords()
        self._drift = drift or InMemoryDriftRecords()
        # A phase's start: its capabilities, sandbox slots and references, apply lock
        # (None: the unit's own records, made when its repositories are first used).
        self._start = start
        self._intents: list[_Intent] = []
        self._moves: list[_Move] = []
        self.commits = 0

    # The repositories are made when first used: a use case touches a few of them, and
    # the interleavings make a unit of work per operation, by the ten thousand.

    @cached_property
    def parts(self) -> InMemoryRunParts:
        return InMemoryRunParts(self._ledger, self._intents)

    @cached_property
    def attempts(self) -> InMemoryAttempts:
        return InMemoryAttempts(self._sandboxes, self._intents)

    @cached_property
    def runs(self) -> InMemoryRunMoves:
        return InMemoryRunMoves(self._ledger, self._moves, self._intents, self._artifact_records)

    @cached_property
    def writer(self) -> InMemoryStartWriter:
        from tests.fake_uow_start import InMemoryStartWriter

        return InMemoryStartWriter(self._writer, self._directory, self._intents)

    @cached_property
    def recoveries(self) -> InMemoryRecoveryIntents:
        return InMemoryRecoveryIntents(self._recoveries, self._intents)

    @cached_property
    def state_versions(self) -> InMemoryStateVersionIntents:
        return InMemoryStateVersionIntents(self._versions, self._intents)

    @cached_property
    def audit(self) -> InMemoryAudit:
        return InMemoryAudit(self._recoveries, self._intents)

    @cached_property
    def artifacts(self) -> InMemoryArtifactIntents:
        return InMemoryArtifactIntents(self._artifact_records, self._intents)

    @cached_property
    def drift(self) -> InMemoryDriftIntents:
        return InMemoryDriftIntents(self._drift, self._intents)

    @cached_property
    def capabilities(self) -> InMemoryCapabilityIntents:
        from tests.fake_uow_start import InMemoryCapabilityIntents

        return InMemoryCapabilityIntents(self._start_records(), self._intents)

    @cached_property
    def sandboxes(self) -> InMemorySandboxIntents:
        from tests.fake_uow_start import InMemorySandboxIntents

        return InMemorySandboxIntents(self._sandboxes, self._start_records(), self._intents)

    def _start_records(self) -> InMemoryStartRecords:
        if self._start is None:
            from tests.fake_uow_start import InMemoryStartRecords

            self._start = InMemoryStartRecords()
        return self._start

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
        keys = [_key(intent) for intent in intents]
        if len(set(keys)) != len(keys):
            raise ValueError("a transaction may touch each item once")
        if not intents and not moves:
            return None
        saved, sandboxes = self._ledger.saved(), self._sandboxes.saved()
        others = self._others_saved()
        try:
            # The table's order of refusals: the move's conditions, then the intents.
            moved = [self._move(move) for move in moves]
            for intent in intents:
                intent.apply(self._ledger)
            for move, transition in zip(moves, moved, strict=True):
                self._close_apply_record(move, transition, {k for k in keys if len(k) == 2})
            handoffs = [self._release(move) for move in moves]
        except BaseException:
            self._ledger.restore(saved)
            self._sandboxes.restore(sandboxes)
            self._others_restore(others)
            raise
        self.commits += 1
        if not moved:
            return None
        [(move, transition, handoff)] = zip(moves, moved, handoffs, strict=True)
        return MovedRun(transition, self._ledger.get_run(move.run.id), handoff)

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
            changed(record, state=str(ending), body=body, updated_at=transition.at)
        )

    def _release(self, move: _Move) -> Handoff | None:
        """The writer reservation's release on entry, as ``store.moves`` composes it: a
        holder's apply lock goes with it, exactly ``move.lock`` when the move names one."""
        effect = WRITER_ON_ENTRY[move.target]
        releases = effect is WriterEffect.RELEASE or (
            effect is WriterEffect.RELEASE_UNLESS_STATE_PUBLISHED and not move.state_published
        )
        run = move.run
        if not releases or not run.kind.needs_writer_reservation:
            return None
        if self._writer.holders.get(run.workspace_id) == run.id:
            self._unlock(run, move.lock)
        return self._writer.release(run)

    def _unlock(self, run: Run, lock: ApplyLock | None) -> None:
        held = self._directory.workspaces.get(run.workspace_id)
        if held is None:
            return
        if lock is not None and (held.lock_id, held.fence) != (lock.lock_id, lock.fence):
            raise StaleFence(run.workspace_id, lock.fence, held.fence)
        if lock is None and (held.lock_run_id != run.id or held.lock_id is None):
            return
        self._directory.workspaces[run.workspace_id] = replace(
            held,
            lock_id=None,
            lock_run_id=None,
            locked_at=None,
            lock_holder=None,
            lock_holder_display=None,
            lock_reason=None,
        )

    def _discard(self) -> None:
        self._intents.clear()
        self._moves.clear()

    def _others_saved(self) -> tuple[Any, ...]:
        queue = self._writer
        return (
            dict(self._directory.workspaces),
            dict(queue.holders),
            {workspace: list(waiting) for workspace, waiting in queue.waiting.items()},
            dict(self._versions.versions),
            self._recoveries.saved(),
            dict(self._artifact_records.records),
            dict(self._drift.records),
            # Records never made hold nothing to put back.
            None if self._start is None else self._start.saved(),
        )

    def _others_restore(self, saved: tuple[Any, ...]) -> None:
        workspaces, holders, waiting, versions, recoveries, artifacts, drift, start = saved
        self._directory.workspaces = workspaces
        self._writer.holders = holders
        self._writer.waiting = waiting
        self._versions.versions = versions
        self._recoveries.restore(recoveries)
        self._artifact_records.records = artifacts
        self._drift.records = drift
        if self._start is not None and start is not None:
            self._start.restore(start)


def _key(intent: _Intent) -> tuple[str, ...]:
    """The item an intent touches: a run part by run and name, any other by its kind."""
    if isinstance(intent, _Effect):
        return ("", *intent.key)
    if isinstance(intent, _Put):
        return (intent.part.run_id, intent.part.name)
    return (intent.run_id, intent.name)


def empty_workspace(
    workspace_id: str, organization_id: str, created_at: datetime, name: str = "network"
) -> Workspace:
    """A workspace as created: fence 0, no writer, no lock, nobody waiting, no state."""
    return Workspace(
        id=workspace_id,
        organization_id=organization_id,
        name=name,
        created_at=created_at,
        fence=0,
        writer_run_id=None,
        lock_id=None,
        lock_run_id=None,
        queue_length=0,
    )
