"""The workspace writer reservation and its FIFO queue of waiting runs.

Every function reads, or builds writes conditioned on the exact facts they were built on.
"""

from __future__ import annotations

from datetime import datetime

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from runplane.domain.entities import ApplyLock, Waiter, Workspace
from runplane.domain.errors import ConcurrentChange, NotWriter, StaleFence
from runplane.store.apply_lock import _UNLOCK, _is_held_by
from runplane.store.models import (
    WAITER_PREFIX,
    WaiterItem,
    WaiterPlaceItem,
    WorkspaceItem,
    waiter_key,
    waiter_place_key,
    workspace_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, OnRefused, Transaction
from runplane.store.workspaces import _workspace_item, _ws, to_workspace


def queue_state(workspace_id: str, *, reads: IdentityMap) -> tuple[Workspace, int, list[Waiter]]:
    """The workspace (served from ``reads`` if it was read ahead there), its queue
    sequence, and its waiters oldest first (consistent reads)."""
    item = _workspace_item(workspace_id, reads=reads)
    waiters = [
        Waiter(workspace_id, w.run_id, w.token, int(w.seq))
        for w in WaiterItem.query(
            workspace_key(workspace_id)[0],
            WaiterItem.sk.startswith(WAITER_PREFIX),
            consistent_read=True,
        )
    ]
    return to_workspace(item), int(item.queue_seq), waiters


def writer_view(workspace_id: str, *, reads: IdentityMap) -> tuple[Workspace, int]:
    """The workspace and its queue sequence, in one consistent read (served from ``reads``
    if it was read ahead there)."""
    item = _workspace_item(workspace_id, reads=reads)
    return to_workspace(item), int(item.queue_seq)


def waiter_of(workspace_id: str, run_id: str) -> Waiter | None:
    """``run_id``'s place in the queue, found through its place item (two reads)."""
    try:
        place = WaiterPlaceItem.get(*waiter_place_key(workspace_id, run_id), consistent_read=True)
        item = WaiterItem.get(*waiter_key(workspace_id, int(place.seq)), consistent_read=True)
    except (WaiterPlaceItem.DoesNotExist, WaiterItem.DoesNotExist):
        return None
    return Waiter(workspace_id, item.run_id, item.token, int(item.seq))


def oldest_waiter(workspace_id: str) -> Waiter | None:
    """The head of the queue: one item read, however long the queue is."""
    for item in WaiterItem.query(
        workspace_key(workspace_id)[0],
        WaiterItem.sk.startswith(WAITER_PREFIX),
        consistent_read=True,
        limit=1,
    ):
        return Waiter(workspace_id, item.run_id, item.token, int(item.seq))
    return None


def position_of(waiter: Waiter) -> int:
    """1 for the head of the queue (counts the waiters up to it: for a retried wait only)."""
    first, mine = (waiter_key(waiter.workspace_id, seq)[1] for seq in (0, waiter.position))
    return WaiterItem.count(
        workspace_key(waiter.workspace_id)[0],
        WaiterItem.sk.between(first, mine),
        consistent_read=True,
    )


def _place(workspace_id: str, run_id: str, seq: int) -> Transaction:
    return Transaction().put_new(
        WaiterPlaceItem(
            *waiter_place_key(workspace_id, run_id),
            workspace_id=workspace_id,
            run_id=run_id,
            seq=seq,
        )
    )


def _leave(waiter: Waiter) -> Transaction:
    """Delete a waiter and its place item, iff it is still that run's."""
    return (
        Transaction()
        .delete(
            WaiterItem(*waiter_key(waiter.workspace_id, waiter.position)),
            condition=WaiterItem.run_id == waiter.run_id,
            on_refused=lambda current: ConcurrentChange(f"run {waiter.run_id} left the queue"),
        )
        .delete(WaiterPlaceItem(*waiter_place_key(waiter.workspace_id, waiter.run_id)))
    )


def take_free_reservation(workspace_id: str, run_id: str, now: datetime) -> Transaction:
    """Take the reservation if nobody holds it and nobody waits for it."""
    return Transaction().update(
        _ws(workspace_id),
        [WorkspaceItem.writer_run_id.set(run_id), WorkspaceItem.writer_since.set(now)],
        # Never on a deleted workspace: its deletion is conditioned on no writer and no
        # waiter, so a run racing it either holds the reservation first or never does.
        condition=WorkspaceItem.writer_run_id.does_not_exist()
        & (WorkspaceItem.queue_length == 0)
        & WorkspaceItem.deleted_at.does_not_exist(),
        on_refused=lambda current: ConcurrentChange(f"workspace {workspace_id} writer changed"),
    )


def enqueue_waiter(
    workspace_id: str, run_id: str, token: str, observed_seq: int, now: datetime
) -> Transaction:
    """Append a waiter behind the current holder; refused if the queue moved meanwhile."""
    seq = observed_seq + 1
    return (
        Transaction()
        .update(
            _ws(workspace_id),
            [WorkspaceItem.queue_seq.set(seq), WorkspaceItem.queue_length.add(1)],
            condition=(WorkspaceItem.queue_seq == observed_seq)
            & (WorkspaceItem.writer_run_id.exists() | (WorkspaceItem.queue_length > 0)),
            on_refused=lambda current: ConcurrentChange(f"workspace {workspace_id} queue moved"),
        )
        .put_new(
            WaiterItem(
                *waiter_key(workspace_id, seq),
                workspace_id=workspace_id,
                run_id=run_id,
                seq=seq,
                token=token,
                enqueued_at=now,
            )
        )
        .extend([_place(workspace_id, run_id, seq)])
    )


def replace_waiter_token(waiter: Waiter, token: str) -> Transaction:
    """A retried wait gets a new token: the waiter keeps its place in the queue."""
    return Transaction().update(
        WaiterItem(*waiter_key(waiter.workspace_id, waiter.position)),
        [WaiterItem.token.set(token)],
        condition=WaiterItem.run_id == waiter.run_id,
        on_refused=lambda current: ConcurrentChange(f"run {waiter.run_id} left the queue"),
    )


def remove_waiter(waiter: Waiter) -> Transaction:
    return _leave(waiter).update(
        _ws(waiter.workspace_id),
        [WorkspaceItem.queue_length.add(-1)],
        condition=WorkspaceItem.queue_length > 0,
    )


def release_reservation(
    workspace_id: str,
    run_id: str,
    handoff_to: Waiter | None,
    now: datetime,
    lock: ApplyLock | None = None,
) -> Transaction:
    """Release ``run_id``'s reservation (and its apply ``lock``, exactly, if given),
    handing the reservation to ``handoff_to``, the oldest waiter.

    With no waiter the write requires the queue to still be empty, so a waiter
    that arrived meanwhile is never stranded behind a free reservation. One
    update carries everything: a transaction may touch the workspace item once.
    """

    def refused(current: Item | None) -> Exception:
        current = current or {}
        holder = current.get("writer_run_id")
        if holder != run_id:
            return NotWriter(workspace_id, run_id, holder)
        if lock is not None and (
            current.get("lock_id") != lock.lock_id or current.get("fence") != lock.fence
        ):
            return StaleFence(workspace_id, lock.fence, current.get("fence"))
        return ConcurrentChange(f"workspace {workspace_id} queue moved")

    condition = WorkspaceItem.writer_run_id == run_id
    actions: list[Action] = []
    if lock is not None:
        condition &= _is_held_by(lock)
        actions += _UNLOCK
    return _pass_reservation(workspace_id, condition, actions, handoff_to, now, refused)


def _pass_reservation(
    workspace_id: str,
    condition: Condition,
    actions: list[Action],
    handoff_to: Waiter | None,
    now: datetime,
    refused: OnRefused,
) -> Transaction:
    """One update of the workspace that also hands the reservation to ``handoff_to``
    (deleting its waiter) or frees it, which requires the queue to still be empty."""
    if handoff_to is None:
        return Transaction().update(
            _ws(workspace_id),
            [*actions, WorkspaceItem.writer_run_id.remove(), WorkspaceItem.writer_since.remove()],
            condition=condition & (WorkspaceItem.queue_length == 0),
            on_refused=refused,
        )
    handing = [
        WorkspaceItem.writer_run_id.set(handoff_to.run_id),
        WorkspaceItem.writer_since.set(now),
        WorkspaceItem.queue_length.add(-1),
    ]
    return (
        Transaction()
        .update(_ws(workspace_id), [*actions, *handing], condition=condition, on_refused=refused)
        .extend([_leave(handoff_to)])
    )
