"""Deterministic stand-ins for the clock and ID ports, and in-memory repositories.

The repositories keep the promises of the seams in ``runplane.services.repositories``
(conditional writes that change nothing when refused, the same typed errors); the
contract test (tests/integration/test_repository_contract.py) holds them to it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runplane.adapters.envelope import Read
from runplane.adapters.keys import DataKey, DataKeys, KeyUnavailable
from runplane.adapters.launchers import LaunchRequest
from runplane.adapters.object_store import ObjectChanged, ObjectMissing, ObjectStore, StoredObject
from runplane.adapters.workflow import Workflow
from runplane.domain import transitions
from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactRecord, ArtifactStatus
from runplane.domain.audit import AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.entities import AuditEvent, Organization, Run, RunStage, Workspace
from runplane.domain.errors import (
    AlreadyExists,
    ConcurrentChange,
    InvalidInput,
    NotFound,
    RunAlreadyExists,
    ScheduleAlreadyFired,
    ScheduleMoved,
    TransitionRejected,
    VariablesTooLarge,
)
from runplane.domain.identity import Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.notifications import Delivery, Destination
from runplane.domain.parts import RunPart
from runplane.domain.policy import PolicySetContent
from runplane.domain.policy_capabilities import refuse_forbidden_builtins
from runplane.domain.policy_input import PolicyInputs
from runplane.domain.policy_results import PolicyResult
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus, Transitioned
from runplane.domain.run_events import RunEvent, move_event
from runplane.domain.run_triggers import Triggers
from runplane.domain.schedules import Drift, Fire, Schedule
from runplane.domain.second_approval import SecondApprovalRule
from runplane.domain.state import FINALIZED, StateVersion
from runplane.domain.variables import (
    MAX_VARIABLES,
    MAX_VARIABLES_BYTES,
    StoredVariable,
    VariableCategory,
    WorkspaceVariable,
)

_TICK = timedelta(milliseconds=1)
_Entity = TypeVar("_Entity", Run, RunStage, RunPart)


def _plain_frozen(cls: type) -> bool:
    """A frozen dataclass whose ``__init__`` only sets its fields (no ``__post_init__``,
    no field left out of it, no slots): a copy of its attributes is what ``replace``
    would build."""
    return (
        not hasattr(cls, "__post_init__")
        and not hasattr(cls, "__slots__")
        and all(f.init for f in fields(cls))
    )


assert all(_plain_frozen(cls) for cls in (Run, RunStage, RunPart))


def changed(entity: _Entity, **changes: Any) -> _Entity:
    """``dataclasses.replace`` for the entities a move rewrites (checked above to be plain
    frozen dataclasses), naming only their fields: their attributes copied, then
    changed, without replace's walk over the fields and the frozen ``__init__``'s
    setattr per field (a run has sixteen; the interleavings move runs by the ten
    thousand)."""
    copied = object.__new__(type(entity))
    attributes = copied.__dict__
    attributes.update(entity.__dict__)
    attributes.update(changes)
    return copied


class FakeClock:
    """Starts at a fixed instant and moves forward a millisecond per reading."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._interruptions: list[Callable[[], object]] = []

    def now(self) -> datetime:
        self.current += _TICK
        if self._interruptions:
            self._interruptions.pop(0)()
        return self.current

    def on_next_reading(self, interruption: Callable[[], object]) -> None:
        """Run ``interruption`` (another actor's step) when the clock is next read: a
        deterministic way to land it between a service's read and its write."""
        self._interruptions.append(interruption)

    def advance(self, delta: timedelta) -> None:
        self.current += delta


ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
# A 32-bit draw's top byte -> its letter: ``choice`` over 32 letters keeps a draw's top six
# bits (``getrandbits(6)``), and draws again when they are 32 or more (the top bit set).
_LETTER_OF_TOP_BYTE = bytes(ord(ID_ALPHABET[byte >> 2]) for byte in range(128)) + bytes(128)
_REDRAWN = bytes(range(128, 256))


def _letters_of(rng: random.Random, words: int) -> str:
    """The letters ``words`` draws of ``rng.choice(ID_ALPHABET)`` yield, in order, the
    redrawn ones left out: ``getrandbits`` of several 32-bit words yields them
    first-drawn lowest, and each draw's letter is in its top byte."""
    drawn = rng.getrandbits(32 * words).to_bytes(4 * words, "little")
    return drawn[3::4].translate(_LETTER_OF_TOP_BYTE, _REDRAWN).decode()


def seeded_letters(rng: random.Random, count: int = 26) -> str:
    """The letters ``count`` calls of ``rng.choice(ID_ALPHABET)`` draw, leaving ``rng`` as
    they leave it, without their call layers: each call draws until a draw's top bit is
    clear, so the draws still needed are made at once, until ``count`` letters are."""
    letters = ""
    while missing := count - len(letters):
        letters += _letters_of(rng, missing)
    return letters


class SeededIds:
    """Well-formed public IDs from a seeded generator, so failures reproduce."""

    # Letters are drawn ahead this many draws at a time (the generator draws nothing else).
    _AHEAD = 4096

    def __init__(self, seed: int = 7) -> None:
        self._random = random.Random(seed)
        self._letters = ""
        self._next = 0

    def new(self, kind: IdKind) -> str:
        # The letters of 26 ``random.choice`` calls each, in turn: each ID takes the next
        # 26 of the letters the generator's draws yield (a draw ``choice`` would make
        # again yields none), drawn ahead, since the interleavings make tens of thousands
        # of IDs.
        start, letters = self._next, self._letters
        if start + 26 > len(letters):
            letters = self._letters = letters[start:] + _letters_of(self._random, self._AHEAD)
            start = 0
        self._next = start + 26
        return f"{kind.value}-{letters[start : start + 26]}"


class RecordingWorkflow(Workflow):
    """The workflow port without Step Functions: records the waits it would resume or
    end (by token) and the executions it would start (by run ID)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.resumed: list[tuple[str, Any]] = []
        self.failed: list[tuple[str, str]] = []

    def start(self, run: Run) -> None:
        self.started.append(run.id)

    def resume(self, token: str, output: Any) -> bool:
        self.resumed.append((token, output))
        return True

    def fail(self, token: str, error: str, cause: str) -> bool:
        self.failed.append((token, error))
        return True

    def heartbeat(self, token: str) -> bool:
        return True


class RecordingLauncher:
    """The sandbox launcher port (``adapters.launchers.Launcher``) without a process or
    a task: records the sandboxes it would start and stop (by reference)."""

    def __init__(self) -> None:
        self.launched: list[LaunchRequest] = []
        self.stopped: list[str] = []

    def launch(self, request: LaunchRequest) -> str:
        self.launched.append(request)
        return f"sandbox-{len(self.launched)}"

    def stop(self, reference: str) -> None:
        self.stopped.append(reference)


class InMemoryWorkspaces:
    """A ``WorkspaceDirectory`` in dicts: names are claimed for good, as in the table."""

    def __init__(self) -> None:
        self.organizations: dict[str, Organization] = {}
        self.workspaces: dict[str, Workspace] = {}
        # Deleted workspaces as they were when deleted, with who deleted them and when:
        # kept, as the table keeps their items, but never read back.
        self.deleted: dict[str, tuple[Workspace, str, datetime]] = {}
        self.audit: list[AuditEvent] = []
        # Security records written with a settings change (domain.audit).
        self.security_records: list[AuditRecord] = []
        self._org_names: dict[str, str] = {}
        self._workspace_names: dict[tuple[str, str], str] = {}

    def create_organization(self, org: Organization) -> None:
        if org.name in self._org_names:
            raise AlreadyExists(f"organization name {org.name!r} is already taken")
        if org.id in self.organizations:
            raise ConcurrentChange(f"organization {org.id} changed concurrently")
        self._org_names[org.name] = org.id
        self.organizations[org.id] = org

    def get_organization(self, org_id: str) -> Organization:
        if org_id not in self.organizations:
            raise NotFound("organization", org_id)
        return self.organizations[org_id]

    def find_organization_id(self, name: str) -> str | None:
        return self._org_names.get(name)

    def create_workspace(self, workspace: Workspace) -> None:
        claim = (workspace.organization_id, workspace.name)
        if claim in self._workspace_names:
            raise AlreadyExists(f"workspace name {workspace.name!r} is already taken")
        if workspace.id in self.workspaces:
            raise ConcurrentChange(f"workspace {workspace.id} changed concurrently")
        self._workspace_names[claim] = workspace.id
        # As the table stores it: a new workspace starts at fence 0 with an empty queue.
        self.workspaces[workspace.id] = replace(
            workspace, fence=0, queue_length=0, destination_count=0, dependent_count=0
        )

    def get_workspace(self, workspace_id: str) -> Workspace:
        if workspace_id not in self.workspaces:
            raise NotFound("workspace", workspace_id)
        return self.workspaces[workspace_id]

    def find_workspace_id(self, org_id: str, name: str) -> str | None:
        return self._workspace_names.get((org_id, name))

    def list_workspaces(self, org_id: str) -> list[Workspace]:
        found = [w for w in self.workspaces.values() if w.organization_id == org_id]
        return sorted(found, key=lambda w: w.name)

    def delete_workspace(self, workspace: Workspace, *, deleted_by: str, event: AuditEvent) -> None:
        current = self.workspaces.get(workspace.id)
        if current is None:
            raise NotFound("workspace", workspace.id)
        unchanged = (
            current.fence == workspace.fence
            and current.writer_run_id is None
            and current.lock_id is None
            and current.queue_length == 0
            and current.current_state_version_id == workspace.current_state_version_id
        )
        if not unchanged:
            raise ConcurrentChange(
                f"workspace {workspace.id} changed meanwhile (a run, a lock or a new state "
                "version); nothing was deleted: look at it again"
            )
        if any(held.id == event.id for held in self.audit):
            # As the table's audit item, put only if absent.
            raise ConcurrentChange(f"audit event {event.id} exists")
        del self._workspace_names[(current.organization_id, current.name)]
        del self.workspaces[workspace.id]
        self.deleted[workspace.id] = (current, deleted_by, event.at)
        self.audit.append(event)

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
    ) -> None:
        given = {
            "terraform_version": terraform_version,
            "description": description,
            "tag_names": tag_names,
            "approval_window_seconds": approval_window_seconds,
            "execution_mode": execution_mode,
            "second_approval": second_approval,
        }
        changes = {name: value for name, value in given.items() if value is not None}
        if not changes:
            return  # as the table: nothing to write, so nothing is checked
        current = self.get_workspace(workspace_id)
        if expected_settings_version not in (None, current.settings_version):
            raise ConcurrentChange(f"the settings of workspace {workspace_id} changed")
        self.workspaces[workspace_id] = replace(
            current,
            **changes,  # type: ignore[arg-type]
            settings_version=current.settings_version + 1,
        )
        if audit is not None:
            self.security_records.append(audit)


_NO_PARTS: Mapping[str, RunPart] = MappingProxyType({})


class InMemoryRuns:
    """A ``RunReader`` in dicts, with the writes a test needs to give it runs. A run's
    stages and parts are replaced by a changed copy, never changed in place, so a saved
    state shares them safely."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self._stages: dict[str, dict[Stage, RunStage]] = {}
        self._parts: dict[str, dict[str, RunPart]] = {}

    def add(self, run: Run) -> None:
        """As the table's create: the run with its four stages pending, or refused."""
        if run.id in self.runs:
            raise RunAlreadyExists(run.id)
        self.runs[run.id] = run
        self._stages[run.id] = {
            stage: RunStage(run.id, stage, StageStatus.PENDING, None, None) for stage in Stage
        }
        self._parts[run.id] = {}

    def add_part(self, part: RunPart) -> None:
        """As the table's part write: parts are created once."""
        held = self._parts.get(part.run_id, _NO_PARTS)
        if part.name in held:
            raise ConcurrentChange(f"run {part.run_id} already has its {part.name}")
        self._parts[part.run_id] = {**held, part.name: part}

    def set_part(self, part: RunPart) -> None:
        """A test's given: the part as stated, whatever was held."""
        self._parts[part.run_id] = {**self._parts.get(part.run_id, {}), part.name: part}

    def get_run(self, run_id: str) -> Run:
        if run_id not in self.runs:
            raise NotFound("run", run_id)
        return self.runs[run_id]

    def runs_of_workspace(self, workspace_id: str, limit: int | None = None) -> list[Run]:
        found = [r for r in self.runs.values() if r.workspace_id == workspace_id]
        # The table's order: "<created_at ISO>#<run ID>", read backwards.
        ordered = sorted(found, key=lambda r: (r.created_at.isoformat(), r.id), reverse=True)
        return ordered if limit is None else ordered[:limit]

    def stages(self, run_id: str) -> dict[Stage, RunStage]:
        return dict(self._stages.get(run_id, {}))

    def parts(self, run_id: str) -> dict[str, RunPart]:
        return dict(self._parts.get(run_id, {}))

    def held_parts(self, run_id: str) -> Mapping[str, RunPart]:
        """The run's parts as held, not copied: for a reader that only looks."""
        return self._parts.get(run_id, _NO_PARTS)


class AuditedChange(NamedTuple):
    """An audit event an in-memory repository recorded with its write (a tuple: every
    move records one)."""

    event_id: str
    type: str
    subject_id: str
    actor: str
    details: dict[str, str]


class InMemoryVariables:
    """A ``VariableStore`` in dicts, with the table's tally: the same limits, checked in
    the same order (the variable's version first, then the workspace's count and bytes).
    A workspace's variables are keyed by (category, name)."""

    def __init__(self) -> None:
        self.variables: dict[str, dict[tuple[VariableCategory, str], StoredVariable]] = {}
        self.audit: list[AuditedChange] = []
        self.security_trail: list[AuditRecord] = []
        # As the table's tally item: absent until the workspace's first put, when its
        # limits are not checked (a single value is within them by the domain's check).
        self._tallied: set[str] = set()

    def all_of(self, workspace_id: str) -> list[StoredVariable]:
        held = self.variables.get(workspace_id, {})
        return [
            held[key]
            for key in sorted(held, key=lambda k: (k[0] is not VariableCategory.TERRAFORM, k[1]))
        ]

    def find(
        self,
        workspace_id: str,
        name: str,
        category: VariableCategory = VariableCategory.TERRAFORM,
    ) -> StoredVariable | None:
        return self.variables.get(workspace_id, {}).get((category, name))

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
    ) -> None:
        name, key = variable.name, (variable.category, variable.name)
        held = self.variables.get(workspace_id, {})
        current = held.get(key)
        if (previous is None) != (current is None) or (
            previous is not None and current is not None and current.version != previous.version
        ):
            raise ConcurrentChange(f"variable {name} changed meanwhile; nothing was written")
        added = 1 if previous is None else 0
        grows = size - (0 if previous is None else previous.size)
        tallied = workspace_id in self._tallied
        if tallied and len(held) + added > MAX_VARIABLES:
            raise InvalidInput(f"a workspace has at most {MAX_VARIABLES} variables", "/name")
        if tallied and sum(v.size for v in held.values()) + grows > MAX_VARIABLES_BYTES:
            raise VariablesTooLarge(
                f"the workspace's variable values would add up to more than "
                f"{MAX_VARIABLES_BYTES:,} bytes",
                "/value",
            )
        stored = StoredVariable(
            variable=replace(variable, value=None if variable.sensitive else variable.value),
            size=size,
            version=1 if previous is None else previous.version + 1,
            wrapped_key=wrapped_key,
            sealed=sealed,
        )
        self.variables.setdefault(workspace_id, {})[key] = stored
        self._tallied.add(workspace_id)
        if audit is not None:
            self.security_trail.append(audit)
        self.audit.append(
            AuditedChange(
                event_id,
                "workspace.variable_set",
                workspace_id,
                variable.updated_by,
                variable_details(variable),
            )
        )

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
    ) -> None:
        name, key = previous.variable.name, (previous.variable.category, previous.variable.name)
        held = self.variables.get(workspace_id, {})
        current = held.get(key)
        if current is None or current.version != previous.version:
            raise ConcurrentChange(f"variable {name} changed meanwhile; nothing was written")
        del held[key]
        if audit is not None:
            self.security_trail.append(audit)
        self.audit.append(
            AuditedChange(
                event_id,
                "workspace.variable_deleted",
                workspace_id,
                actor,
                variable_details(previous.variable),
            )
        )


def variable_details(variable: WorkspaceVariable) -> dict[str, str]:
    """What the table's audit event says of a variable (``store.workspace_variables``)."""
    return {
        "name": variable.name,
        "category": variable.category.value,
        "sensitive": str(variable.sensitive).lower(),
    }


class InMemorySchedules:
    """A ``ScheduleStore`` in dicts, with ``add_configuration`` for a test to give a
    workspace an uploaded configuration version."""

    def __init__(self) -> None:
        self.schedules: dict[str, Schedule] = {}
        self.fire_records: dict[tuple[str, datetime], Fire] = {}
        self.configurations: dict[str, str] = {}
        self.drift_records: dict[str, Drift] = {}

    def add_configuration(self, workspace_id: str, configuration_id: str) -> None:
        self.configurations[workspace_id] = configuration_id

    def get(self, schedule_id: str) -> Schedule:
        if schedule_id not in self.schedules:
            raise NotFound("schedule", schedule_id)
        return self.schedules[schedule_id]

    def list_for_workspace(self, workspace_id: str) -> list[Schedule]:
        found = [s for s in self.schedules.values() if s.workspace_id == workspace_id]
        # The index's order: "<created_at ISO>#<schedule ID>", read forwards.
        return sorted(found, key=lambda s: (s.created_at.isoformat(), s.id))

    def create(self, schedule: Schedule) -> None:
        if schedule.id in self.schedules:
            raise ConcurrentChange(f"schedule {schedule.id} changed concurrently")
        # As the table stores a new one: nothing fired yet.
        self.schedules[schedule.id] = replace(
            schedule, active_run_id=None, last_fire_at=None, last_outcome=None
        )

    def set_state(self, schedule_id: str, state: str, now: datetime) -> None:
        current = self.get(schedule_id)
        self.schedules[schedule_id] = replace(current, state=state, updated_at=now)

    def delete(self, schedule_id: str) -> None:
        self.get(schedule_id)
        del self.schedules[schedule_id]

    def record_fire(
        self,
        schedule: Schedule,
        scheduled_at: datetime,
        *,
        outcome: str,
        now: datetime,
        reason: str | None = None,
    ) -> None:
        key = (schedule.id, scheduled_at)
        if key in self.fire_records:
            raise ScheduleAlreadyFired(
                f"schedule {schedule.id} already fired for {scheduled_at.isoformat()}; "
                "nothing was written"
            )
        current = self.schedules.get(schedule.id)
        if (
            current is None
            or current.active_run_id != schedule.active_run_id
            or current.state != schedule.state
        ):
            raise ScheduleMoved(
                f"schedule {schedule.id} changed while it fired; nothing was written"
            )
        self.fire_records[key] = Fire(schedule.id, scheduled_at, outcome, None, reason)
        self.schedules[schedule.id] = replace(
            current, last_fire_at=scheduled_at, last_outcome=outcome
        )

    def fires(self, schedule_id: str, limit: int = 20) -> list[Fire]:
        found = [f for (sid, _), f in self.fire_records.items() if sid == schedule_id]
        return sorted(found, key=lambda f: f.scheduled_at.isoformat(), reverse=True)[:limit]

    def latest_configuration_id(self, workspace_id: str) -> str | None:
        return self.configurations.get(workspace_id)

    def drift(self, workspace_id: str) -> Drift | None:
        return self.drift_records.get(workspace_id)


class RecordingRegistry:
    """A ``ScheduleRegistry`` that holds what is registered: schedule ID to
    (workspace, expression, enabled)."""

    def __init__(self) -> None:
        self.registered: dict[str, tuple[str, str, bool]] = {}

    def put(self, schedule_id: str, workspace_id: str, expression: str, *, enabled: bool) -> None:
        self.registered[schedule_id] = (workspace_id, expression, enabled)

    def delete(self, schedule_id: str) -> None:
        self.registered.pop(schedule_id, None)


class InMemoryRunTriggers:
    """A ``RunTriggerStore`` in dicts: each workspace's trigger list at its version, and
    the links from a source to its dependents."""

    def __init__(self) -> None:
        self.triggers: dict[str, Triggers] = {}
        self.links: set[tuple[str, str]] = set()  # (source, dependent)

    def get(self, workspace_id: str) -> Triggers:
        return self.triggers.get(
            workspace_id, Triggers(workspace_id, (), RunKind.PLAN_AND_APPLY, 0)
        )

    def dependents(self, source_id: str) -> list[str]:
        return sorted(dependent for source, dependent in self.links if source == source_id)

    def add_source(
        self,
        current: Triggers,
        source_id: str,
        *,
        org_id: str,
        run_kind: RunKind,
        now: datetime,
        unchanged: Sequence[Triggers] = (),
    ) -> None:
        for read in (current, *unchanged):
            self._check(read)
        sources = current.sources if source_id in current.sources else (*current.sources, source_id)
        self._write(current, sources, run_kind)
        self.links.add((source_id, current.workspace_id))

    def remove_source(
        self, current: Triggers, source_id: str, *, org_id: str, now: datetime
    ) -> None:
        self._check(current)
        self._write(current, tuple(s for s in current.sources if s != source_id), current.run_kind)
        self.links.discard((source_id, current.workspace_id))

    def _check(self, read: Triggers) -> None:
        if self.get(read.workspace_id).version != read.version:
            raise ConcurrentChange(
                f"the run triggers of workspace {read.workspace_id} changed meanwhile; "
                "nothing was written, retry"
            )

    def _write(self, current: Triggers, sources: tuple[str, ...], run_kind: RunKind) -> None:
        self.triggers[current.workspace_id] = Triggers(
            current.workspace_id, sources, run_kind, current.version + 1
        )


class InMemoryNotifications:
    """A ``NotificationStore`` in dicts: destinations per workspace, and deliveries per
    (destination, event ID), each attempt claimed on the attempts read."""

    def __init__(self) -> None:
        self.destinations_by_key: dict[tuple[str, str], Destination] = {}
        self.deliveries_by_key: dict[tuple[str, str], Delivery] = {}

    def destinations(self, workspace_id: str) -> list[Destination]:
        found = [d for (ws, _), d in self.destinations_by_key.items() if ws == workspace_id]
        # The table's order: by key (the destination ID), then sorted by creation.
        return sorted(sorted(found, key=lambda d: d.id), key=lambda d: d.created_at)

    def get_destination(self, workspace_id: str, destination_id: str) -> Destination:
        found = self.destinations_by_key.get((workspace_id, destination_id))
        if found is None:
            raise NotFound("notification destination", destination_id)
        return found

    def put_destination(self, destination: Destination) -> None:
        key = (destination.workspace_id, destination.id)
        if key in self.destinations_by_key:
            raise ConcurrentChange(f"destination {destination.id} changed concurrently")
        self.destinations_by_key[key] = destination

    def delete_destination(self, workspace_id: str, destination_id: str) -> None:
        self.get_destination(workspace_id, destination_id)
        del self.destinations_by_key[(workspace_id, destination_id)]

    def new_delivery(
        self,
        delivery_id: str,
        destination: Destination,
        event: Mapping[str, Any],
        now: datetime,
    ) -> None:
        key = (destination.id, str(event["id"]))
        if key in self.deliveries_by_key:
            raise ConcurrentChange(f"a delivery of event {key[1]} changed concurrently")
        self.deliveries_by_key[key] = Delivery(
            id=delivery_id,
            destination_id=destination.id,
            workspace_id=destination.workspace_id,
            organization_id=destination.organization_id,
            event_id=str(event["id"]),
            event_type=str(event["type"]),
            run_id=None if event.get("run_id") is None else str(event["run_id"]),
            event=dict(event),
            state="pending",
            attempts=0,
            history=[],
            created_at=now,
            updated_at=now,
        )

    def get_delivery(self, destination_id: str, event_id: str) -> Delivery | None:
        return self.deliveries_by_key.get((destination_id, event_id))

    def deliveries(self, destination_id: str) -> list[Delivery]:
        found = [d for (dest, _), d in self.deliveries_by_key.items() if dest == destination_id]
        # The table's order: by key (the event ID), then sorted newest first (stable).
        by_key = sorted(found, key=lambda d: d.event_id)
        return sorted(by_key, key=lambda d: d.created_at, reverse=True)

    def claim_attempt(self, delivery: Delivery, now: datetime, lease_until: datetime) -> None:
        current = self._current(delivery)
        if current.state not in {"pending", "retrying"}:
            raise self._moved_on(delivery)
        self._put(
            replace(
                current,
                attempts=delivery.attempts + 1,
                state="delivering",
                lease_until=lease_until,
                updated_at=now,
            )
        )

    def reclaim_attempt(
        self,
        delivery: Delivery,
        lost: Mapping[str, Any],
        now: datetime,
        lease_until: datetime,
        *,
        give_up: bool,
    ) -> None:
        current = self._current(delivery)
        # As the table's condition: an absent lease is not before ``now``.
        if current.state != "delivering" or not (
            current.lease_until is not None and current.lease_until < now
        ):
            raise self._moved_on(delivery)
        history = [*delivery.history, dict(lost)]
        if give_up:
            moved = replace(
                current, history=history, updated_at=now, state="failed", lease_until=None
            )
        else:
            moved = replace(
                current,
                history=history,
                updated_at=now,
                attempts=delivery.attempts + 1,
                lease_until=lease_until,
            )
        self._put(moved)

    def record_attempt(
        self, delivery: Delivery, attempt: Mapping[str, Any], state: str, now: datetime
    ) -> None:
        current = self._current(delivery)
        if current.state != "delivering":
            raise ConcurrentChange(f"delivery {delivery.id} changed concurrently")
        self._put(
            replace(
                current,
                history=[*delivery.history, dict(attempt)],
                state=state,
                lease_until=None,
                updated_at=now,
            )
        )

    def _current(self, delivery: Delivery) -> Delivery:
        current = self.get_delivery(delivery.destination_id, delivery.event_id)
        if current is None or current.attempts != delivery.attempts:
            raise self._moved_on(delivery)
        return current

    def _put(self, delivery: Delivery) -> None:
        self.deliveries_by_key[(delivery.destination_id, delivery.event_id)] = delivery

    @staticmethod
    def _moved_on(delivery: Delivery) -> ConcurrentChange:
        return ConcurrentChange(f"delivery {delivery.id} moved on; this attempt is not ours")


class InMemoryPolicySets:
    """A ``PolicySetStore`` in dicts: heads by (organization, name), versions by
    (organization, name, digest) holding their artifact and number, and each
    organization's tally (none for an organization older than tallies: set one to 0 for
    a new organization, as its creation does)."""

    def __init__(self) -> None:
        self.heads: dict[tuple[str, str], PolicySetHead] = {}
        self.versions: dict[tuple[str, str, str], tuple[str, int]] = {}
        self.tallies: dict[str, int] = {}

    def counted_none(self, org_id: str) -> bool:
        # As if every request had read the tally ahead: an absent one is not none.
        return self.tallies.get(org_id) == 0

    def get(self, org_id: str, name: str) -> PolicySetHead:
        if (org_id, name) not in self.heads:
            raise NotFound("policy set", name)
        return self.heads[(org_id, name)]

    def find(self, org_id: str, name: str) -> PolicySetHead | None:
        return self.heads.get((org_id, name))

    def all_of(self, org_id: str) -> list[PolicySetHead]:
        return sorted((h for (o, _), h in self.heads.items() if o == org_id), key=lambda h: h.name)

    def version_artifact_id(self, org_id: str, name: str, digest: str) -> str | None:
        found = self.versions.get((org_id, name, digest))
        return None if found is None else found[0]

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
    ) -> None:
        current = self.heads.get((org_id, name))
        moved = (
            current is not None
            if previous is None
            else (current is None or current.version != previous.version)
        )
        if moved or (not version_exists and (org_id, name, digest) in self.versions):
            raise ConcurrentChange(f"policy set {name} was published meanwhile; publish again")
        count = previous.versions if previous else 0
        number = count if version_exists else count + 1
        if not version_exists:
            self.versions[(org_id, name, digest)] = (artifact_id, number)
        if previous is None:
            counted = self.tallies.get(org_id)
            if counted is None:
                counted = sum(1 for o, _ in self.heads if o == org_id)
            self.tallies[org_id] = counted + 1
        self.heads[(org_id, name)] = PolicySetHead(
            org_id=org_id,
            name=name,
            current_digest=digest,
            current_artifact_id=artifact_id,
            policies=list(policies),
            versions=number,
            attached_workspaces=previous.attached_workspaces if previous else (),
            all_workspaces=previous.all_workspaces if previous else False,
            updated_at=now,
            updated_by=by,
            version=(previous.version + 1) if previous else 1,
        )

    def attach(
        self,
        head: PolicySetHead,
        workspaces: list[str],
        all_workspaces: bool,
        *,
        by: str,
        now: datetime,
    ) -> None:
        current = self.heads.get((head.org_id, head.name))
        if current is None or current.version != head.version:
            raise ConcurrentChange(f"policy set {head.name} changed meanwhile; attach again")
        self.heads[(head.org_id, head.name)] = replace(
            current,
            attached_workspaces=tuple(workspaces),
            all_workspaces=all_workspaces,
            updated_at=now,
            updated_by=by,
            version=head.version + 1,
        )


class InMemoryArtifacts:
    """Artifacts as plaintext in a dict (what ``PolicyArtifacts`` needs): readable only
    by their own organization, as the store's reads are."""

    def __init__(self, ids: SeededIds, clock: FakeClock) -> None:
        self._ids = ids
        self._clock = clock
        self.bodies: dict[str, tuple[str, bytes]] = {}

    def put(self, organization_id: str, kind: ArtifactKind, plaintext: Iterable[bytes]) -> Artifact:
        body = b"".join(plaintext)
        artifact_id = self._ids.new(IdKind.ARTIFACT)
        self.bodies[artifact_id] = (organization_id, body)
        return Artifact(
            id=artifact_id,
            organization_id=organization_id,
            kind=kind,
            status=ArtifactStatus.REGISTERED,
            size=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
            created_at=self._clock.now(),
        )

    def read(self, organization_id: str, artifact_id: str) -> bytes:
        held = self.bodies.get(artifact_id)
        if held is None or held[0] != organization_id:
            raise NotFound("artifact", artifact_id)
        return held[1]

    def discard(self, artifact_id: str) -> None:
        self.bodies.pop(artifact_id, None)


class LexicalEvaluator:
    """An ``Evaluator`` that validates by the engine-independent lexical check alone
    (forbidden builtins) and evaluates nothing: for tests of publishing and attaching,
    where no policy runs."""

    runtime_identity = "lexical"

    def validate(self, content: PolicySetContent) -> None:
        refuse_forbidden_builtins(content)

    def evaluate(
        self, sets: Sequence[PolicySetContent], policy_input: Mapping[str, Any] | PolicyInputs
    ) -> list[PolicyResult]:
        raise AssertionError("policies are evaluated by the Rego engine, not in this tier")


class InMemoryStateVersions:
    """A ``StateVersionReader`` in dicts, with ``add`` and ``add_run`` for a test to give
    it versions (written once, as the table's) and runs with their pins."""

    def __init__(self) -> None:
        self.versions: dict[str, StateVersion] = {}
        self.pins: dict[str, str | None] = {}

    def add(self, version: StateVersion) -> None:
        if version.id in self.versions:
            raise ConcurrentChange(f"state version {version.id} already exists")
        self.versions[version.id] = version

    def add_run(self, run_id: str, pinned: str | None = None) -> None:
        self.pins[run_id] = pinned

    def get(self, sv_id: str) -> StateVersion:
        if sv_id not in self.versions:
            raise NotFound("state version", sv_id)
        return self.versions[sv_id]

    def list_for_workspace(self, workspace_id: str) -> list[StateVersion]:
        found = [
            v
            for v in self.versions.values()
            if v.workspace_id == workspace_id and v.status == FINALIZED
        ]
        return sorted(found, key=lambda v: (v.serial, v.created_at))

    def pinned(self, principal: Principal) -> str | None:
        run_id = principal.run_id or ""
        if run_id not in self.pins:
            raise NotFound("run", run_id)
        return self.pins[run_id]


# A stage's status a move may find it in: to start it, to end it.
_MAY_START = frozenset({StageStatus.PENDING})
_MAY_END = frozenset({StageStatus.PENDING, StageStatus.RUNNING})
# The run attributes a move may set besides its status (as ``store.runs``).
_MOVE_SETTABLE = frozenset({"plan_has_changes", "predecessor_sv_id", "approval_expires_at"})


class InMemoryRunLedger(InMemoryRuns):
    """A ``RunReader`` and ``RunLedger`` in dicts: moves follow the transition table,
    are conditioned on the snapshot's status and version, and record their audit events
    (``audit``) and the run events they announce (``announced``); a refused one changes
    nothing and announces nothing."""

    def __init__(self, clock: Clock, ids: IdGenerator) -> None:
        super().__init__()
        self._clock = clock
        self._ids = ids
        self.audit: list[AuditedChange] = []
        self.announced: list[RunEvent] = []

    def create(self, run: Run, *, actor: str, input: Mapping[str, Any]) -> None:
        # As the table stores a new run: created by the actor, nothing a move sets.
        stored = changed(
            run,
            created_by=actor,
            plan_has_changes=None,
            status_reason=None,
            predecessor_sv_id=None,
            approval_expires_at=None,
        )
        self.add(stored)
        at = run.created_at
        self.set_part(RunPart(run.id, "input", "recorded", dict(input), None, at, at))
        details = {"kind": run.kind.value, "status": run.status.value}
        self._audit(run.id, "run.created", actor, details)

    def move(
        self,
        run: Run,
        target: RunStatus,
        *,
        actor: str,
        reason: str | None = None,
        run_updates: Mapping[str, Any] | None = None,
        also_announce: Callable[[Transitioned], Iterable[RunEvent]] | None = None,
    ) -> Transitioned:
        row = transitions.check(run.status, target, run.facts)
        updates = dict(run_updates or {})
        unknown = set(updates) - _MOVE_SETTABLE
        if unknown:
            raise ValueError(f"a transition cannot set {sorted(unknown)}")
        now = self._clock.now()
        current = self.runs.get(run.id)
        if current is None or (current.status, current.version) != (run.status, run.version):
            held = (
                None if current is None else {"status": current.status, "version": current.version}
            )
            raise TransitionRejected(run.id, f"{run.status} at version {run.version}", held)
        stages = self._stages[run.id]
        for stage, status in row.stages.items():
            allowed = _MAY_START if status is StageStatus.RUNNING else _MAY_END
            if stages[stage].status not in allowed:
                raise ConcurrentChange(
                    f"run {run.id}: stage {stage} is {stages[stage].status}, cannot become {status}"
                )
        version = run.version + 1
        moved = Transitioned(run.id, run.status, target, version, row.event, now)
        events = [
            move_event(
                run,
                target,
                version,
                now,
                reason=reason,
                approval_expires_at=updates.get("approval_expires_at"),
            ),
            *(also_announce(moved) if also_announce else ()),
        ]
        # Every condition held: the move and its events commit together.
        self.runs[run.id] = changed(
            current,
            status=target,
            version=version,
            updated_at=now,
            status_reason=reason or None,
            **updates,
        )
        if row.stages:
            stages = self._stages[run.id] = dict(stages)
        for stage, status in row.stages.items():
            started = now if status is StageStatus.RUNNING else stages[stage].started_at
            finished = stages[stage].finished_at if status is StageStatus.RUNNING else now
            stages[stage] = changed(
                stages[stage], status=status, started_at=started, finished_at=finished
            )
        details = {"from": run.status.value, "to": target.value}
        if reason:
            details["reason"] = reason
        self._audit(run.id, row.event, actor, details)
        self.announced += [event for event in events if event is not None]
        return moved

    def _audit(self, run_id: str, type: str, actor: str, details: dict[str, str]) -> None:
        event_id = self._ids.new(IdKind.AUDIT_EVENT)
        self.audit.append(AuditedChange(event_id, type, run_id, actor, details))

    def set_part(self, part: RunPart) -> None:
        """Write ``part`` as it is (a unit of work's intent whose condition held)."""
        self._parts[part.run_id] = {**self._parts.get(part.run_id, _NO_PARTS), part.name: part}

    def saved(self) -> LedgerState:
        """Everything the ledger holds, to put back with ``restore`` (entities are
        frozen, and a run's stages and parts replaced, never changed: copying the outer
        containers is enough)."""
        return LedgerState(
            dict(self.runs),
            dict(self._stages),
            dict(self._parts),
            list(self.audit),
            list(self.announced),
        )

    def restore(self, state: LedgerState) -> None:
        self.runs = dict(state.runs)
        self._stages = dict(state.stages)
        self._parts = dict(state.parts)
        self.audit = list(state.audit)
        self.announced = list(state.announced)


class LedgerState(NamedTuple):
    """What an ``InMemoryRunLedger`` held at one moment (a tuple: every step of the
    interleavings saves one)."""

    runs: dict[str, Run]
    stages: dict[str, dict[Stage, RunStage]]
    parts: dict[str, dict[str, RunPart]]
    audit: list[AuditedChange]
    announced: list[RunEvent]


class InMemoryArtifactRecords:
    """An ``ArtifactRecords`` in a dict by artifact ID: the records only (the ciphertext
    is the object store's). Registering an ID already recorded changes nothing."""

    def __init__(self) -> None:
        self.records: dict[str, ArtifactRecord] = {}

    def get(self, artifact_id: str) -> ArtifactRecord:
        if artifact_id not in self.records:
            raise NotFound("artifact", artifact_id)
        return self.records[artifact_id]

    def exists(self, artifact_id: str) -> bool:
        return artifact_id in self.records

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
    ) -> None:
        if artifact.id in self.records:
            raise ConcurrentChange(f"artifact {artifact.id} is already registered")
        self.records[artifact.id] = ArtifactRecord(
            artifact, object_key, wrapped_key, chunk_size, etag, session_id
        )

    def register_with(
        self,
        artifact: Artifact,
        *,
        object_key: str,
        wrapped_key: bytes,
        chunk_size: int,
        etag: str,
        together: object,
    ) -> None:
        """``together`` is a callable that makes its write, or raises its refusal having
        changed nothing."""
        if not callable(together):
            raise TypeError(f"an artifact is registered with a write, not {together!r}")
        if artifact.id in self.records:
            raise ConcurrentChange(f"artifact {artifact.id} is already registered")
        together()
        self.records[artifact.id] = ArtifactRecord(
            artifact, object_key, wrapped_key, chunk_size, etag, None
        )

    def register_all(self, records: Sequence[ArtifactRecord], registered_at: datetime) -> None:
        taken = [r.artifact.id for r in records if r.artifact.id in self.records]
        if taken or len({r.artifact.id for r in records}) < len(records):
            raise ConcurrentChange(f"artifact {(taken or ['?'])[0]} is already registered")
        self.records.update((r.artifact.id, r) for r in records)

    def discard(self, artifact_id: str) -> None:
        self.records.pop(artifact_id, None)


class InMemoryObjects(ObjectStore):
    """The ``ObjectStore`` adapter over a dict of bodies (a test fake of S3, not of our
    code). Every write gets a new ETag, as a replaced S3 object does; presigned URLs are
    ``memory://`` addresses that ``put_url`` and ``get_url`` move bytes through."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.etags: dict[str, str] = {}
        self._writes = 0

    def put_object(self, key: str, body: bytes) -> StoredObject:
        self._writes += 1
        self.bodies[key] = body
        self.etags[key] = f'"{self._writes}-{hashlib.sha256(body).hexdigest()[:32]}"'
        return StoredObject(key, self.etags[key], len(body))

    def upload_stream(self, key: str, pieces: Iterable[bytes]) -> StoredObject:
        # An exception from ``pieces`` leaves no object, as an aborted multipart upload.
        return self.put_object(key, b"".join(pieces))

    @contextmanager
    def open(self, key: str, etag: str | None = None) -> Iterator[Read]:
        if key not in self.bodies:
            raise ObjectMissing(key)
        if etag is not None and self.etags[key] != etag:
            raise ObjectChanged(key)
        yield io.BytesIO(self.bodies[key]).read

    def head(self, key: str) -> StoredObject:
        if key not in self.bodies:
            raise ObjectMissing(key)
        return StoredObject(key, self.etags[key], len(self.bodies[key]))

    def delete(self, key: str) -> None:
        self.bodies.pop(key, None)
        self.etags.pop(key, None)

    def presign(self, method: str, key: str, seconds: int) -> str:
        return f"memory://{method}/{key}?expires={seconds}"

    def put_url(self, url: str, body: bytes) -> None:
        self.put_object(self._key(url, "PUT"), body)

    def get_url(self, url: str) -> bytes:
        key = self._key(url, "GET")
        if key not in self.bodies:
            raise ObjectMissing(key)
        return self.bodies[key]

    @staticmethod
    def _key(url: str, method: str) -> str:
        prefix = f"memory://{method}/"
        if not url.startswith(prefix):
            raise AssertionError(f"not a {method} URL: {url}")
        return url[len(prefix) :].split("?", 1)[0]


class LocalDataKeys(DataKeys):
    """The ``DataKeys`` adapter with a fixed local wrapping key in place of KMS (a test
    fake of KMS, not of our code): a data key unwraps only under the encryption context
    it was generated for, else ``KeyUnavailable``, as KMS refuses."""

    def __init__(self, wrapping_key: bytes = bytes(range(32))) -> None:
        self._aead = AESGCM(wrapping_key)

    @staticmethod
    def _aad(context: Mapping[str, str]) -> bytes:
        return json.dumps(sorted(context.items())).encode()

    def generate(self, context: Mapping[str, str]) -> DataKey:
        plaintext, nonce = os.urandom(32), os.urandom(12)
        return DataKey(plaintext, nonce + self._aead.encrypt(nonce, plaintext, self._aad(context)))

    def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        try:
            return self._aead.decrypt(wrapped[:12], wrapped[12:], self._aad(context))
        except (InvalidTag, ValueError):
            raise KeyUnavailable("InvalidCiphertextException") from None


def no_read_ahead(
    run_id: str,
    names: Iterable[str],
    *,
    workspace_id: str | None = None,
    control_scopes: Sequence[str] = (),
    artifact_ids: Sequence[str] = (),
    policy_tally_of: str | None = None,
) -> AbstractContextManager[None]:
    """A ``ReadsAhead`` with nothing to read ahead: each read goes to the fakes when asked."""
    return nullcontext()
