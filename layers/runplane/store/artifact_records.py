"""The DynamoDB artifact records (``services.repositories.ArtifactRecords``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from runplane.domain.artifacts import Artifact, ArtifactRecord
from runplane.store import artifacts as store
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.transaction import Transaction


class DynamoArtifactRecords:
    def __init__(self, scope: RequestScope = REQUEST) -> None:
        # Reads are served from the request's identity map, taken at each call.
        self._scope = scope

    def get(self, artifact_id: str) -> ArtifactRecord:
        return store.get(artifact_id, reads=self._scope.reads())

    def exists(self, artifact_id: str) -> bool:
        return store.exists(artifact_id)

    def register(
        self,
        artifact: Artifact,
        *,
        object_key: str,
        wrapped_key: bytes,
        chunk_size: int,
        etag: str,
        session_id: str | None = None,
        registered_at: datetime | None = None,
    ) -> None:
        store.put_registered(
            artifact,
            object_key=object_key,
            wrapped_key=wrapped_key,
            chunk_size=chunk_size,
            etag=etag,
            session_id=session_id,
            registered_at=registered_at,
        ).commit()

    def register_with(
        self,
        artifact: Artifact,
        *,
        object_key: str,
        wrapped_key: bytes,
        chunk_size: int,
        etag: str,
        together: object,
    ) -> None:
        if not isinstance(together, Transaction):
            raise TypeError(f"an artifact is registered with a store write, not {together!r}")
        store.put_registered(
            artifact,
            object_key=object_key,
            wrapped_key=wrapped_key,
            chunk_size=chunk_size,
            etag=etag,
        ).extend([together]).commit()

    def register_all(self, records: Sequence[ArtifactRecord], registered_at: datetime) -> None:
        registration_writes(records, registered_at).commit()

    def discard(self, artifact_id: str) -> None:
        store.delete(artifact_id).commit()


def registration_writes(records: Sequence[ArtifactRecord], registered_at: datetime) -> Transaction:
    """The writes registering verified ``records``, each refused if its ID is taken: for
    ``register_all`` to commit, or a caller to commit with what refers to them."""
    return Transaction().extend(
        store.put_registered(
            record.artifact,
            object_key=record.object_key,
            wrapped_key=record.wrapped_key,
            chunk_size=record.chunk_size,
            etag=record.etag or "",
            session_id=record.session_id,
            attempt_id=record.attempt_id,
            registered_at=registered_at,
        )
        for record in records
    )
