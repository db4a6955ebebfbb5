"""The workspace lock and its fence: a user's lock, a run's apply lock, and the
conditions that bind every write made with that authority to the exact lock and fence.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from runplane.domain.entities import ApplyLock, LockHolder
from runplane.domain.errors import (
    ConcurrentChange,
    NotFound,
    NotWriter,
    StaleFence,
    WorkspaceAlreadyLocked,
    WorkspaceHeldByRun,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.store.models import WorkspaceItem, workspace_key
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.transaction import Item, OnRefused, Transaction
from runplane.store.workspaces import _ws

if TYPE_CHECKING:
    from runplane.domain.entities import Run
    from runplane.domain.parts import RunPart
    from runplane.store.runs import RunRepository


def acquire_lock(
    workspace_id: str,
    holder: LockHolder,
    *,
    lock_id: str,
    observed_fence: int,
    reason: str | None,
    now: datetime,
) -> Transaction:
    """Lock the workspace for ``holder`` with the next fence value.

    A run may lock only while it holds the writer reservation; anyone else only
    while no run holds it: writer authority always wins.
    """

    def refused(current: Item | None) -> Exception:
        current = current or {}
        if current.get("deleted_at") is not None:
            return NotFound("workspace", workspace_id)
        writer = current.get("writer_run_id")
        if holder.run_id is not None and writer != holder.run_id:
            return NotWriter(workspace_id, holder.run_id, writer)
        if holder.run_id is None and writer is not None:
            return WorkspaceHeldByRun(workspace_id, str(writer))
        if current.get("lock_id"):
            held_by = current.get("lock_holder_display") or current.get("lock_holder")
            return WorkspaceAlreadyLocked(workspace_id, None if held_by is None else str(held_by))
        return ConcurrentChange(f"workspace {workspace_id} fence moved")

    writer_ok = (
        WorkspaceItem.writer_run_id == holder.run_id
        if holder.run_id is not None
        else WorkspaceItem.writer_run_id.does_not_exist()
    )
    actions: list[Action] = [
        WorkspaceItem.lock_id.set(lock_id),
        WorkspaceItem.lock_holder.set(holder.ref),
        WorkspaceItem.lock_holder_display.set(holder.display),
        WorkspaceItem.locked_at.set(now),
        WorkspaceItem.fence.set(observed_fence + 1),
        WorkspaceItem.lock_reason.set(reason) if reason else WorkspaceItem.lock_reason.remove(),
        WorkspaceItem.lock_run_id.set(holder.run_id)
        if holder.run_id
        else WorkspaceItem.lock_run_id.remove(),
    ]
    return Transaction().update(
        _ws(workspace_id),
        actions,
        # Never on a deleted workspace: its deletion, conditioned on no lock, and a lock
        # racing it cannot both succeed.
        condition=writer_ok
        & WorkspaceItem.lock_id.does_not_exist()
        & (WorkspaceItem.fence == observed_fence)
        & WorkspaceItem.deleted_at.does_not_exist(),
        on_refused=refused,
    )


def acquire_apply_lock(
    workspace_id: str, run_id: str, lock_id: str, observed_fence: int, now: datetime
) -> Transaction:
    """Lock the workspace for ``run_id``'s apply with the next fence value."""
    return acquire_lock(
        workspace_id,
        LockHolder.for_run(run_id),
        lock_id=lock_id,
        observed_fence=observed_fence,
        reason="apply",
        now=now,
    )


def release_lock(workspace_id: str, lock_id: str, *, holder_ref: str | None) -> Transaction:
    """Unlock exactly ``lock_id``: as its holder (``holder_ref``), or by force
    (``holder_ref=None``), which never releases a run's lock."""

    def refused(current: Item | None) -> Exception:
        current = current or {}
        if not current.get("lock_id"):
            return WorkspaceNotLocked(workspace_id)
        if current.get("lock_run_id"):
            return WorkspaceLocked(
                f"workspace {workspace_id} is locked by Run {current.get('lock_run_id')}"
            )
        if current.get("lock_id") != lock_id or holder_ref is not None:
            return WorkspaceLocked(
                f"workspace {workspace_id} is locked by "
                f"{current.get('lock_holder_display') or current.get('lock_holder')}"
            )
        return ConcurrentChange(f"workspace {workspace_id} lock changed")

    condition: Condition = WorkspaceItem.lock_id == lock_id
    if holder_ref is not None:
        condition &= WorkspaceItem.lock_holder == holder_ref
    else:
        condition &= WorkspaceItem.lock_run_id.does_not_exist()
    return Transaction().update(
        _ws(workspace_id), list(_UNLOCK), condition=condition, on_refused=refused
    )


_UNLOCK: tuple[Action, ...] = (
    WorkspaceItem.lock_id.remove(),
    WorkspaceItem.lock_run_id.remove(),
    WorkspaceItem.locked_at.remove(),
    WorkspaceItem.lock_holder.remove(),
    WorkspaceItem.lock_holder_display.remove(),
    WorkspaceItem.lock_reason.remove(),
)


def _stale_fence(lock: ApplyLock) -> OnRefused:
    def refused(current: Item | None) -> Exception:
        return StaleFence(lock.workspace_id, lock.fence, (current or {}).get("fence"))

    return refused


def _is_held_by(lock: ApplyLock) -> Condition:
    held: Condition = (WorkspaceItem.lock_id == lock.lock_id) & (WorkspaceItem.fence == lock.fence)
    return held


def require_authority(lock: ApplyLock) -> Transaction:
    """A condition check: the workspace is still locked by exactly this lock and fence."""
    return Transaction().check(
        WorkspaceItem, workspace_key(lock.workspace_id), _is_held_by(lock), _stale_fence(lock)
    )


def release_apply_lock(lock: ApplyLock) -> Transaction:
    """Unlock; the fence stays where it is, so the old lock can never be valid again."""
    return Transaction().update(
        _ws(lock.workspace_id),
        list(_UNLOCK),
        condition=_is_held_by(lock),
        on_refused=_stale_fence(lock),
    )


class DynamoWorkspaceLocks:
    """The workspace lock on the table (``services.repositories.state.WorkspaceLocks``);
    its reads are served from the request's identity map (``scope``) where they were read
    ahead."""

    def __init__(self, runs: RunRepository, scope: RequestScope = REQUEST) -> None:
        self._runs = runs
        self._scope = scope

    def acquire(
        self,
        workspace_id: str,
        holder: LockHolder,
        *,
        lock_id: str,
        observed_fence: int,
        reason: str | None,
        now: datetime,
    ) -> None:
        acquire_lock(
            workspace_id,
            holder,
            lock_id=lock_id,
            observed_fence=observed_fence,
            reason=reason,
            now=now,
        ).commit()

    def release(self, workspace_id: str, lock_id: str, *, holder_ref: str | None) -> None:
        release_lock(workspace_id, lock_id, holder_ref=holder_ref).commit()

    def run(self, run_id: str) -> Run:
        return self._runs.get(run_id)

    def apply_attempt(self, run_id: str) -> tuple[Run, RunPart | None]:
        # Loaded by runners' calls only: a user's lock reads no run parts.
        from runplane.store import run_batch
        from runplane.store.state_publication import APPLY_ATTEMPT

        run, parts = run_batch.run_and_parts(run_id, [APPLY_ATTEMPT], reads=self._scope.reads())
        return run, parts[APPLY_ATTEMPT]
