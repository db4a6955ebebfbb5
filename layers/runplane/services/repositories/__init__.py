"""The repository seams: what a service needs of the store, per area.

Every type a seam names is a domain entity or value (``runplane.domain``): the store
maps its items to them and back, so nothing here depends on how they are stored.

Services that take one of these can run against the DynamoDB store (``store/``) or
an in-memory fake (``tests/fakes.py``) that keeps the same promises: every write is
conditional, a refused write changes nothing and raises the same typed error. A
contract test runs the same cases against both (tests/integration/test_repository_contract.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from runplane.domain.artifacts import Artifact, ArtifactRecord
from runplane.domain.audit import AuditRecord
from runplane.domain.entities import AuditEvent, Organization, Run, RunStage, Workspace
from runplane.domain.identity import Principal
from runplane.domain.notifications import Delivery, Destination, SlotLease
from runplane.domain.parts import RunPart
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.domain.run import RunKind, RunStatus, Stage, Transitioned
from runplane.domain.run_events import RunEvent
from runplane.domain.run_triggers import Triggers
from runplane.domain.schedules import Drift, Fire, Schedule
from runplane.domain.second_approval import SecondApprovalRule
from runplane.domain.state import StateVersion
from runplane.domain.variables import StoredVariable, VariableCategory, WorkspaceVariable


class WorkspaceDirectory(Protocol):
    """Organizations and workspaces by ID and by unique name, and workspace settings.

    - ``create_*`` claims the name and writes the record at once; a taken name raises
      ``AlreadyExists`` and writes nothing.
    - ``get_*`` raises ``NotFound``; ``find_*_id`` returns None for an unknown name.
    - ``list_workspaces`` is in name order.
    - ``update_settings`` sets only the settings given and adds one to the workspace's
      ``settings_version`` (nothing given: nothing written); an unknown workspace raises
      ``NotFound``, and settings no longer at ``expected_settings_version`` (when given)
      raise ``ConcurrentChange``, and write nothing.
    - ``delete_workspace`` frees the workspace's name, marks it deleted by ``deleted_by``
      at ``event.at`` and records the audit ``event``, in one write, only while the
      workspace is as read: its fence and current state version unchanged, no writer,
      waiter or lock (else ``ConcurrentChange``; a workspace deleted meanwhile or unknown
      ``NotFound``), writing nothing when refused. A deleted workspace is then unknown to
      ``get_workspace``, ``find_workspace_id`` and ``list_workspaces``; its name may be
      claimed again. Its runs and state versions stay.
    """

    def create_organization(self, org: Organization) -> None: ...

    def get_organization(self, org_id: str) -> Organization: ...

    def find_organization_id(self, name: str) -> str | None: ...

    def create_workspace(self, workspace: Workspace) -> None: ...

    def get_workspace(self, workspace_id: str) -> Workspace: ...

    def find_workspace_id(self, org_id: str, name: str) -> str | None: ...

    def list_workspaces(self, org_id: str) -> list[Workspace]: ...

    def delete_workspace(
        self, workspace: Workspace, *, deleted_by: str, event: AuditEvent
    ) -> None: ...

    def update_settings(
        self,
        workspace_id: str,
        *,
        terraform_version: str | None = None,
        description: str | None = None,
        tag_names: tuple[str, ...] | None = None,
        approval_window_seconds: int | None = None,
        execution_mode: str | None = None,
        second_approval: SecondApprovalRule | None = None,
        expected_settings_version: int | None = None,
        audit: AuditRecord | None = None,
    ) -> None: ...


class RunReader(Protocol):
    """What the Runs service reads to show a run: the run, its stages and its parts.

    Reads only: a run's creation and plain moves are the ``RunLedger``'s.

    - ``get_run`` raises ``NotFound`` for an unknown run.
    - ``runs_of_workspace`` is newest first (creation time, then ID, both descending);
      another workspace's runs are never in it; with ``limit``, only the newest
      ``limit`` are read (a listing reads what it shows, never the workspace's history).
    - ``stages`` holds the stages recorded for the run (all four from its creation).
    - ``parts`` holds the run's parts by name; empty for an unknown run.
    """

    def get_run(self, run_id: str) -> Run: ...

    def runs_of_workspace(self, workspace_id: str, limit: int | None = None) -> list[Run]: ...

    def stages(self, run_id: str) -> dict[Stage, RunStage]: ...

    def parts(self, run_id: str) -> dict[str, RunPart]: ...


class VariableStore(Protocol):
    """A workspace's variables, each with its version, and the writes that keep the
    workspace within its limits.

    A variable is named by its category and name (``region`` may be both a Terraform
    and an environment variable); the limits count both categories together.

    - ``all_of`` is Terraform variables then environment variables, each in name order;
      ``find`` returns None for an unknown (category, name).
    - ``put`` creates (``previous`` None) or replaces exactly the ``previous`` version
      read, and records the audit event ``event_id``. A name already taken (on create)
      or a version changed meanwhile raises ``ConcurrentChange``; a 101st variable
      raises ``InvalidInput``, values adding up past the byte limit
      ``VariablesTooLarge``. A refused put writes nothing.
    - ``delete`` removes exactly the ``previous`` version (``ConcurrentChange`` if it
      changed or went meanwhile, writing nothing) and records the audit event.
    """

    def all_of(self, workspace_id: str) -> list[StoredVariable]: ...

    def find(
        self,
        workspace_id: str,
        name: str,
        category: VariableCategory = VariableCategory.TERRAFORM,
    ) -> StoredVariable | None: ...

    def put(
        self,
        *,
        org_id: str,
        workspace_id: str,
        variable: WorkspaceVariable,
        size: int,
        wrapped_key: bytes | None,
        sealed: bytes | None,
        previous: StoredVariable | None,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...

    def delete(
        self,
        *,
        org_id: str,
        workspace_id: str,
        previous: StoredVariable,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None: ...


class ScheduleStore(Protocol):
    """A workspace's schedules and the record of their fires.

    - ``create`` writes a new schedule (``ConcurrentChange`` if its ID exists);
      ``set_state`` and ``delete`` raise ``NotFound`` for an unknown one and write
      nothing; ``get`` raises ``NotFound``.
    - ``list_for_workspace`` is in creation order.
    - ``record_fire`` writes the fire record for (schedule, scheduled time) only if
      absent (else ``ScheduleAlreadyFired``) and moves the schedule's last fire, and
      its active run when given, only from the active run and state it was read with
      (else ``ScheduleMoved``); a refused record writes nothing. A fire that creates a
      run records itself in the run's own creation transaction instead
      (``store.schedules.record_fire`` as an extra write), which stays on the store.
    - ``fires`` is newest first, at most ``limit``.
    - ``latest_configuration_id`` is the workspace's newest uploaded, non-speculative
      configuration version, or None.
    """

    def get(self, schedule_id: str) -> Schedule: ...

    def list_for_workspace(self, workspace_id: str) -> list[Schedule]: ...

    def create(self, schedule: Schedule) -> None: ...

    def set_state(self, schedule_id: str, state: str, now: datetime) -> None: ...

    def delete(self, schedule_id: str) -> None: ...

    def record_fire(
        self,
        schedule: Schedule,
        scheduled_at: datetime,
        *,
        outcome: str,
        now: datetime,
        reason: str | None = None,
    ) -> None: ...

    def fires(self, schedule_id: str, limit: int = 20) -> list[Fire]: ...

    def latest_configuration_id(self, workspace_id: str) -> str | None: ...

    def drift(self, workspace_id: str) -> Drift | None:
        """The workspace's drift record (None: no scheduled plan checked it yet)."""
        ...


class RunTriggerStore(Protocol):
    """Each workspace's run-trigger sources (with the run kind they queue) and the
    reverse links from a source to its dependents.

    - ``get`` is the workspace's trigger list at its version; a workspace never
      configured reads as no sources, ``plan_and_apply``, version 0.
    - ``dependents`` are the workspaces that name ``source_id`` as a source, in ID order.
    - ``add_source`` writes ``current``'s sources with ``source_id`` appended (kept
      where it is if already there) and ``run_kind``, at the next version, and the link
      from the source; only if ``current`` and every list in ``unchanged`` (what a
      cycle check read) are still at the version read, else ``ConcurrentChange``.
    - ``remove_source`` writes ``current``'s sources without ``source_id`` at the next
      version and removes the link, only if ``current`` is still at the version read
      (else ``ConcurrentChange``).
    A refused write writes nothing. The claim a source run makes per dependent (the
    triggered run, or why none was queued) is written in the triggered run's own
    creation transaction, and stays on the store.
    """

    def get(self, workspace_id: str) -> Triggers: ...

    def dependents(self, source_id: str) -> list[str]: ...

    def add_source(
        self,
        current: Triggers,
        source_id: str,
        *,
        org_id: str,
        run_kind: RunKind,
        now: datetime,
        unchanged: Sequence[Triggers] = (),
    ) -> None: ...

    def remove_source(
        self, current: Triggers, source_id: str, *, org_id: str, now: datetime
    ) -> None: ...


class NotificationStore(Protocol):
    """A workspace's notification destinations (their URL and signing secret already
    sealed by the caller) and the delivery of each event to each destination.

    - ``destinations`` is in creation order; ``get_destination`` raises ``NotFound``.
    - ``put_destination`` writes a new destination (``ConcurrentChange`` if its ID
      exists in the workspace); ``delete_destination`` raises ``NotFound`` for an
      unknown one. The per-workspace limit is the service's, checked before.
    - ``new_delivery`` records the delivery of ``event`` (a run-event message) to the
      destination, pending with no attempts, only if none exists for that destination
      and event ID (else ``ConcurrentChange``: fan-out is idempotent per event).
    - ``get_delivery`` returns None for an unknown one; ``deliveries`` is newest first.
    - ``claim_attempt`` takes attempt ``attempts + 1`` (``delivering`` until
      ``lease_until``) only from a pending or retrying delivery still at the attempts
      read; ``reclaim_attempt`` takes over a ``delivering`` one at the attempts read
      whose lease ran out before ``now``, adding ``lost`` to the history read and
      claiming the next attempt (or, with ``give_up``, failing it); ``record_attempt``
      adds the outcome to the history read and sets ``state``, only while the attempt
      read is still the one being delivered. Each refusal is ``ConcurrentChange``.
    A refused write writes nothing. Delivery over HTTP is the ``WebhookClient`` adapter.
    """

    def destinations(self, workspace_id: str) -> list[Destination]: ...

    def get_destination(self, workspace_id: str, destination_id: str) -> Destination: ...

    def put_destination(self, destination: Destination) -> None: ...

    def delete_destination(self, workspace_id: str, destination_id: str) -> None: ...

    def new_delivery(
        self,
        delivery_id: str,
        destination: Destination,
        event: Mapping[str, Any],
        now: datetime,
    ) -> None: ...

    def get_delivery(self, destination_id: str, event_id: str) -> Delivery | None: ...

    def deliveries(self, destination_id: str) -> list[Delivery]: ...

    def claim_attempt(self, delivery: Delivery, now: datetime, lease_until: datetime) -> None: ...

    def reclaim_attempt(
        self,
        delivery: Delivery,
        lost: Mapping[str, Any],
        now: datetime,
        lease_until: datetime,
        *,
        give_up: bool,
    ) -> None: ...

    def record_attempt(
        self, delivery: Delivery, attempt: Mapping[str, Any], state: str, now: datetime
    ) -> None: ...


class DeliverySlots(Protocol):
    """In-flight slots of notification deliveries, shared by every worker process.

    - ``acquire`` takes one free slot of the destination and one of the organization
      together, held until ``until``, or neither (None: every slot of one is held).
      A slot is free when nobody holds it or its holder's lease ran out before
      ``now`` (a holder that stopped never blocks it for longer).
    - ``release`` gives back those of the lease's slots still held under it.
    """

    def acquire(
        self, organization_id: str, destination_id: str, now: datetime, until: datetime
    ) -> SlotLease | None: ...

    def release(self, lease: SlotLease) -> None: ...


class PolicySetStore(Protocol):
    """An organization's published policy sets: one head per set (its current version
    and where it is attached) and the immutable versions behind it.

    - ``get`` raises ``NotFound``; ``find`` returns None. Both read the organization's
      own sets only: another organization's set of the same name is absent.
    - ``all_of`` is in name order.
    - ``counted_none`` is True only when the request read the organization's tally ahead
      and it counts no set (a new set's creation counts in the same write); it reads
      nothing itself, and an organization with no tally (created before tallies) is
      never counted none. ``all_of`` answers none without a query then.
    - ``version_artifact_id`` is the artifact of content published before under this
      name and digest, or None.
    - ``publish`` writes the version (numbered ``previous.versions + 1``) and moves the
      head to it, keeping the head's attachments; with ``version_exists`` only the head
      moves back to that earlier content, keeping the count. It names the head it
      replaces (``previous``, None for a new set): a head that moved meanwhile, a set
      created meanwhile, or a version of that digest already stored raises
      ``ConcurrentChange``. A refused publish writes nothing.
    - ``attach`` sets the head's workspaces and ``all_workspaces`` flag, only over the
      head version read (``ConcurrentChange`` otherwise, writing nothing).

    A run's policy check is no part of this: it is a run part written in the run's own
    transactions (``store.run_parts``), which stay on the store.
    """

    def get(self, org_id: str, name: str) -> PolicySetHead: ...

    def find(self, org_id: str, name: str) -> PolicySetHead | None: ...

    def all_of(self, org_id: str) -> list[PolicySetHead]: ...

    def counted_none(self, org_id: str) -> bool: ...

    def version_artifact_id(self, org_id: str, name: str, digest: str) -> str | None: ...

    def publish(
        self,
        org_id: str,
        name: str,
        digest: str,
        artifact_id: str,
        policies: list[dict[str, Any]],
        *,
        previous: PolicySetHead | None,
        by: str,
        now: datetime,
        version_exists: bool = False,
    ) -> None: ...

    def attach(
        self,
        head: PolicySetHead,
        workspaces: list[str],
        all_workspaces: bool,
        *,
        by: str,
        now: datetime,
    ) -> None: ...


class StateVersionReader(Protocol):
    """What the state service reads: state versions, and the version a run pinned.

    Reads only: publishing is ``repositories.state.StatePublication``'s.

    - ``get`` raises ``NotFound`` for an unknown version.
    - ``list_for_workspace`` holds the workspace's finalized versions only (a pending
      one is not yet state), oldest first: by serial, then creation time. Another
      workspace's versions are never in it.
    - ``pinned`` is the version a runner session's run pinned as its predecessor when
      it planned (None if the workspace had no state then); an unknown run raises
      ``NotFound``.
    """

    def get(self, sv_id: str) -> StateVersion: ...

    def list_for_workspace(self, workspace_id: str) -> list[StateVersion]: ...

    def pinned(self, principal: Principal) -> str | None: ...


class RunLedger(Protocol):
    """A run's own writes: its creation and its plain status moves (not named "writer":
    that is the workspace writer reservation, ``services.writer``).

    - ``create`` writes the run, its four stages (pending), its ``run.created`` audit
      event and its ``input`` part (the snapshot it runs from) at once; a taken run ID
      raises ``RunAlreadyExists`` and writes nothing.
    - ``move`` moves ``run`` (a snapshot) to ``target`` at once with the stage changes
      and audit event its row of ``domain/transitions.py`` prescribes, sets
      ``run_updates`` (only ``plan_has_changes``, ``predecessor_sv_id``,
      ``approval_expires_at``, else ``ValueError``) and the status reason (``reason``,
      or none), and returns the move (its version is the snapshot's plus one). A move
      the table does not allow for the snapshot raises ``IllegalTransition``; a run no
      longer in the snapshot's status and version (or gone) ``TransitionRejected``; a
      stage not where the move needs it ``ConcurrentChange``. A refused move writes
      nothing and announces nothing.
    - A committed move announces its run event (``domain.run_events.move_event``;
      none inside the active path) and the events ``also_announce`` makes of it, in
      its own write (the outbox): an event exists exactly when its move committed.

    A move that must commit with other writes (the writer reservation's release, an
    open apply record's close, a capability redemption, parts a caller changes with
    it) and a creation with writes of its caller (a schedule's fire, a trigger's
    record) stay on the store (``RunRepository.transition_writes`` and ``create``).
    """

    def create(self, run: Run, *, actor: str, input: Mapping[str, Any]) -> None: ...

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


class ArtifactRecords(Protocol):
    """Each artifact's record: where its ciphertext is, its wrapped data key, and the size
    and SHA-256 it must decrypt to. The ciphertext itself is the object store's
    (``adapters.object_store``) and the data key's unwrapping KMS's (``adapters.keys``).

    - ``get`` raises ``NotFound`` for an unknown artifact; ``exists`` says whether one is
      recorded (a consistent read, like ``get``).
    - ``register`` writes a verified artifact, readable at once, in one conditional put:
      an artifact already recorded under its ID (a second register of one upload, an ID
      taken) raises ``ConcurrentChange`` and writes nothing.
    - ``register_all`` writes verified artifacts (``etag`` set) in one transaction, all or
      none: one already recorded raises ``ConcurrentChange`` and nothing is written.
    - ``register_with`` is ``register`` committed in one write with ``together``: the
      store's own write of what refers to the artifact (a log chunk, a configuration
      version's upload; a transaction on DynamoDB), handed on without being looked into.
      Refused, neither is written: an ID already recorded raises ``ConcurrentChange``
      first, then ``together``'s own refusal.
    - ``discard`` removes the record, which then reads as unknown. It is unconditional:
      discarding an unknown artifact writes nothing and raises nothing.

    There are no status moves: a runner's upload is a ticket until ``register`` writes it
    verified (``domain/upload_tickets.py``), so no record is ever stored ``pending``.
    """

    def get(self, artifact_id: str) -> ArtifactRecord: ...

    def exists(self, artifact_id: str) -> bool: ...

    def register(
        self,
        artifact: Artifact,
        *,
        object_key: str,
        wrapped_key: bytes,
        chunk_size: int,
        etag: str,
        session_id: str | None = None,
        registered_at: datetime | None = None,
    ) -> None: ...

    def register_with(
        self,
        artifact: Artifact,
        *,
        object_key: str,
        wrapped_key: bytes,
        chunk_size: int,
        etag: str,
        together: object,
    ) -> None: ...

    def register_all(self, records: Sequence[ArtifactRecord], registered_at: datetime) -> None: ...

    def discard(self, artifact_id: str) -> None: ...
