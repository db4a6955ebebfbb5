"""Organizations and workspaces: names, records and settings. The workspace writer
state lives next to it: store/writer_queue.py (reservation and FIFO queue),
store/apply_lock.py (lock and fence), store/writer_recovery.py.

Every method either reads, or builds writes whose conditions name the exact
facts they were built on; services compose them into one transaction.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from pynamodb.attributes import NumberAttribute
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from runplane.domain.entities import AuditEvent, Organization, Workspace
from runplane.domain.errors import AlreadyExists, ConcurrentChange, NotFound
from runplane.domain.publications import Publication
from runplane.domain.second_approval import SecondApprovalRule
from runplane.store import audit
from runplane.store.models import (
    NameClaimItem,
    OrganizationItem,
    WorkspaceItem,
    org_key,
    org_name_key,
    workspace_key,
    workspace_name_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, Transaction


def is_exactly(attribute: Any, value: str | None) -> Condition:
    """The attribute holds ``value``, or is absent when ``value`` is None."""
    condition: Condition = attribute.does_not_exist() if value is None else attribute == value
    return condition


def workspaces_partition(org_id: str) -> str:
    return f"ORG#{org_id}#WS"


def deleted_workspaces_partition(org_id: str) -> str:
    """Where a deleted workspace's item moves in the index: out of the listing."""
    return f"ORG#{org_id}#WSDELETED"


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
                destination_count=0,
                dependent_count=0,
                terraform_version=workspace.terraform_version,
                description=workspace.description,
                tag_names=list(workspace.tag_names),
                execution_mode=workspace.execution_mode,
                preview_of=workspace.preview_of,
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
    second_approval: SecondApprovalRule | None = None,
    expected_settings_version: int | None = None,
) -> Transaction:
    """Set the given settings and count the change; with ``expected_settings_version``,
    only while the settings are still at that version (else ``ConcurrentChange``)."""
    actions: list[Action] = []
    if second_approval is not None:
        text = second_approval.to_text()
        attribute = WorkspaceItem.second_approval
        actions.append(attribute.remove() if text is None else attribute.set(text))
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
    actions.append(WorkspaceItem.settings_version.add(1))
    condition = (WorkspaceItem.workspace_id == workspace_id) & (
        WorkspaceItem.deleted_at.does_not_exist()
    )
    if expected_settings_version is not None:
        at_version = WorkspaceItem.settings_version == expected_settings_version
        if expected_settings_version == 0:
            at_version = at_version | WorkspaceItem.settings_version.does_not_exist()
        condition = condition & at_version

    def refused(current: Item | None) -> Exception:
        if current is None or current.get("deleted_at") is not None:
            return NotFound("workspace", workspace_id)
        return stale_settings(workspace_id)

    return Transaction().update(_ws(workspace_id), actions, condition=condition, on_refused=refused)


def stale_settings(workspace_id: str) -> ConcurrentChange:
    return ConcurrentChange(
        f"the settings of workspace {workspace_id} changed since the form was shown; "
        "nothing was changed: reload the page and make the change again"
    )


def delete_workspace(workspace: Workspace, *, deleted_by: str, event: AuditEvent) -> Transaction:
    """Free the workspace's name and mark its item deleted at ``event.at`` (kept for its
    history, moved out of the organization's listing), with its audit ``event``, only
    while it is as ``workspace`` read it: not deleted, at the same fence, with no writer,
    no waiter, no lock and the same current state version. Its runs and state versions
    are not touched."""

    def changed(current: Item | None) -> Exception:
        if current is None or current.get("deleted_at") is not None:
            return NotFound("workspace", workspace.id)
        return ConcurrentChange(
            f"workspace {workspace.id} changed meanwhile (a run, a lock or a new state "
            "version); nothing was deleted: look at it again"
        )

    unchanged = (
        (WorkspaceItem.workspace_id == workspace.id)
        & WorkspaceItem.deleted_at.does_not_exist()
        & (WorkspaceItem.fence == workspace.fence)
        & WorkspaceItem.writer_run_id.does_not_exist()
        & WorkspaceItem.lock_id.does_not_exist()
        & (WorkspaceItem.queue_length == 0)
        & is_exactly(WorkspaceItem.current_sv_id, workspace.current_state_version_id)
    )
    return (
        Transaction()
        .update(
            _ws(workspace.id),
            [
                WorkspaceItem.deleted_at.set(event.at),
                WorkspaceItem.deleted_by.set(deleted_by),
                WorkspaceItem.gsi1pk.set(deleted_workspaces_partition(workspace.organization_id)),
                WorkspaceItem.gsi1sk.set(f"{workspace.name}#{workspace.id}"),
            ],
            condition=unchanged,
            on_refused=changed,
        )
        .delete(
            NameClaimItem(*workspace_name_key(workspace.organization_id, workspace.name)),
            condition=NameClaimItem.owner_id == workspace.id,
            on_refused=lambda current: NotFound("workspace", workspace.id),
        )
        .extend([audit.recorded(event)])
    )


def get_workspace(workspace_id: str, *, reads: IdentityMap) -> Workspace:
    """The workspace (consistent; ``NotFound`` if absent), served from ``reads`` if it was
    read ahead there."""
    return to_workspace(_workspace_item(workspace_id, reads=reads))


def list_workspaces(org_id: str) -> list[Workspace]:
    index = WorkspaceItem.gsi1
    return [to_workspace(item) for item in index.query(workspaces_partition(org_id))]


def _workspace_item(workspace_id: str, *, reads: IdentityMap) -> WorkspaceItem:
    prefetched = reads.take(workspace_key(workspace_id))
    if prefetched is not None:
        item = WorkspaceItem.from_raw_data(prefetched)
    else:
        try:
            item = WorkspaceItem.get(*workspace_key(workspace_id), consistent_read=True)
        except WorkspaceItem.DoesNotExist:
            raise NotFound("workspace", workspace_id) from None
    if item.deleted_at is not None:
        # Kept for its history only: nothing acts on a deleted workspace.
        raise NotFound("workspace", workspace_id)
    return item


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
        current_publication=stored_publication(item.current_publication),
        terraform_version=item.terraform_version,
        description=item.description,
        tag_names=tuple(item.tag_names or ()),
        approval_window_seconds=None
        if item.approval_window_seconds is None
        else int(item.approval_window_seconds),
        execution_mode=item.execution_mode or "local",
        second_approval=SecondApprovalRule.from_text(item.second_approval),
        preview_of=item.preview_of,
        settings_version=int(item.settings_version or 0),
        destination_count=counted(item.destination_count),
        dependent_count=counted(item.dependent_count),
    )


# What a count starts from on a workspace made before it was counted: far above any
# true count, so such a workspace always reads as not counted.
UNCOUNTED = 1_000_000_000


def counted(value: float | None) -> int | None:
    """A workspace's count as stored; None when it was never counted."""
    if value is None or value >= UNCOUNTED // 2:
        return None
    return max(int(value), 0)


def count_change(attribute: NumberAttribute, workspace_id: str, by: int) -> Transaction:
    """The write moving one of a workspace's counts by ``by`` (in the change's own
    transaction)."""
    return Transaction().update(_ws(workspace_id), [attribute.set((attribute | UNCOUNTED) + by)])


def _ws(workspace_id: str) -> WorkspaceItem:
    return WorkspaceItem(*workspace_key(workspace_id))


_PUBLICATION_FIELDS = frozenset(field.name for field in fields(Publication))


def publication_record(publication: Publication) -> dict[str, Any]:
    """The workspace item's ``current_publication`` for ``publication``."""
    return asdict(publication)


def stored_publication(record: object) -> Publication | None:
    """The publication facts a workspace item holds; None if it holds none, or none of
    this shape (a reader then reads the version)."""
    if not isinstance(record, dict) or set(record) != _PUBLICATION_FIELDS:
        return None
    return Publication(**record)
