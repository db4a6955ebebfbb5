"""Ending a run's writer authority after recovery, in one conditioned update."""

from __future__ import annotations

from datetime import datetime

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from runplane.domain.entities import Waiter, Workspace
from runplane.domain.errors import ConcurrentChange, NotWriter
from runplane.store.apply_lock import _UNLOCK
from runplane.store.models import WorkspaceItem
from runplane.store.transaction import Item, Transaction
from runplane.store.workspaces import is_exactly
from runplane.store.writer_queue import _pass_reservation


def recover_writer(
    observed: Workspace,
    run_id: str,
    handoff_to: Waiter | None,
    now: datetime,
    new_state: tuple[str, int, str] | None = None,
) -> Transaction:
    """End ``run_id``'s writer authority after recovery, in one update of the workspace
    exactly as ``observed``: the fence advances (so nothing the run was granted is
    valid again), its lock and reservation are released (handed to the oldest
    waiter), and ``new_state`` (ID, serial, lineage) becomes current if given (without
    publication facts: a result checking it reads the version)."""

    def refused(current: Item | None) -> Exception:
        current = current or {}
        if current.get("writer_run_id") != run_id:
            return NotWriter(observed.id, run_id, current.get("writer_run_id"))
        return ConcurrentChange(
            f"workspace {observed.id} changed during recovery (fence, lock, state or queue); "
            "review the run again"
        )

    condition: Condition = (
        (WorkspaceItem.writer_run_id == run_id)
        & (WorkspaceItem.fence == observed.fence)
        & is_exactly(WorkspaceItem.lock_id, observed.lock_id)
        & is_exactly(WorkspaceItem.current_sv_id, observed.current_state_version_id)
    )
    actions: list[Action] = [WorkspaceItem.fence.set(observed.fence + 1), *_UNLOCK]
    if new_state is not None:
        sv_id, serial, lineage = new_state
        actions += [
            WorkspaceItem.current_sv_id.set(sv_id),
            WorkspaceItem.current_serial.set(serial),
            WorkspaceItem.current_lineage.set(lineage),
            # The facts of the version it replaces name another ID, and are unused:
            # removed all the same, so that they only ever describe the pointer.
            WorkspaceItem.current_publication.remove(),
        ]
    return _pass_reservation(observed.id, condition, actions, handoff_to, now, refused)
