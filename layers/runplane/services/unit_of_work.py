"""The unit of work: what a service reads of a run, and the writes it intends, committed
together as one all-or-nothing write or not at all.

A service opens one per use case (``with units() as uow:``), reads through its
repositories, states its writes as *intents* (nothing is written when an intent is
made) and calls ``commit()``. Leaving the ``with`` block discards the intents not
committed, so an error between the intents and the commit writes nothing, and a
``commit()`` after the block commits nothing.

Every intent is conditional. ``commit()`` sends all of them at once; if any condition
is refused, nothing is written and the typed error of the first refused intent is
raised: a move's own conditions first (``TransitionRejected`` for a stale snapshot,
``ConcurrentChange`` for a stage not where the move needs it), then the parts' and the
attempts' intents in the order they were made (each with its ``on_refused`` error,
``ConcurrentChange`` by default). A refused commit discards the intents too.

Every type named here is the domain's: the DynamoDB implementation
(``store.unit_of_work``) turns the intents into conditional writes of one
TransactWriteItems; the in-memory one (``tests/fake_unit_of_work.py``) applies them to
the in-memory repositories all or none. A contract test runs the same cases against both
(``tests/integration/test_unit_of_work_contract.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Protocol

from runplane.domain.artifacts import ArtifactRecord
from runplane.domain.audit import AuditRecord
from runplane.domain.capabilities import Binding, CapabilityKind, CapabilityRecord
from runplane.domain.entities import ApplyLock, Run, Waiter, Workspace
from runplane.domain.intents import KEEP as KEEP
from runplane.domain.intents import Keep as Keep
from runplane.domain.intents import MovedRun as MovedRun
from runplane.domain.intents import Refused as Refused
from runplane.domain.launch_controls import Clearance
from runplane.domain.parts import AttemptState, RunPart
from runplane.domain.recovery import Recovery
from runplane.domain.run import RunStatus, Transitioned
from runplane.domain.run_events import RunEvent
from runplane.domain.sandbox_exits import SandboxRef
from runplane.domain.schedules import Drift
from runplane.domain.state import StateVersion


class RunPartIntents(Protocol):
    """A run's parts: read now, written at commit.

    - ``get`` is None for an absent part; ``several`` holds each named part (None if
      absent), read together; ``all_of`` is every part the run has, by name.
    - ``change`` intends to change part ``name`` only if it is in ``expected_state``
      (one state or any of several): ``state`` when given, ``body`` (replacing the
      document) when given, the token (``None`` removes it, ``KEEP`` leaves it); with
      ``expected_token``, only if the part holds exactly that token (None: none).
    - ``put`` intends a new part, only if the run has none of that name (parts are
      created once).
    A refused intent raises ``on_refused(state held)`` at commit; without one,
    ``ConcurrentChange``.
    """

    def get(self, run_id: str, name: str) -> RunPart | None: ...

    def several(self, run_id: str, names: Sequence[str]) -> dict[str, RunPart | None]: ...

    def all_of(self, run_id: str) -> dict[str, RunPart]: ...

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
    ) -> None: ...

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
    ) -> None: ...


class RunMoves(Protocol):
    """Runs: read now, moved at commit.

    - ``get`` raises ``NotFound`` for an unknown run; ``with_parts`` is the run and each
      named part (None if absent) in one read.
    - ``move`` intends to move ``run`` (a snapshot) to ``target`` with the rules of
      ``RunLedger.move``: a move ``domain/transitions.py`` does not allow for the
      snapshot raises ``IllegalTransition`` at once (nothing is read or intended); at
      commit a run no longer in the snapshot's status and version raises
      ``TransitionRejected``, a stage not where the move needs it ``ConcurrentChange``;
      the committed move records its stage changes, audit event and run events (outbox).
      A move whose target releases the workspace writer reservation
      (``WRITER_ON_ENTRY``) releases it in the same commit and hands it to the oldest
      waiting run (``MovedRun.handoff``), or takes the run out of the queue if it was
      waiting. A move that ends a run that may apply closes its apply record if it is
      still open (``apply_record_on_end``), unless a part intent of the same commit
      changes that record. One move per unit of work.
    - An apply's result moves with ``state_published`` (the apply published state: an
      ``apply_failed`` run then keeps the reservation, for recovery) and ``lock``, the
      apply lock its attempt was granted: a release on entry releases exactly that lock
      and fence (``StaleFence`` at commit if it is no longer the workspace's).
    """

    def get(self, run_id: str) -> Run: ...

    def with_parts(
        self, run_id: str, names: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None]]: ...

    def with_parts_and_artifacts(
        self, run_id: str, names: Sequence[str], artifact_ids: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None], dict[str, ArtifactRecord]]:
        """``with_parts`` and the records of ``artifact_ids`` (those found), in one read."""
        ...

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
    ) -> None: ...

    def expect_unchanged(self, run: Run, *, on_refused: Refused) -> None:
        """Intend nothing but a condition: ``run`` is still in the snapshot's status at
        commit (``on_refused(status held)`` otherwise), for a commit built on it."""
        ...

    def expect_status(self, run_id: str, status: RunStatus, *, on_refused: Refused) -> None:
        """Intend nothing but a condition: the run is in ``status`` at commit
        (``on_refused(status held)`` otherwise), for a commit that did not read it."""
        ...


class AttemptIntents(Protocol):
    """A run's runner attempts (its ``attempt#<phase>`` parts, read through ``parts``),
    closed at commit.

    - ``close`` intends to close ``attempt`` (the part as read) in ``state``, only if it
      is still in the state read: its body gains ``finished_at`` (``now``) and
      ``evidence``, its token is removed, the sandbox slots its body names are given
      back and the runner sessions it names (``RunPart.session_keys``) are revoked, if
      it started less than a day before ``now`` (later, a session may have expired out
      of the store; each is refused all the same once its attempt is closed). A close
      the attempt's state table does not allow raises ``IllegalPartMove`` at once
      (nothing is intended). At commit an attempt no longer in the state read, or a
      session to revoke no longer held, raises ``ConcurrentChange``.
    """

    def close(
        self, attempt: RunPart, state: AttemptState, *, now: datetime, **evidence: Any
    ) -> None: ...

    def revoke_sessions(self, attempt_id: str, now: datetime) -> None:
        """Intend to revoke every runner session of a closed attempt not yet revoked (a
        revocation that raced this one keeps its instant); at commit a session gone
        meanwhile raises ``ConcurrentChange``."""
        ...


class WriterQueue(Protocol):
    """Each workspace's writer reservation, its apply lock, fence and current state.

    - ``workspace`` is the workspace as the table holds it (``NotFound`` if unknown):
      the holder of its writer reservation, its queue length, lock, fence and current
      state version.
    - ``waiter_token`` is the token of ``run``'s wait in its workspace's queue, or None
      if it is not waiting (it holds the reservation, has none, or its kind needs
      none); ``oldest_waiter`` is the run first in line, or None.
    - ``recover`` intends to end ``run_id``'s writer authority after recovery, in one
      write of the workspace exactly as ``observed`` (holder, fence, lock and current
      state version): the fence advances, the lock and the reservation are released and
      the reservation handed to ``handoff_to`` (leaving the queue), or freed if no run
      waits, which needs the queue to still be empty; ``new_state`` (ID, serial,
      lineage) becomes current if given. At commit another holder raises ``NotWriter``,
      anything else moved ``ConcurrentChange``.
    - ``take_free_reservation`` intends ``run_id``'s taking the reservation of
      ``workspace_id`` as nobody holds it and nobody waits for it, at commit
      (``ConcurrentChange`` otherwise, or if the workspace was deleted meanwhile).
    - ``take_apply_lock`` intends ``lock`` (a run's apply lock with the next fence) on
      its workspace, only if its run holds the writer reservation (``NotWriter``), the
      workspace is unlocked (``WorkspaceAlreadyLocked``) and its fence is still
      ``lock.fence - 1`` (``ConcurrentChange``: the fence moved), at commit.
    """

    def workspace(self, workspace_id: str) -> Workspace: ...

    def read_before(self, workspace: Workspace) -> None:
        """``workspace`` as the caller read it before this unit (in the same step, with
        no write to it since): the unit's move builds on it (its event's subscribers, a
        release's conditions) as on one it read itself, instead of reading it again."""
        ...

    def waiter_token(self, run: Run) -> str | None: ...

    def oldest_waiter(self, workspace_id: str) -> Waiter | None: ...

    def recover(
        self,
        observed: Workspace,
        run_id: str,
        handoff_to: Waiter | None,
        now: datetime,
        new_state: tuple[str, int, str] | None = None,
    ) -> None: ...

    def take_free_reservation(self, workspace_id: str, run_id: str, now: datetime) -> None: ...

    def take_apply_lock(self, lock: ApplyLock, now: datetime) -> None: ...


class RecoveryIntents(Protocol):
    """Runs' durable recovery operations, one per run.

    - ``get`` is the run's recovery, or None.
    - ``prepare`` intends the new operation, only if the run has none.
    - ``lease`` intends to lease the prepared operation to ``holder`` until
      ``expires_at`` with ``body``, moving its generation, only if it is still prepared
      at the generation read.
    - ``record_target`` intends to record the copied target state's artifact once: only
      if it is still prepared at the generation read, held by the holder read, and has
      none.
    - ``complete`` intends prepared -> completed with ``body``, only at the generation
      and holder read and while the lease has not run out at ``now``.
    A refused intent raises ``ConcurrentChange`` at commit.
    """

    def get(self, run_id: str) -> Recovery | None: ...

    def prepare(self, recovery: Recovery) -> None: ...

    def lease(
        self,
        recovery: Recovery,
        holder: str,
        expires_at: datetime,
        body: Mapping[str, Any],
        now: datetime,
    ) -> None: ...

    def record_target(self, recovery: Recovery, artifact_id: str, now: datetime) -> None: ...

    def complete(self, recovery: Recovery, body: Mapping[str, Any], now: datetime) -> None: ...


class StateVersionIntents(Protocol):
    """Workspaces' state versions.

    - ``get`` raises ``NotFound`` for an unknown version.
    - ``pending_of_run`` is the run's pending versions (declared, bytes never arrived).
    - ``discard_pending`` intends to delete a pending version exactly as read: still
      pending and claimed at the same instant (or not at all); ``Conflict`` at commit
      otherwise.
    - ``put_finalized`` intends a new finalized version (its pointer move is the
      caller's), refused with ``ConcurrentChange`` if the ID is taken.
    """

    def get(self, sv_id: str) -> StateVersion: ...

    def pending_of_run(self, workspace_id: str, run_id: str) -> list[StateVersion]: ...

    def discard_pending(self, version: StateVersion) -> None: ...

    def put_finalized(self, version: StateVersion) -> None: ...


class ArtifactIntents(Protocol):
    """Artifact records: ``register`` intends verified records (a runner's uploads), each
    written only if its ID is not recorded yet (``ConcurrentChange`` at commit)."""

    def register(self, records: Sequence[ArtifactRecord], now: datetime) -> None: ...


class AuditIntents(Protocol):
    """Organization audit events: ``record`` intends one, written once at commit;
    ``security`` intends a security trail record (``domain.audit``), the same way."""

    def security(self, record: AuditRecord) -> None: ...

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
    ) -> None: ...


class DriftIntents(Protocol):
    """A workspace's drift record (``domain.schedules.Drift``): ``get`` reads it (None:
    never checked); ``put`` intends the record a run's final move writes, only if no run
    created later wrote one (``StaleDriftFinding`` at commit)."""

    def get(self, workspace_id: str) -> Drift | None: ...

    def put(self, drift: Drift) -> None: ...


class CapabilityIntents(Protocol):
    """A sandbox's capabilities, by the hash of their handle (never the handle).

    - ``mint`` intends ``record`` created at ``now``, only if no capability has that
      hash (``ConcurrentChange`` at commit): it exists once the unit commits.
    - ``redeem`` intends its one redemption at ``now``, storing ``request_digest`` and
      ``result`` when given: only if it is a capability of ``kind``, exactly bound to
      ``binding``, unexpired and never redeemed. At commit a refusal raises
      ``UnknownCapability``, ``CapabilityExpired``, ``CapabilityWrongAttempt``,
      ``CapabilityWrongPhase`` or ``CapabilityWrongSandbox``, and a capability redeemed
      before ``AlreadyRedeemed`` carrying the digest and result stored then (an identical
      retry's answer).
    """

    def mint(self, handle_hash: str, record: CapabilityRecord, now: datetime) -> None: ...

    def redeem(
        self,
        handle_hash: str,
        kind: CapabilityKind,
        binding: Binding,
        now: datetime,
        *,
        request_digest: str | None = None,
        result: Mapping[str, str] | None = None,
    ) -> None: ...


class SandboxIntents(Protocol):
    """What a sandbox's launch writes beside its attempt.

    - ``take_slots`` intends one more running sandbox in each scope ``clearance`` limits,
      refused at commit with ``SandboxCapacityExhausted`` when a scope is full; it
      returns the scopes (the attempt names them, for its close to give them back).
    - ``record`` intends the pointer from a launcher's reference to the attempt it was
      launched for, put once (``ConcurrentChange``), kept ``phase_limit`` and a day.
    """

    def take_slots(self, clearance: Clearance) -> list[str]: ...

    def record(self, ref: SandboxRef, now: datetime, phase_limit: timedelta) -> None: ...


class UnitOfWork(Protocol):
    """The repositories a use case reads and writes through, and its one commit."""

    @property
    def parts(self) -> RunPartIntents: ...

    @property
    def attempts(self) -> AttemptIntents: ...

    @property
    def runs(self) -> RunMoves: ...

    @property
    def writer(self) -> WriterQueue: ...

    @property
    def recoveries(self) -> RecoveryIntents: ...

    @property
    def state_versions(self) -> StateVersionIntents: ...

    @property
    def audit(self) -> AuditIntents: ...

    @property
    def artifacts(self) -> ArtifactIntents: ...

    @property
    def drift(self) -> DriftIntents: ...

    @property
    def capabilities(self) -> CapabilityIntents: ...

    @property
    def sandboxes(self) -> SandboxIntents: ...

    def commit(self) -> MovedRun | None:
        """Write every intent at once, or none (the first refused intent's error); the
        committed move, if one was intended. The intents are spent either way."""
        ...

    def __enter__(self) -> UnitOfWork: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Discard the intents not committed."""
        ...


# What a service is given: a new unit of work per use case.
UnitsOfWork = Callable[[], UnitOfWork]
