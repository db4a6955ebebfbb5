"""The repository seams: what a service needs of the store, per area.

Services that take one of these can run against the DynamoDB store (``store/``) or
an in-memory fake (``tests/fakes.py``) that keeps the same promises: every write is
conditional, a refused write changes nothing and raises the same typed error. A
contract test runs the same cases against both (tests/integration/test_repository_contract.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from runplane.domain.entities import Organization, Run, RunStage, Workspace
from runplane.domain.run import RunStatus, Stage
from runplane.domain.run_events import RunEvent
from runplane.domain.variables import WorkspaceVariable

if TYPE_CHECKING:
    from runplane.store.run_parts import RunPart
    from runplane.store.runs import Transitioned
    from runplane.store.schedules import Fire, Schedule
    from runplane.store.workspace_variables import StoredVariable


class WorkspaceDirectory(Protocol):
    """Organizations and workspaces by ID and by unique name, and workspace settings.

    - ``create_*`` claims the name and writes the record at once; a taken name raises
      ``AlreadyExists`` and writes nothing.
    - ``get_*`` raises ``NotFound``; ``find_*_id`` returns None for an unknown name.
    - ``list_workspaces`` is in name order.
    - ``update_settings`` sets only the settings given; an unknown workspace raises
      ``NotFound`` and writes nothing.
    """

    def create_organization(self, org: Organization) -> None: ...

    def get_organization(self, org_id: str) -> Organization: ...

    def find_organization_id(self, name: str) -> str | None: ...

    def create_workspace(self, workspace: Workspace) -> None: ...

    def get_workspace(self, workspace_id: str) -> Workspace: ...

    def find_workspace_id(self, org_id: str, name: str) -> str | None: ...

    def list_workspaces(self, org_id: str) -> list[Workspace]: ...

    def update_settings(
        self,
        workspace_id: str,
        *,
        terraform_version: str | None = None,
        description: str | None = None,
        tag_names: tuple[str, ...] | None = None,
        approval_window_seconds: int | None = None,
        execution_mode: str | None = None,
    ) -> None: ...


class RunReader(Protocol):
    """What the Runs service reads to show a run: the run, its stages and its parts.

    Reads only: a run's creation and plain moves are the ``RunLedger``'s.

    - ``get_run`` raises ``NotFound`` for an unknown run.
    - ``runs_of_workspace`` is newest first (creation time, then ID, both descending);
      another workspace's runs are never in it.
    - ``stages`` holds the stages recorded for the run (all four from its creation).
    - ``parts`` holds the run's parts by name; empty for an unknown run.
    """

    def get_run(self, run_id: str) -> Run: ...

    def runs_of_workspace(self, workspace_id: str) -> list[Run]: ...

    def stages(self, run_id: str) -> dict[Stage, RunStage]: ...

    def parts(self, run_id: str) -> dict[str, RunPart]: ...


class VariableStore(Protocol):
    """A workspace's variables, each with its version, and the writes that keep the
    workspace within its limits.

    - ``all_of`` is in name order; ``find`` returns None for an unknown name.
    - ``put`` creates (``previous`` None) or replaces exactly the ``previous`` version
      read, and records the audit event ``event_id``. A name already taken (on create)
      or a version changed meanwhile raises ``ConcurrentChange``; a 101st variable
      raises ``InvalidInput``, values adding up past the byte limit
      ``VariablesTooLarge``. A refused put writes nothing.
    - ``delete`` removes exactly the ``previous`` version (``ConcurrentChange`` if it
      changed or went meanwhile, writing nothing) and records the audit event.
    """

    def all_of(self, workspace_id: str) -> list[StoredVariable]: ...

    def find(self, workspace_id: str, name: str) -> StoredVariable | None: ...

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
