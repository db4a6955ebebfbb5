"""Artifact records: where the ciphertext is, its wrapped data key, and what it must decrypt to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactStatus
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.store.models import ArtifactItem, artifact_key
from runplane.store.transaction import Item, Transaction

# A sandbox upload that is never registered is forgotten after this.
PENDING_RETENTION = timedelta(days=1)


@dataclass(frozen=True)
class ArtifactRecord:
    artifact: Artifact
    object_key: str
    wrapped_key: bytes
    chunk_size: int
    etag: str | None
    session_id: str | None


def _item(
    artifact: Artifact,
    *,
    object_key: str,
    wrapped_key: bytes,
    chunk_size: int,
    **attributes: Any,
) -> ArtifactItem:
    return ArtifactItem(
        *artifact_key(artifact.id),
        artifact_id=artifact.id,
        org_id=artifact.organization_id,
        kind=artifact.kind.value,
        status=artifact.status.value,
        object_key=object_key,
        wrapped_key=wrapped_key,
        chunk_size=chunk_size,
        created_at=artifact.created_at,
        **attributes,
    )


def put_registered(
    artifact: Artifact, *, object_key: str, wrapped_key: bytes, chunk_size: int, etag: str
) -> Transaction:
    """An artifact the control plane encrypted itself: readable at once."""
    return Transaction().put_new(
        _item(
            artifact,
            object_key=object_key,
            wrapped_key=wrapped_key,
            chunk_size=chunk_size,
            size=artifact.size,
            sha256=artifact.sha256,
            etag=etag,
            registered_at=artifact.created_at,
        )
    )


def put_pending(
    artifact: Artifact, *, object_key: str, wrapped_key: bytes, chunk_size: int, session_id: str
) -> Transaction:
    """An upload granted to a runner session: unreadable until registered."""
    return Transaction().put_new(
        _item(
            artifact,
            object_key=object_key,
            wrapped_key=wrapped_key,
            chunk_size=chunk_size,
            session_id=session_id,
            expires_at=artifact.created_at + PENDING_RETENTION,
        )
    )


def register(
    artifact_id: str, *, session_id: str, size: int, sha256: str, etag: str, now: datetime
) -> Transaction:
    """pending -> registered, only for the session that was granted the upload."""

    def refused(current: Item | None) -> Exception:
        if current is None:
            return NotFound("artifact", artifact_id)
        return ConcurrentChange(f"artifact {artifact_id} is {current.get('status')}, not pending")

    return Transaction().update(
        ArtifactItem(*artifact_key(artifact_id)),
        [
            ArtifactItem.status.set(ArtifactStatus.REGISTERED.value),
            ArtifactItem.size.set(size),
            ArtifactItem.sha256.set(sha256),
            ArtifactItem.etag.set(etag),
            ArtifactItem.registered_at.set(now),
            ArtifactItem.expires_at.remove(),
        ],
        condition=(ArtifactItem.status == ArtifactStatus.PENDING.value)
        & (ArtifactItem.session_id == session_id),
        on_refused=refused,
    )


def get(artifact_id: str) -> ArtifactRecord:
    try:
        item = ArtifactItem.get(*artifact_key(artifact_id), consistent_read=True)
    except ArtifactItem.DoesNotExist:
        raise NotFound("artifact", artifact_id) from None
    return ArtifactRecord(
        artifact=Artifact(
            id=item.artifact_id,
            organization_id=item.org_id,
            kind=ArtifactKind(item.kind),
            status=ArtifactStatus(item.status),
            size=None if item.size is None else int(item.size),
            sha256=item.sha256,
            created_at=item.created_at,
        ),
        object_key=item.object_key,
        wrapped_key=bytes(item.wrapped_key),
        chunk_size=int(item.chunk_size),
        etag=item.etag,
        session_id=item.session_id,
    )


def delete(artifact_id: str) -> Transaction:
    return Transaction().delete(ArtifactItem(*artifact_key(artifact_id)))
