"""Deleting a workspace, with its safety guard.

Needs ``workspace:delete`` (admins). Refused, writing nothing, while the workspace is in
use (a run holds or waits for its writer reservation, it is locked, or a run of it has
not ended): ``WorkspaceBusy``, which ``force`` does not skip (it would orphan a running
apply). Refused while its current state still manages resources (``WorkspaceNotEmpty``)
unless forced, with a reason; a destroy run that emptied it needs no force.

The deletion is one write, conditioned on the workspace as read (fence, writer, waiters,
lock, current state version): its name is freed, its item marked deleted (kept for its
history, out of the listing, not found by ID or name) and the ``workspace.deleted``
audit event recorded (actor, force, reason, resources left). Its runs and state versions
are kept. Then, best effort, what would act on it is removed: its schedules (first
unregistered), its GitHub binding and its notification destinations; each removal is
idempotent, and a schedule fire that comes first finds no workspace and skips.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from runplane.domain.clock import Clock
from runplane.domain.entities import AuditEvent, Workspace
from runplane.domain.errors import NotFound, WorkspaceBusy, WorkspaceNotEmpty
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.workspace_deletion import (
    DELETED_EVENT,
    DeletedWorkspace,
    audit_details,
    busy_because,
    managed_resources,
    valid_reason,
)
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.services.repositories import RunReader, StateVersionReader, WorkspaceDirectory

logger = logging.getLogger("runplane.workspaces")


class StateContent(Protocol):
    """A state version's bytes (``services.artifacts.ArtifactStore``)."""

    def read(self, organization_id: str, artifact_id: str) -> bytes: ...


class WorkspaceCleanup(Protocol):
    """What removes, after a deletion committed, the records of a deleted workspace
    that would act on it (schedules, a GitHub binding, notification destinations).
    Idempotent: a second call, or one after a partial first, removes what is left."""

    def forget_workspace(self, workspace: Workspace, actor: str) -> None: ...


class WorkspaceDeletion:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        directory: WorkspaceDirectory,
        *,
        runs: RunReader,
        state_versions: StateVersionReader,
        content: Callable[[], StateContent],
        cleanups: Callable[[], Sequence[WorkspaceCleanup]] = tuple,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._directory = directory
        self._runs = runs
        self._state_versions = state_versions
        # Built on first use: only a workspace with state reads its content.
        self._content = content
        self._cleanups = cleanups

    def delete(
        self, principal: Principal, workspace_id: str, *, force: bool, reason: str | None
    ) -> DeletedWorkspace:
        """Delete the workspace, or refuse writing nothing (see the module)."""
        reason = valid_reason(force, reason)
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_DELETE, workspace.id)
        why = busy_because(workspace, self._runs.runs_of_workspace(workspace.id))
        if why is not None:
            raise WorkspaceBusy(workspace.id, why)
        resources = self._resources(workspace)
        if resources and not force:
            raise WorkspaceNotEmpty(workspace.id, workspace.name, resources)
        now = self._clock.now()
        deleted = DeletedWorkspace(
            id=workspace.id,
            name=workspace.name,
            deleted_at=now,
            deleted_by=principal.ref,
            forced=force,
            reason=reason,
            resources=resources,
        )
        event = AuditEvent(
            id=self._ids.new(IdKind.AUDIT_EVENT),
            organization_id=workspace.organization_id,
            subject_id=workspace.id,
            type=DELETED_EVENT,
            actor=principal.ref,
            at=now,
            details=audit_details(deleted),
        )
        self._directory.delete_workspace(workspace, deleted_by=principal.ref, event=event)
        self._workspaces.forget(workspace)
        logger.info(
            "workspace deleted",
            extra={"workspace_id": workspace.id, "forced": force, "resources": resources},
        )
        self._clean_up(workspace, principal.ref)
        return deleted

    def _resources(self, workspace: Workspace) -> int:
        """The resource instances the workspace's current state manages (0: no state)."""
        if workspace.current_state_version_id is None:
            return 0
        version = self._state_versions.get(workspace.current_state_version_id)
        if version.artifact_id is None:
            return 0
        raw = self._content().read(version.organization_id, version.artifact_id)
        return managed_resources(raw)

    def _clean_up(self, workspace: Workspace, actor: str) -> None:
        """Remove what would act on the deleted workspace. The deletion has committed: a
        failure here is logged, not raised (what is left finds no workspace: a schedule
        fire skips, a run it would create is refused as not found)."""
        for cleanup in self._cleanups():
            try:
                cleanup.forget_workspace(workspace, actor)
            except NotFound:
                continue
            except Exception:
                logger.exception(
                    "a deleted workspace's records were not all removed",
                    extra={"workspace_id": workspace.id, "cleanup": type(cleanup).__name__},
                )
