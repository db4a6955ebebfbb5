"""Workspace schedules: people manage them; a scheduler fires them.

A fire creates a plan-only run against the workspace's latest configuration
version, in one transaction with the fire record (keyed by schedule and
scheduled time: a duplicate delivery writes nothing) and the schedule's active
run (moved only from the value it was read with: at most one scheduled run per
schedule is active). A fire while the previous scheduled run is still active is
skipped, and the skip is recorded.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from runplane.domain import schedules as rules
from runplane.domain.clock import Clock
from runplane.domain.creation import ScheduleFire
from runplane.domain.errors import (
    InvalidInput,
    LaunchDenied,
    NoDrift,
    NotFound,
    ScheduleAlreadyFired,
    ScheduleMoved,
    TooManySchedules,
)
from runplane.domain.identity import SCHEDULE_PERMISSIONS, Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.run import RunKind
from runplane.domain.schedules import Fire, Schedule
from runplane.services import drift
from runplane.services.runs import Runs
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.domain.entities import Run, Workspace
    from runplane.services.repositories import RunReader, ScheduleStore

logger = logging.getLogger("runplane.schedules")
_FIRE_ATTEMPTS = 3


class ScheduleRegistry(Protocol):
    """Where schedules are registered to fire (EventBridge Scheduler)."""

    def put(
        self, schedule_id: str, workspace_id: str, expression: str, *, enabled: bool
    ) -> None: ...

    def delete(self, schedule_id: str) -> None: ...


class Schedules:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        runs: Runs,
        reader: RunReader,
        registry: ScheduleRegistry,
        schedules: ScheduleStore,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._runs = runs
        # The schedule's previous run, to skip a fire while it is active.
        self._reader = reader
        self._registry = registry
        self._store = schedules

    # -- management ------------------------------------------------------------------------

    def create(
        self, principal: Principal, workspace_id: str, expression: str, kind: str
    ) -> Schedule:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        principal.require(Permission.RUN_CREATE, workspace.id)
        parsed = rules.parse(expression)
        try:
            schedule_kind = rules.ScheduleKind(kind)
        except ValueError:
            raise InvalidInput(
                f"kind must be one of {', '.join(k.value for k in rules.ScheduleKind)}", "/kind"
            ) from None
        if len(self._store.list_for_workspace(workspace.id)) >= rules.MAX_SCHEDULES_PER_WORKSPACE:
            raise TooManySchedules(
                f"workspace {workspace.id} has {rules.MAX_SCHEDULES_PER_WORKSPACE} schedules, "
                "the most it may have: delete one first"
            )
        now = self._clock.now()
        schedule = Schedule(
            id=self._ids.new(IdKind.SCHEDULE),
            organization_id=workspace.organization_id,
            workspace_id=workspace.id,
            expression=parsed.text,
            aws_expression=parsed.aws,
            kind=schedule_kind.value,
            state=rules.ScheduleState.ACTIVE.value,
            created_at=now,
            created_by=principal.ref,
            updated_at=now,
            active_run_id=None,
            last_fire_at=None,
            last_outcome=None,
        )
        self._store.create(schedule)
        try:
            self._registry.put(schedule.id, workspace.id, schedule.aws_expression, enabled=True)
        except BaseException:
            # Never registered: the record would describe a schedule that never fires.
            self._store.delete(schedule.id)
            raise
        return schedule

    def get(self, principal: Principal, schedule_id: str) -> Schedule:
        try:
            schedule = self._store.get(schedule_id)
        except NotFound:
            raise NotFound("schedule", schedule_id) from None
        if not principal.can_see_workspace(schedule.organization_id, schedule.workspace_id):
            raise NotFound("schedule", schedule_id)
        principal.require(Permission.WORKSPACE_READ, schedule.workspace_id)
        return schedule

    def of_workspace(self, principal: Principal, workspace_id: str) -> list[Schedule]:
        workspace = self._workspaces.by_id(principal, workspace_id)
        return self._store.list_for_workspace(workspace.id)

    def fires(self, principal: Principal, schedule_id: str) -> list[Fire]:
        return self._store.fires(self.get(principal, schedule_id).id)

    def set_paused(self, principal: Principal, schedule_id: str, paused: bool) -> Schedule:
        schedule = self.get(principal, schedule_id)
        principal.require(Permission.WORKSPACE_UPDATE, schedule.workspace_id)
        state = rules.ScheduleState.PAUSED if paused else rules.ScheduleState.ACTIVE
        self._registry.put(
            schedule.id, schedule.workspace_id, schedule.aws_expression, enabled=not paused
        )
        self._store.set_state(schedule.id, state.value, self._clock.now())
        return self._store.get(schedule.id)

    def delete(self, principal: Principal, schedule_id: str) -> None:
        schedule = self.get(principal, schedule_id)
        principal.require(Permission.WORKSPACE_UPDATE, schedule.workspace_id)
        # Unregistered first: once the record is gone, nothing fires it again.
        self._registry.delete(schedule.id)
        self._store.delete(schedule.id)

    def forget_workspace(self, workspace: Workspace, actor: str) -> None:
        """Unregister and delete a deleted workspace's schedules (its deletion, which
        checked who may, has committed: no permission is checked here)."""
        for schedule in self._store.list_for_workspace(workspace.id):
            self._registry.delete(schedule.id)
            try:
                self._store.delete(schedule.id)
            except NotFound:
                continue

    def drift_of(self, workspace_id: str) -> dict[str, Any] | None:
        """The drift of a workspace the caller has already read."""
        return drift.view(self._store.drift(workspace_id))

    def remediate(self, principal: Principal, workspace_id: str, remedy: str) -> Run:
        """A run that resolves the workspace's drift, as ``remedy`` says: ``reconcile``
        plans and applies the configuration, ``accept`` applies a refresh-only plan.
        Either is an ordinary run of the latest configuration, with approval; refused
        (``NoDrift``, nothing written) unless the last check found drift."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.RUN_CREATE, workspace.id)
        try:
            chosen = rules.Remedy(remedy)
        except ValueError:
            choices = ", ".join(r.value for r in rules.Remedy)
            raise InvalidInput(f"remedy must be one of {choices}", "/remedy") from None
        found = self._store.drift(workspace.id)
        if found is None or found.state != "drifted":
            raise NoDrift(
                f"workspace {workspace.id} has no drift to remediate: its last check "
                + ("found none" if found is not None else "has not run (add a schedule)")
            )
        configuration = self._store.latest_configuration_id(workspace.id)
        if configuration is None:
            raise NoDrift(f"workspace {workspace.id} has no uploaded configuration to plan")
        return self._runs.create(
            principal,
            workspace.id,
            kind=RunKind.PLAN_AND_APPLY,
            configuration_version_id=configuration,
            engine_version=None,
            variables={},
            message=f"drift remediation ({chosen.value}) of the drift {found.run_id} found",
            extra_input={"remediation": {"remedy": chosen.value, "drift_run_id": found.run_id}},
            options=chosen.options,
        )

    # -- firing ------------------------------------------------------------------------------

    def fire(self, schedule_id: str, scheduled_at: datetime) -> dict[str, Any]:
        """One delivery of one fire: the scheduler's only entry point."""
        scheduled_at = scheduled_at.astimezone(UTC).replace(microsecond=0)
        for _ in range(_FIRE_ATTEMPTS):
            try:
                schedule = self._store.get(schedule_id)
            except NotFound:
                return {"outcome": "gone"}
            if schedule.state != rules.ScheduleState.ACTIVE:
                return {"outcome": "paused"}
            try:
                return self._fire(schedule, scheduled_at)
            except NotFound as missing:
                if missing.kind != "workspace":
                    raise
                # Its workspace was deleted; its schedules are removed right after.
                return {"outcome": "gone"}
            except ScheduleAlreadyFired:
                return {"outcome": "duplicate"}
            except ScheduleMoved:
                # Another fire started a run meanwhile: look again (this one may skip).
                continue
        return {"outcome": "contended"}

    def _fire(self, schedule: Schedule, scheduled_at: datetime) -> dict[str, Any]:
        now = self._clock.now()
        active = self._still_active(schedule.active_run_id)
        if active is not None:
            reason = f"the previous scheduled run {schedule.active_run_id} is still {active}"
            return self._skip(schedule, scheduled_at, reason, now)
        configuration = self._store.latest_configuration_id(schedule.workspace_id)
        if configuration is None:
            return self._skip(
                schedule, scheduled_at, "the workspace has no uploaded configuration", now
            )
        principal = Principal(
            kind=PrincipalKind.SCHEDULE,
            id=schedule.id,
            organization_id=schedule.organization_id,
            permissions=SCHEDULE_PERMISSIONS,
            display=f"schedule {schedule.id}",
            workspace_id=schedule.workspace_id,
        )
        run_id = self._ids.new(IdKind.RUN)
        try:
            run = self._runs.create(
                principal,
                schedule.workspace_id,
                kind=RunKind(schedule.kind),
                configuration_version_id=configuration,
                engine_version=None,
                variables={},
                message=f"scheduled ({schedule.expression})",
                extra_input={
                    "schedule": {
                        "schedule_id": schedule.id,
                        "scheduled_at": scheduled_at.isoformat(),
                    }
                },
                records=[ScheduleFire(schedule, scheduled_at, recorded_at=now)],
                run_id=run_id,
            )
        except LaunchDenied as denied:
            return self._skip(schedule, scheduled_at, f"launch denied: {denied.reason}", now)
        logger.info(
            "schedule fired",
            extra={"schedule_id": schedule.id, "run_id": run.id, "workspace_id": run.workspace_id},
        )
        return {"outcome": "created", "run_id": run.id}

    def _skip(
        self, schedule: Schedule, scheduled_at: datetime, reason: str, now: datetime
    ) -> dict[str, Any]:
        self._store.record_fire(schedule, scheduled_at, outcome="skipped", reason=reason, now=now)
        logger.info("schedule fire skipped", extra={"schedule_id": schedule.id, "reason": reason})
        return {"outcome": "skipped", "reason": reason}

    def _still_active(self, run_id: str | None) -> str | None:
        """The status of the schedule's previous run if it has not ended."""
        if run_id is None:
            return None
        try:
            run = self._reader.get_run(run_id)
        except NotFound:
            return None
        return None if run.status.is_terminal else run.status.value


def view(schedule: Schedule, now: datetime) -> dict[str, Any]:
    parsed = rules.parse(schedule.expression)
    next_fire = (
        None
        if schedule.state != rules.ScheduleState.ACTIVE
        else parsed.next_after(now, anchor=schedule.created_at).isoformat()
    )
    return {
        "id": schedule.id,
        "workspace_id": schedule.workspace_id,
        "expression": schedule.expression,
        "aws_expression": schedule.aws_expression,
        "kind": schedule.kind,
        "state": schedule.state,
        "created_at": schedule.created_at.isoformat(),
        "created_by": schedule.created_by,
        "next_fire_at": next_fire,
        "active_run_id": schedule.active_run_id,
        "last_fire_at": schedule.last_fire_at.isoformat() if schedule.last_fire_at else None,
        "last_outcome": schedule.last_outcome,
    }
