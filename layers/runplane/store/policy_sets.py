"""Published policy sets: immutable, content-addressed versions and one head per set.

The head names the current version and where the set is attached; it moves by
one conditional write naming the head version it replaces. Reads are strongly
consistent queries of the organization's partition (no index involved).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.store.models import (
    PolicySetItem,
    PolicySetVersionItem,
    policy_set_key,
    policy_set_version_key,
)
from runplane.store.transaction import Transaction


def _head(item: PolicySetItem) -> PolicySetHead:
    """The head an item holds (the inverse of ``_head_item``)."""
    return PolicySetHead(
        org_id=item.org_id,
        name=item.name,
        current_digest=item.current_digest,
        current_artifact_id=item.current_artifact_id,
        policies=list(item.policies or []),
        versions=int(item.versions),
        attached_workspaces=tuple(item.attached_workspaces or ()),
        all_workspaces=bool(item.all_workspaces),
        updated_at=item.updated_at,
        updated_by=item.updated_by,
        version=int(item.version),
    )


def _head_item(head: PolicySetHead) -> PolicySetItem:
    """The item holding ``head`` (the inverse of ``_head``)."""
    return PolicySetItem(
        *policy_set_key(head.org_id, head.name),
        org_id=head.org_id,
        name=head.name,
        current_digest=head.current_digest,
        current_artifact_id=head.current_artifact_id,
        policies=head.policies,
        versions=head.versions,
        attached_workspaces=list(head.attached_workspaces),
        all_workspaces=head.all_workspaces,
        updated_at=head.updated_at,
        updated_by=head.updated_by,
        version=head.version,
    )


def get(org_id: str, name: str) -> PolicySetHead:
    try:
        return _head(PolicySetItem.get(*policy_set_key(org_id, name), consistent_read=True))
    except PolicySetItem.DoesNotExist:
        raise NotFound("policy set", name) from None


def find(org_id: str, name: str) -> PolicySetHead | None:
    try:
        return get(org_id, name)
    except NotFound:
        return None


def all_of(org_id: str) -> list[PolicySetHead]:
    pk, _ = policy_set_key(org_id, "")
    items = PolicySetItem.query(pk, PolicySetItem.sk.startswith("SET#"), consistent_read=True)
    return sorted((_head(item) for item in items), key=lambda head: head.name)


def version(org_id: str, name: str, digest: str) -> PolicySetVersionItem | None:
    try:
        return PolicySetVersionItem.get(
            *policy_set_version_key(org_id, name, digest), consistent_read=True
        )
    except PolicySetVersionItem.DoesNotExist:
        return None


def publish(
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
) -> Transaction:
    """The new version (refused if that digest exists) and the head moved to it; for
    content published before, only the head moves back to it."""
    count = previous.versions if previous else 0
    number = count if version_exists else count + 1
    stale = ConcurrentChange(f"policy set {name} was published meanwhile; publish again")
    head = _head_item(
        PolicySetHead(
            org_id=org_id,
            name=name,
            current_digest=digest,
            current_artifact_id=artifact_id,
            policies=policies,
            versions=number,
            attached_workspaces=previous.attached_workspaces if previous else (),
            all_workspaces=previous.all_workspaces if previous else False,
            updated_at=now,
            updated_by=by,
            version=(previous.version + 1) if previous else 1,
        )
    )
    condition = (
        PolicySetItem.version == previous.version if previous else PolicySetItem.pk.does_not_exist()
    )
    writes = Transaction()
    if not version_exists:
        version_item = PolicySetVersionItem(
            *policy_set_version_key(org_id, name, digest),
            org_id=org_id,
            name=name,
            digest=digest,
            artifact_id=artifact_id,
            number=number,
            policies=policies,
            published_at=now,
            published_by=by,
        )
        writes.put_new(version_item, on_refused=lambda current: stale)
    return writes.put(head, condition=condition, on_refused=lambda current: stale)


def attach(
    head: PolicySetHead, workspaces: list[str], all_workspaces: bool, *, by: str, now: datetime
) -> Transaction:
    item = PolicySetItem(*policy_set_key(head.org_id, head.name))
    return Transaction().update(
        item,
        [
            PolicySetItem.attached_workspaces.set(workspaces),
            PolicySetItem.all_workspaces.set(all_workspaces),
            PolicySetItem.updated_at.set(now),
            PolicySetItem.updated_by.set(by),
            PolicySetItem.version.set(head.version + 1),
        ],
        condition=PolicySetItem.version == head.version,
        on_refused=lambda current: ConcurrentChange(
            f"policy set {head.name} changed meanwhile; attach again"
        ),
    )
