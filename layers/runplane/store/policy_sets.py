"""Published policy sets: immutable, content-addressed versions and one head per set.

The head names the current version and where the set is attached; it moves by
one conditional write naming the head version it replaces. Reads are strongly
consistent queries of the organization's partition (no index involved).

The organization's tally counts its heads, in the same transaction as each head's
creation (sets are never deleted), so a request that read it ahead and found it
counting none skips the query. An organization created before the tally existed has
none, which is never read as none: its sets are queried, and its next set's creation
counts its heads into a new tally (conditioned on there being none yet; a creation
that loses to another's increments it instead).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.published_policy_sets import PolicySetHead
from runplane.store.models import (
    PolicySetItem,
    PolicySetTallyItem,
    PolicySetVersionItem,
    policy_set_key,
    policy_set_tally_key,
    policy_set_version_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Transaction

SET_PREFIX = "SET#"


class TallyMissing(ConcurrentChange):
    """A creation's increment found no tally (an organization older than tallies):
    count the heads and create it."""


class TallyPresent(ConcurrentChange):
    """A creation's new tally found one created meanwhile: increment it."""


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
    """The organization's sets by name."""
    pk, _ = policy_set_key(org_id, "")
    items = PolicySetItem.query(pk, PolicySetItem.sk.startswith(SET_PREFIX), consistent_read=True)
    return sorted((_head(item) for item in items), key=lambda head: head.name)


def counted_none(org_id: str, *, reads: IdentityMap) -> bool:
    """Whether the request read the organization's tally ahead (``reads``, once) and it
    counts no set. Never reads anything itself; a tally not read ahead, absent or
    unreadable is not none."""
    known, raw = reads.take_known(policy_set_tally_key(org_id))
    if not known or raw is None:
        return False
    sets = PolicySetTallyItem.from_raw_data(raw).sets
    return sets is not None and int(sets) == 0


def tally(org_id: str) -> int | None:
    """How many sets the organization's tally counts; None if it has none."""
    try:
        item = PolicySetTallyItem.get(*policy_set_tally_key(org_id), consistent_read=True)
    except PolicySetTallyItem.DoesNotExist:
        return None
    return int(item.sets)


def count_heads(org_id: str) -> int:
    """The organization's heads, counted by a strongly consistent query."""
    pk, _ = policy_set_key(org_id, "")
    return int(
        PolicySetItem.count(pk, PolicySetItem.sk.startswith(SET_PREFIX), consistent_read=True)
    )


def new_organization(org_id: str) -> Transaction:
    """The tally of an organization being created, counting none (in its creation's
    transaction)."""
    return Transaction().put_new(
        PolicySetTallyItem(*policy_set_tally_key(org_id), org_id=org_id, sets=0),
        on_refused=lambda current: ConcurrentChange(
            f"organization {org_id} has policy sets already; nothing was written"
        ),
    )


def _one_more(org_id: str, counted: int | None) -> Transaction:
    """The tally with one set more: the existing tally incremented (``counted`` None), or
    a new one counting the ``counted`` heads found and the one being created."""
    if counted is None:
        return Transaction().update(
            PolicySetTallyItem(*policy_set_tally_key(org_id)),
            [PolicySetTallyItem.sets.add(1)],
            condition=PolicySetTallyItem.pk.exists() & (PolicySetTallyItem.sets >= 0),
            on_refused=lambda current: TallyMissing(
                f"organization {org_id} has no policy set tally"
            ),
        )
    return Transaction().put_new(
        PolicySetTallyItem(*policy_set_tally_key(org_id), org_id=org_id, sets=counted + 1),
        on_refused=lambda current: TallyPresent(
            f"organization {org_id}'s policy set tally was created meanwhile"
        ),
    )


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
    counted: int | None = None,
) -> Transaction:
    """The new version (refused if that digest exists) and the head moved to it; for
    content published before, only the head moves back to it. A new head (``previous``
    None) counts in the organization's tally: incremented, or, for an organization with
    none, created from the ``counted`` heads (``TallyMissing`` and ``TallyPresent`` say
    which the commit needs instead, after the head's own refusal)."""
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
    writes.put(head, condition=condition, on_refused=lambda current: stale)
    return writes if previous else writes.extend([_one_more(org_id, counted)])


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
