"""The durable recovery operation of a run."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane.domain.errors import ConcurrentChange
from runplane.domain.recovery import Recovery, RecoveryState
from runplane.store.attention import AttentionItem, attention_partition
from runplane.store.models import RecoveryItem, recovery_key
from runplane.store.transaction import Item, Transaction


def get(run_id: str) -> Recovery | None:
    try:
        item = RecoveryItem.get(*recovery_key(run_id), consistent_read=True)
    except RecoveryItem.DoesNotExist:
        return None
    return _recovery(item)


def _recovery(item: RecoveryItem) -> Recovery:
    """The recovery an item holds (the inverse of ``_item``)."""
    return Recovery(
        id=item.recovery_id,
        run_id=item.run_id,
        organization_id=item.org_id,
        workspace_id=item.workspace_id,
        state=RecoveryState(item.state),
        holder=item.holder,
        generation=int(item.generation),
        fingerprint=item.fingerprint,
        lease_expires_at=item.lease_expires_at,
        target_artifact_id=item.target_artifact_id,
        body=dict(item.body or {}),
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _item(recovery: Recovery) -> RecoveryItem:
    """The item holding ``recovery`` (the inverse of ``_recovery``)."""
    return RecoveryItem(
        *recovery_key(recovery.run_id),
        run_id=recovery.run_id,
        recovery_id=recovery.id,
        org_id=recovery.organization_id,
        workspace_id=recovery.workspace_id,
        state=recovery.state.value,
        holder=recovery.holder,
        generation=recovery.generation,
        fingerprint=recovery.fingerprint,
        lease_expires_at=recovery.lease_expires_at,
        target_artifact_id=recovery.target_artifact_id,
        body=dict(recovery.body),
        created_at=recovery.created_at,
        updated_at=recovery.updated_at,
    )


def _moved(run_id: str) -> Any:
    def refused(current: Item | None) -> Exception:
        return ConcurrentChange(f"the recovery of run {run_id} changed meanwhile")

    return refused


def prepare(recovery: Recovery) -> Transaction:
    """The durable operation, written before any artifact is copied."""
    return Transaction().put_new(
        _item(recovery),
        on_refused=_moved(recovery.run_id),
    )


def _exactly(recovery: Recovery) -> Any:
    return (RecoveryItem.state == RecoveryState.PREPARED.value) & (
        RecoveryItem.generation == recovery.generation
    )


def lease(
    recovery: Recovery, holder: str, expires_at: datetime, body: Mapping[str, Any], now: datetime
) -> Transaction:
    """Lease the prepared recovery to ``holder`` (a renewal, or a takeover after
    expiry): the generation moves, so whoever held it before can no longer commit."""
    return Transaction().update(
        RecoveryItem(*recovery_key(recovery.run_id)),
        [
            RecoveryItem.holder.set(holder),
            RecoveryItem.generation.set(recovery.generation + 1),
            RecoveryItem.lease_expires_at.set(expires_at),
            RecoveryItem.body.set(dict(body)),
            RecoveryItem.updated_at.set(now),
        ],
        condition=_exactly(recovery),
        on_refused=_moved(recovery.run_id),
    )


def record_target(recovery: Recovery, artifact_id: str, now: datetime) -> Transaction:
    """The copied target state, recorded once: a replay verifies it, never replaces it."""
    return Transaction().update(
        RecoveryItem(*recovery_key(recovery.run_id)),
        [
            RecoveryItem.target_artifact_id.set(artifact_id),
            RecoveryItem.updated_at.set(now),
        ],
        condition=_exactly(recovery)
        & (RecoveryItem.holder == recovery.holder)
        & RecoveryItem.target_artifact_id.does_not_exist(),
        on_refused=_moved(recovery.run_id),
    )


def complete(recovery: Recovery, body: Mapping[str, Any], now: datetime) -> Transaction:
    """Prepared -> completed, by the holder of a lease that has not run out; the run's
    notice leaves the attention index with it (it no longer needs a person)."""
    notice = AttentionItem(attention_partition(recovery.organization_id), f"RUN#{recovery.run_id}")
    return (
        Transaction()
        .delete(notice)
        .update(
            RecoveryItem(*recovery_key(recovery.run_id)),
            [
                RecoveryItem.state.set(RecoveryState.COMPLETED.value),
                RecoveryItem.body.set(dict(body)),
                RecoveryItem.updated_at.set(now),
            ],
            condition=_exactly(recovery)
            & (RecoveryItem.holder == recovery.holder)
            & (RecoveryItem.lease_expires_at > now),
            on_refused=_moved(recovery.run_id),
        )
    )
