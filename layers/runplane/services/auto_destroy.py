"""Ephemeral workspaces: people set, postpone and clear a workspace's auto-destroy; a
sweep every few minutes carries it out (docs/auto-destroy.md).

The sweep takes at most one step per armed workspace (``domain.auto_destroy.next_step``)
and writes it conditioned on the version it read, so two sweeps never both act: the
notice 24 h and 1 h before (an outbox event written with the record of it, so it is
sent exactly when it is recorded), the destroy run once due (created in ONE
transaction with the record that names it), the approval of a workspace that opted into
auto-apply, and the run's outcome: destroyed, or failed, notified and tried again later.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from runplane.domain import auto_destroy as rules
from runplane.domain.auto_destroy import AutoDestroy, AutoDestroySettings
from runplane.domain.clock import Clock
from runplane.domain.creation import AutoDestroyLaunch
from runplane.domain.entities import AuditEvent, Workspace
from runplane.domain.errors import (
    AutoDestroyUnderway,
    ConcurrentChange,
    InvalidInput,
    LaunchDenied,
    NotFound,
    RunplaneError,
)
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType, RunEvent
from runplane.domain.run_options import RunOptions

if TYPE_CHECKING:
    from runplane.services.repositories import RunReader
    from runplane.services.repositories.auto_destroy import AutoDestroyStore
    from runplane.services.runs import Runs
    from runplane.services.workspaces import Workspaces

logger = logging.getLogger("runplane.auto_destroy")
# The outbox write of a notice (``RunEvents.announce``): committed with the record that
# says it was sent, so a notice exists exactly when its step does.
Announce = Callable[[RunEvent], Any]
# What the control plane may do for an armed workspace, within that workspace only.
_SWEEP_PERMISSIONS = frozenset(
    {Permission.WORKSPACE_READ, Permission.RUN_READ, Permission.RUN_CREATE, Permission.RUN_APPROVE}
)
DESTROY = RunOptions(destroy=True)
# A destroy run that has not planned yet: it may be queued behind the workspace's writer.
_NOT_STARTED = frozenset({RunStatus.DISPATCH_PENDING, RunStatus.QUEUED})


class AutoDestroys:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        runs: Runs,
        reader: RunReader,
        store: AutoDestroyStore,
        announce: Announce,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._runs = runs
        # The status of a destroy run in flight.
        self._reader = reader
        self._store = store
        self._announce = announce

    # -- management ------------------------------------------------------------------------

    def get(self, principal: Principal, workspace_id: str) -> dict[str, Any]:
        return self.of(self._workspaces.by_id(principal, workspace_id))

    def of(self, workspace: Workspace) -> dict[str, Any]:
        """The auto-destroy of a workspace the caller has already read."""
        return self.view(workspace, self._store.get(workspace.id))

    def set(
        self,
        principal: Principal,
        workspace_id: str,
        settings: AutoDestroySettings,
        *,
        expected_version: int | None = None,
    ) -> dict[str, Any]:
        """Arm (or re-arm) the workspace's auto-destroy: the new settings count from now,
        with no postponement and no failures behind them."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        now = self._clock.now()
        settings = settings.checked(now)
        current = self._store.get(workspace.id)
        previous = 0 if current is None else current.version
        _refuse_stale(workspace.id, previous, expected_version)
        record = AutoDestroy(
            workspace_id=workspace.id,
            organization_id=workspace.organization_id,
            settings=settings,
            set_at=now,
            set_by=principal.ref,
            version=previous + 1,
        )
        if current is not None:
            # What happened before stays visible; a run in flight is still followed.
            record = replace(
                record,
                active_run_id=current.active_run_id,
                last_run_id=current.last_run_id,
                last_outcome=current.last_outcome,
                last_reason=current.last_reason,
                destroyed_at=current.destroyed_at,
            )
        details = {
            "destroy_at": _iso(settings.destroy_at) or "",
            "destroy_after_inactivity": ""
            if settings.destroy_after_inactivity is None
            else rules.format_duration(settings.destroy_after_inactivity),
            "auto_apply": str(settings.auto_apply).lower(),
        }
        event = self._audit(
            principal.ref, *_ids(workspace), "workspace.auto_destroy_set", details, now
        )
        self._store.put(record, previous_version=previous, event=event)
        return self.view(workspace, record)

    def clear(self, principal: Principal, workspace_id: str) -> dict[str, Any]:
        """Disarm it. A destroy run already started is an ordinary run from then on."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        current = self._armed(workspace)
        event = self._audit(
            principal.ref, *_ids(workspace), "workspace.auto_destroy_cleared", {}, self._clock.now()
        )
        self._store.delete(workspace.id, previous_version=current.version, event=event)
        return self.view(workspace, None)

    def postpone(self, principal: Principal, workspace_id: str, until: datetime) -> dict[str, Any]:
        """Move the destroy later (409 while its destroy run is under way: reject or
        cancel that run first)."""
        return self._postpone(principal, workspace_id, lambda due: until)

    def postpone_by(
        self, principal: Principal, workspace_id: str, length: timedelta
    ) -> dict[str, Any]:
        """Postpone it ``length`` after the time it is due now."""
        if length <= timedelta(0):
            raise InvalidInput("postpone by a positive length", "/by")

        def later(due: datetime | None) -> datetime:
            if due is None:
                raise InvalidInput(
                    "nothing is due to be postponed: the workspace was destroyed", "/by"
                )
            return due + length

        return self._postpone(principal, workspace_id, later)

    def _postpone(
        self,
        principal: Principal,
        workspace_id: str,
        until: Callable[[datetime | None], datetime],
    ) -> dict[str, Any]:
        """Postpone to ``until(the time it is due now)``, from one read of each."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        current = self._armed(workspace)
        if current.active_run_id is not None:
            raise AutoDestroyUnderway(workspace.id, current.active_run_id)
        now = self._clock.now()
        activity = self._activity(workspace, current)
        before = current.due_at(activity)
        moved_to = until(before)
        record = rules.postponed(current, moved_to, principal.ref, now, activity)
        details = {"from": _iso(before) or "", "until": moved_to.isoformat()}
        event = self._audit(
            principal.ref, *_ids(workspace), "workspace.auto_destroy_postponed", details, now
        )
        self._store.put(record, previous_version=current.version, event=event)
        return self._view(workspace, record, activity)

    def forget_workspace(self, workspace: Workspace, actor: str) -> None:
        """Disarm a deleted workspace's auto-destroy (its deletion, which checked who
        may, has committed: no permission is checked here)."""
        self._forget(workspace.id, workspace.organization_id, actor)

    def _forget(self, workspace_id: str, organization_id: str, actor: str) -> None:
        current = self._store.get(workspace_id)
        if current is None:
            return
        event = self._audit(
            actor,
            organization_id,
            workspace_id,
            "workspace.auto_destroy_cleared",
            {"why": "the workspace was deleted"},
            self._clock.now(),
        )
        try:
            self._store.delete(workspace_id, previous_version=current.version, event=event)
        except ConcurrentChange:
            # A sweep wrote meanwhile: the next sweep finds no workspace and forgets it.
            logger.info("auto-destroy not yet forgotten", extra={"workspace_id": workspace_id})

    def view(self, workspace: Workspace, record: AutoDestroy | None) -> dict[str, Any]:
        if record is None:
            return {"workspace_id": workspace.id, "armed": False}
        return self._view(workspace, record, self._activity(workspace, record))

    def _view(
        self, workspace: Workspace, record: AutoDestroy, activity: datetime | None
    ) -> dict[str, Any]:
        settings = record.settings
        due = record.due_at(activity)
        return {
            "workspace_id": workspace.id,
            "armed": True,
            "version": record.version,
            "destroy_at": _iso(settings.destroy_at),
            "destroy_after_inactivity": None
            if settings.destroy_after_inactivity is None
            else rules.format_duration(settings.destroy_after_inactivity),
            "auto_apply": settings.auto_apply,
            "set_at": record.set_at.isoformat(),
            "set_by": record.set_by,
            "due_at": _iso(due),
            "postponed_until": _iso(record.postponed_until),
            "postponed_by": record.postponed_by,
            "active_run_id": record.active_run_id,
            "last_run_id": record.last_run_id,
            "last_outcome": record.last_outcome,
            "last_reason": record.last_reason,
            "attempts": record.attempts,
            "next_attempt_at": _iso(record.next_attempt_at),
            "destroyed_at": _iso(record.destroyed_at),
        }

    # -- the sweep ---------------------------------------------------------------------------

    def sweep(self) -> dict[str, int]:
        """One step for every armed workspace; how many took each kind of step. One
        workspace's failure is logged and counted, never stops the others'."""
        counts: Counter[str] = Counter()
        for record in self._store.armed():
            try:
                counts[self._step(record)] += 1
            except Exception as error:
                counts["failed"] += 1
                logger.error(
                    "auto-destroy step failed",
                    extra={"workspace_id": record.workspace_id, "error": type(error).__name__},
                )
        return dict(counts)

    def _step(self, record: AutoDestroy) -> str:
        try:
            workspace = self._workspaces.by_id(self._principal(record), record.workspace_id)
        except NotFound:
            # Deleted, and its clean-up did not get this far: nothing is left to destroy.
            self._forget(record.workspace_id, record.organization_id, "system:auto-destroy")
            return "gone"
        now = self._clock.now()
        status: RunStatus | None = None
        reason: str | None = None
        if record.active_run_id is not None:
            try:
                run = self._reader.get_run(record.active_run_id)
                status, reason = run.status, run.status_reason
            except NotFound:
                pass
        step = rules.next_step(
            record,
            now,
            last_activity=self._activity(workspace, record),
            active_status=status,
            active_reason=reason,
        )
        if workspace.preview_of is not None and (
            isinstance(step, rules.Launch) or status in _NOT_STARTED
        ):
            self._clear_preview(workspace, record)
        try:
            if isinstance(step, rules.Notify):
                return self._notice(record, workspace.name, step, now)
            if isinstance(step, rules.Launch):
                return self._launch(record, step, now)
            if isinstance(step, rules.Approve):
                return self._approve(record, step)
            if isinstance(step, rules.Ended):
                return self._ended(record, step, now)
        except ConcurrentChange:
            # Another sweep (or a person) wrote first: the next sweep looks again.
            return "contended"
        return "waiting"

    def _clear_preview(self, workspace: Workspace, record: AutoDestroy) -> None:
        """A pull request's preview is being destroyed: its pull request's runs still
        waiting for approval would hold the workspace ahead of the destroy run for up to
        their deadline, so they are rejected (a person's own runs are left alone)."""
        for run in self._reader.runs_of_workspace(workspace.id):
            if (
                run.id == record.active_run_id
                or run.status is not RunStatus.AWAITING_APPROVAL
                or not (run.created_by or "").startswith(f"{PrincipalKind.SOURCE}:")
            ):
                continue
            try:
                self._runs.decide(
                    self._principal(record),
                    run.id,
                    "reject",
                    "its pull request closed: the preview workspace is being destroyed",
                )
            except RunplaneError as refused:
                logger.info(
                    "preview run left waiting", extra={"run_id": run.id, "why": refused.code}
                )
                continue
            logger.info("preview run rejected", extra={"run_id": run.id})

    def _notice(self, record: AutoDestroy, name: str, step: rules.Notify, now: datetime) -> str:
        lead = rules.notice_label(step.lead)
        notice = self._announce(
            RunEvent(
                id=f"{record.workspace_id}.auto-destroy.{step.due.isoformat()}.{lead}",
                type=EventType.AUTO_DESTROY_SCHEDULED,
                run_id=None,
                organization_id=record.organization_id,
                workspace_id=record.workspace_id,
                run_kind=None,
                status=None,
                at=now,
                details={
                    "destroy_at": step.due.isoformat(),
                    "notice": lead,
                    "auto_apply": str(record.settings.auto_apply).lower(),
                    "postpone": f"runplane workspace auto-destroy {name} postpone --by 24h",
                },
            )
        )
        self._store.put(
            rules.noticed(record, step), previous_version=record.version, announce=notice
        )
        logger.info(
            "auto-destroy notice sent",
            extra={"workspace_id": record.workspace_id, "notice": lead},
        )
        return "noticed"

    def _launch(self, record: AutoDestroy, step: rules.Launch, now: datetime) -> str:
        configuration = self._store.latest_configuration_id(record.workspace_id)
        if configuration is None:
            return self._not_started(
                record, "the workspace has no uploaded configuration to plan a destroy of", now
            )
        run_id = self._ids.new(IdKind.RUN)
        try:
            self._runs.create(
                self._principal(record),
                record.workspace_id,
                kind=RunKind.PLAN_AND_APPLY,
                configuration_version_id=configuration,
                engine_version=None,
                variables={},
                message=f"auto-destroy, due {step.due.isoformat()}",
                extra_input={
                    "auto_destroy": {
                        "due_at": step.due.isoformat(),
                        "auto_apply": record.settings.auto_apply,
                        "set_by": record.set_by,
                        "attempt": record.attempts + 1,
                    }
                },
                records=[AutoDestroyLaunch(record, rules.launched(record, run_id))],
                run_id=run_id,
                options=DESTROY,
            )
        except LaunchDenied as denied:
            return self._not_started(record, f"launch denied: {denied.reason}", now)
        except NotFound as gone:
            return self._not_started(record, gone.message, now)
        logger.info(
            "auto-destroy run created",
            extra={"workspace_id": record.workspace_id, "run_id": run_id},
        )
        return "launched"

    def _approve(self, record: AutoDestroy, step: rules.Approve) -> str:
        comment = f"auto-apply of the auto-destroy set by {record.set_by}"
        try:
            self._runs.decide(self._principal(record), step.run_id, "approve", comment)
        except RunplaneError as refused:
            # Approved already (and waiting for a second approver), a soft-failed policy
            # only a person may override, or the run moved on: it is left to people.
            logger.info(
                "auto-destroy approval left to people",
                extra={"run_id": step.run_id, "why": refused.code},
            )
            return "waiting"
        return "approved"

    def _ended(self, record: AutoDestroy, step: rules.Ended, now: datetime) -> str:
        updated = rules.after_run(record, step, now)
        notice = None
        if updated.last_outcome == rules.Outcome.FAILED:
            notice = self._failure_notice(updated, now, run_id=step.run_id, status=step.status)
        self._store.put(updated, previous_version=record.version, announce=notice)
        logger.info(
            "auto-destroy run ended",
            extra={
                "workspace_id": record.workspace_id,
                "run_id": step.run_id,
                "outcome": updated.last_outcome,
            },
        )
        return str(updated.last_outcome)

    def _not_started(self, record: AutoDestroy, reason: str, now: datetime) -> str:
        updated = rules.failed_to_start(record, reason, now)
        notice = self._failure_notice(updated, now, run_id=None, status=None)
        self._store.put(updated, previous_version=record.version, announce=notice)
        return "failed"

    def _failure_notice(
        self, record: AutoDestroy, now: datetime, *, run_id: str | None, status: RunStatus | None
    ) -> Any:
        """Every failure is told (named by the run, or by the attempt for a run never
        created), with when it is tried again: the outbox write of its notice."""
        logger.warning(
            "auto-destroy failed",
            extra={"workspace_id": record.workspace_id, "run_id": run_id},
        )
        return self._announce(
            RunEvent(
                id=f"{record.workspace_id}.auto-destroy-failed.{run_id or record.attempts}."
                f"{record.set_at.isoformat()}",
                type=EventType.AUTO_DESTROY_FAILED,
                run_id=run_id,
                organization_id=record.organization_id,
                workspace_id=record.workspace_id,
                run_kind=None if run_id is None else RunKind.PLAN_AND_APPLY,
                status=status,
                at=now,
                reason=record.last_reason,
                details={"next_attempt_at": _iso(record.next_attempt_at) or ""},
            )
        )

    def _principal(self, record: AutoDestroy) -> Principal:
        return Principal(
            kind=PrincipalKind.SYSTEM,
            id=f"auto-destroy:{record.workspace_id}",
            organization_id=record.organization_id,
            permissions=_SWEEP_PERMISSIONS,
            display=f"auto-destroy (set by {record.set_by})",
            workspace_id=record.workspace_id,
        )

    # -- helpers -------------------------------------------------------------------------

    def _activity(self, workspace: Workspace, record: AutoDestroy) -> datetime | None:
        """The workspace's last state change, read only when the setting counts it."""
        if record.settings.destroy_after_inactivity is None:
            return None
        return self._store.last_activity(workspace)

    def _armed(self, workspace: Workspace) -> AutoDestroy:
        current = self._store.get(workspace.id)
        if current is None:
            raise NotFound("auto-destroy of workspace", workspace.name)
        return current

    def _audit(
        self,
        actor: str,
        organization_id: str,
        workspace_id: str,
        event_type: str,
        details: dict[str, str],
        at: datetime,
    ) -> AuditEvent:
        """The organization audit event of a change to the workspace's auto-destroy."""
        return AuditEvent(
            id=self._ids.new(IdKind.AUDIT_EVENT),
            organization_id=organization_id,
            subject_id=workspace_id,
            type=event_type,
            actor=actor,
            at=at,
            details=details,
        )


def _refuse_stale(workspace_id: str, stored: int, expected: int | None) -> None:
    if expected is not None and expected != stored:
        raise ConcurrentChange(
            f"the auto-destroy of workspace {workspace_id} is at version {stored}, not "
            f"{expected}; nothing was written: read it again"
        )


def _ids(workspace: Workspace) -> tuple[str, str]:
    return workspace.organization_id, workspace.id


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
