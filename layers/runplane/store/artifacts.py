"""Artifact records on the table, mapped to and from ``domain.artifacts.ArtifactRecord``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactRecord, ArtifactStatus
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.store.models import ArtifactItem, artifact_key
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, Transaction


def _item(record: ArtifactRecord, registered_at: datetime) -> ArtifactItem:
    """The item of a registered ``record`` (the inverse of ``_record``)."""
    artifact = record.artifact
    return ArtifactItem(
        *artifact_key(artifact.id),
        artifact_id=artifact.id,
        org_id=artifact.organization_id,
        kind=artifact.kind.value,
        status=artifact.status.value,
        object_key=record.object_key,
        wrapped_key=record.wrapped_key,
        chunk_size=record.chunk_size,
        created_at=artifact.created_at,
        size=artifact.size,
        sha256=artifact.sha256,
        etag=record.etag,
        session_id=record.session_id,
        attempt_id=record.attempt_id,
        registered_at=registered_at,
    )


def put_registered(
    artifact: Artifact,
    *,
    object_key: str,
    wrapped_key: bytes,
    chunk_size: int,
    etag: str,
    session_id: str | None = None,
    attempt_id: str | None = None,
    registered_at: datetime | None = None,
) -> Transaction:
    """A verified artifact, readable at once: the control plane encrypted it itself,
    or a runner session uploaded it and register proved it. Refused (nothing
    written) if the artifact exists, e.g. a second register of one upload."""

    def refused(current: Item | None) -> Exception:
        return ConcurrentChange(f"artifact {artifact.id} is already registered")

    return Transaction().put_new(
        _item(
            ArtifactRecord(
                artifact,
                object_key=object_key,
                wrapped_key=wrapped_key,
                chunk_size=chunk_size,
                etag=etag,
                session_id=session_id,
                attempt_id=attempt_id,
            ),
            registered_at or artifact.created_at,
        ),
        on_refused=refused,
    )


def exists(artifact_id: str) -> bool:
    try:
        ArtifactItem.get(*artifact_key(artifact_id), consistent_read=True)
    except ArtifactItem.DoesNotExist:
        return False
    return True


def get(artifact_id: str, *, reads: IdentityMap) -> ArtifactRecord:
    """The record (consistent; ``NotFound`` if absent), served from ``reads`` if it was
    read ahead there."""
    prefetched = reads.take(artifact_key(artifact_id))
    if prefetched is not None:
        return from_raw(prefetched)
    try:
        item = ArtifactItem.get(*artifact_key(artifact_id), consistent_read=True)
    except ArtifactItem.DoesNotExist:
        raise NotFound("artifact", artifact_id) from None
    return _record(item)


def from_raw(raw: dict[str, Any]) -> ArtifactRecord:
    """A record from the raw item a batch read returned."""
    return _record(ArtifactItem.from_raw_data(raw))


def _record(item: ArtifactItem) -> ArtifactRecord:
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
        attempt_id=item.attempt_id,
    )


def delete(artifact_id: str) -> Transaction:
    return Transaction().delete(ArtifactItem(*artifact_key(artifact_id)))
