"""Organizations, workspaces, and the workspace writer state (reservation, queue, lock, fence).

Every method either reads, or builds writes whose conditions name the exact
facts they were built on; services compose them into one transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from runplane.domain.entities import ApplyLock, LockHolder, Organization, Waiter, Workspace
from runplane.domain.errors import (
    AlreadyExists,
    ConcurrentChange,
    NotFound,
    NotWriter,
    StaleFence,
    WorkspaceAlreadyLocked,
    WorkspaceHeldByRun,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.store.models import (
    WAITER_PREFIX,
    NameClaimItem,
    OrganizationItem,
    WaiterItem,
    WaiterPlaceItem,
    WorkspaceItem,
    org_key,
    org_name_key,
    waiter_key,
    waiter_place_key,
    workspace_key,
    workspace_name_key,
)
from runplane.store.transaction import Item, OnRefused, Transaction


def is_exactly(attribute: Any, value: str | None) -> Condition:
    """The attribute holds ``value``, or is absent when ``value`` is None."""
    condition: Condition = attribute.does_not_exist() if value is None else attribute == value
    return condition


def workspaces_partition(org_id: str) -> str:
    return f"ORG#{org_id}#WS"


# -- organizations --------------------------------------------------------------


def create_organization(org: Organization) -> Transaction:
    def taken(current: Item | None) -> Exception:
        return AlreadyExists(f"organization name {org.name!r} is already taken")

    return (
        Transaction()
        .put_new(NameClaimItem(*org_name_key(org.name), owner_id=org.id), on_refused=taken)
        .put_new(
            OrganizationItem(
                *org_key(org.id), org_id=org.id, name=org.name, created_at=org.created_at
            )
        )
    )


def get_organization(org_id: str) -> Organization:
    try:
        item = OrganizationItem.get(*org_key(org_id), consistent_read=True)
    except OrganizationItem.DoesNotExist:
        raise NotFound("organization", org_id) from None
    return Organization(id=item.org_id, name=item.name, created_at=item.created_at)


# -- workspaces -------------------------------------------------------------------


def create_workspace(workspace: Workspace) -> Transaction:
    def taken(current: Item | None) -> Exception:
        return AlreadyExists(f"workspace name {workspace.name!r} is already taken")

    return (
        Transaction()
        .put_new(
            NameClaimItem(
                *workspace_name_key(workspace.organization_id, workspace.name),
                owner_id=workspace.id,
            ),
            on_refused=taken,
        )
        .put_new(
            WorkspaceItem(
                *workspace_key(workspace.id),
                gsi1pk=workspaces_partition(workspace.organization_id),
                gsi1sk=workspace.name,
                workspace_id=workspace.id,
                org_id=workspace.organization_id,
                name=workspace.name,
                created_at=workspace.created_at,
                fence=0,
                queue_seq=0,
                queue_length=0,
                terraform_version=workspace.terraform_version,
                description=workspace.description,
                tag_names=list(workspace.tag_names),
                execution_mode=workspace.execution_mode,
            )
        )
    )


def find_workspace_id(org_id: str, name: str) -> str | None:
    try:
        claim = NameClaimItem.get(*workspace_name_key(org_id, name), consistent_read=True)
    except NameClaimItem.DoesNotExist:
        return None
    return claim.owner_id


def find_organization_id(name: str) -> str | None:
    try:
        claim = NameClaimItem.get(*org_name_key(name), consistent_read=True)
    except NameClaimItem.DoesNotExist:
        return None
    return claim.owner_id


def update_settings(
    workspace_id: str,
    *,
    terraform_version: str | None = None,
    description: str | None = None,
    tag_names: tuple[str, ...] | None = None,
    approval_window_seconds: int | None = None,
    execution_mode: str | None = None,
) -> Transaction:
    actions: list[Action] = []
    if execution_mode is not None:
        actions.append(WorkspaceItem.execution_mode.set(execution_mode))
    if approval_window_seconds is not None:
        actions.append(WorkspaceItem.approval_window_seconds.set(approval_window_seconds))
    if terraform_version is not None:
        actions.append(WorkspaceItem.terraform_version.set(terraform_version))
    if description is not None:
        actions.append(WorkspaceItem.description.set(description))
    if tag_names is not None:
        actions.append(WorkspaceItem.tag_names.set(list(tag_names)))
    if not actions:
        return Transaction()
    return Transaction().update(
        _ws(workspace_id),
        actions,
        condition=WorkspaceItem.workspace_id == workspace_id,
        on_refused=lambda current: NotFound("workspace", workspace_id),
    )


def get_workspace(workspace_id: str) -> Workspace:
    return to_workspace(_workspace_item(workspace_id))


def list_workspaces(org_id: str) -> list[Workspace]:
    index = WorkspaceItem.gsi1
    return [to_workspace(item) for item in index.query(workspaces_partition(org_id))]


def _workspace_item(workspace_id: str) -> WorkspaceItem:
    try:
        return WorkspaceItem.get(*workspace_key(workspace_id), consistent_read=True)
    except WorkspaceItem.DoesNotExist:
        raise NotFound("workspace", workspace_id) from None


def to_workspace(item: WorkspaceItem) -> Workspace:
    return Workspace(
        id=item.workspace_id,
        organization_id=item.org_id,
        name=item.name,
        created_at=item.created_at,
        fence=int(item.fence),
        writer_run_id=item.writer_run_id,
        lock_id=item.lock_id,
        lock_run_id=item.lock_run_id,
        queue_length=int(item.queue_length),
        lock_holder=item.lock_holder,
        lock_holder_display=item.lock_holder_display,
        lock_reason=item.lock_reason,
        locked_at=item.locked_at,
        current_state_version_id=item.current_sv_id,
        current_serial=None if item.current_serial is None else int(item.current_serial),
        current_lineage=item.current_lineage,
        terraform_version=item.terraform_version,
        description=item.description,
        tag_names=tuple(item.tag_names or ()),
        approval_window_seconds=None
        if item.approval_window_seconds is None
        else int(item.approval_window_seconds),
        execution_mode=item.execution_mode or "local",
    )


def _ws(workspace_id: str) -> WorkspaceItem:
    return WorkspaceItem(*workspace_key(workspace_id))


# -- writer reservation and FIFO queue ---------------------------------------------


def queue_state(workspace_id: str) -> tuple[Workspace, int, list[Waiter]]:
    """The workspace, its queue sequence, and its waiters oldest first (consistent reads)."""
    item = _workspace_item(workspace_id)
    waiters = [
        Waiter(workspace_id, w.run_id, w.token, int(w.seq))
        for w in WaiterItem.query(
            workspace_key(workspace_id)[0],
            WaiterItem.sk.startswith(WAITER_PREFIX),
            consistent_read=True,
        )
    ]
    return to_workspace(item), int(item.queue_seq), waiters


def writer_view(workspace_id: str) -> tuple[Workspace, int]:
    """The workspace and its queue sequence, in one consistent read."""
    item = _workspace_item(workspace_id)
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
        condition=WorkspaceItem.writer_run_id.does_not_exist() & (WorkspaceItem.queue_length == 0),
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


# -- apply lock and fence ----------------------------------------------------------


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
        condition=writer_ok
        & WorkspaceItem.lock_id.does_not_exist()
        & (WorkspaceItem.fence == observed_fence),
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


# -- recovery --------------------------------------------------------------------------


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
    waiter), and ``new_state`` (ID, serial, lineage) becomes current if given."""

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
        ]
    return _pass_reservation(observed.id, condition, actions, handoff_to, now, refused)
