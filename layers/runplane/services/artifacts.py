"""Envelope-encrypted artifacts: stored and read as streams, never whole in memory.

Each artifact has its own KMS data key, bound by encryption context to the
artifact and its organization; the ciphertext format is in
``runplane.adapters.envelope``. Two ways in:

- ``ArtifactStore.put`` encrypts a plaintext stream server-side (user uploads
  come through an inbox object, since API Gateway cannot carry 100 MB);
- ``SandboxTransfers`` lets a runner session upload ciphertext it encrypted
  with a data key released to it; nothing is recorded until ``register``
  re-reads the object and proves it decrypts, chunk by chunk, to exactly the
  size and SHA-256 the session reported, and then the artifact is written
  readable in one conditional put.

Reads pin the verified object version (ETag) and re-verify the SHA-256
through EOF, so an object replaced in the bucket is never served as the
artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from runplane.adapters.envelope import CHUNK_SIZE, Decryption, Encryption, Read, sealed_size
from runplane.adapters.keys import DataKeys, KeyUnavailable
from runplane.adapters.object_store import ObjectChanged, ObjectMissing, ObjectStore
from runplane.domain.artifacts import (
    MAX_LAUNCH_ARTIFACT_BYTES,
    Artifact,
    ArtifactKind,
    ArtifactRecord,
    ArtifactStatus,
)
from runplane.domain.capabilities import RunnerSession
from runplane.domain.clock import Clock
from runplane.domain.errors import (
    ArtifactCorrupt,
    ArtifactTooLarge,
    InvalidInput,
    NotFound,
    UploadTicketRefused,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.runner_reports import UploadReport as UploadReport
from runplane.domain.upload_tickets import TICKET_LIFETIME, UploadTicket, issued_at, redeem

if TYPE_CHECKING:
    from runplane.services.repositories import ArtifactRecords


def key_context(artifact_id: str, organization_id: str) -> dict[str, str]:
    """KMS unwraps an artifact's data key only when asked for exactly this artifact."""
    return {"runplane:artifact": artifact_id, "runplane:organization": organization_id}


def object_key(organization_id: str, artifact_id: str) -> str:
    return f"artifacts/{organization_id}/{artifact_id}"


def inbox_key(organization_id: str, upload_id: str) -> str:
    return f"inbox/{organization_id}/{upload_id}"


@dataclass(frozen=True)
class InboxUpload:
    upload_id: str
    url: str
    expires_at: datetime


@dataclass(frozen=True)
class DownloadGrant:
    artifact_id: str
    url: str
    sha256: str
    size: int
    data_key: bytes = field(repr=False)


@dataclass(frozen=True)
class UploadGrant:
    artifact_id: str
    url: str
    chunk_size: int
    max_size: int
    data_key: bytes = field(repr=False)
    # Carried back to register: it stands in for a pending record (domain/upload_tickets.py).
    ticket: str = field(repr=False)


@dataclass(frozen=True)
class PhaseGrants:
    """What a session start hands its runner up front: a download grant for each input
    the phase needs and an upload grant for each artifact it uploads, each usable for
    ``lifetime`` seconds from issue (its URL's; the ticket lasts longer)."""

    downloads: tuple[DownloadGrant, ...]
    uploads: Mapping[ArtifactKind, UploadGrant]
    lifetime: int


class _ArtifactAccess:
    """What both ways into the artifact store share: time, IDs, records, objects, keys,
    limits."""

    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        objects: ObjectStore,
        keys: DataKeys,
        *,
        limit: int = MAX_LAUNCH_ARTIFACT_BYTES,
        url_seconds: int = 300,
        records: ArtifactRecords,
    ) -> None:
        self._clock = clock
        self._records = records
        self._ids = ids
        self._objects = objects
        self._keys = keys
        self._unwrap = _Keys(keys).unwrap
        self._limit = limit
        self._url_seconds = url_seconds


class _Keys:
    def __init__(self, keys: DataKeys) -> None:
        self._keys = keys

    def unwrap(self, record: ArtifactRecord) -> bytes:
        artifact = record.artifact
        try:
            return self._keys.unwrap(
                record.wrapped_key, key_context(artifact.id, artifact.organization_id)
            )
        except KeyUnavailable:
            raise ArtifactCorrupt(
                artifact.id, "key_unavailable", "KMS refused the data key"
            ) from None


class ArtifactStore(_ArtifactAccess):
    def put(
        self,
        organization_id: str,
        kind: ArtifactKind,
        plaintext: Iterable[bytes],
        together: Callable[[Artifact], object] | None = None,
    ) -> Artifact:
        """Encrypt and store a plaintext stream; over the limit, nothing is stored.

        ``together`` gives the store's write of whatever refers to the artifact, which
        commits with its record (``ArtifactRecords.register_with``): if it is refused,
        nothing is stored."""
        artifact_id = self._ids.new(IdKind.ARTIFACT)
        data_key = self._keys.generate(key_context(artifact_id, organization_id))
        encryption = Encryption(data_key.plaintext, artifact_id, limit=self._limit)
        key = object_key(organization_id, artifact_id)
        stored = self._objects.upload_stream(key, encryption.stream(plaintext))
        artifact = Artifact(
            id=artifact_id,
            organization_id=organization_id,
            kind=kind,
            status=ArtifactStatus.REGISTERED,
            size=encryption.size,
            sha256=encryption.sha256,
            created_at=self._clock.now(),
        )
        try:
            if together is None:
                self._records.register(
                    artifact,
                    object_key=key,
                    wrapped_key=data_key.wrapped,
                    chunk_size=CHUNK_SIZE,
                    etag=stored.etag,
                )
            else:
                self._records.register_with(
                    artifact,
                    object_key=key,
                    wrapped_key=data_key.wrapped,
                    chunk_size=CHUNK_SIZE,
                    etag=stored.etag,
                    together=together(artifact),
                )
        except BaseException:
            self._objects.delete(key)
            raise
        return artifact

    def discard(self, artifact_id: str) -> None:
        """Remove an artifact nothing refers to (a write that failed after storing it)."""
        record = self._records.get(artifact_id)
        self._records.discard(artifact_id)
        self._objects.delete(record.object_key)

    def describe(self, organization_id: str, artifact_id: str) -> Artifact:
        record = self._records.get(artifact_id)
        if record.artifact.organization_id != organization_id:
            raise NotFound("artifact", artifact_id)
        return record.artifact

    @contextmanager
    def open(self, organization_id: str, artifact_id: str) -> Iterator[Iterator[bytes]]:
        """The artifact's plaintext as a stream of verified chunks.

        The stream raises ``ArtifactCorrupt`` on tampering and, at its end, if
        the size or SHA-256 differ from the record: use nothing unless it ended
        cleanly.
        """
        record = self._records.get(artifact_id)
        artifact = record.artifact
        if (
            artifact.organization_id != organization_id
            or artifact.status is not ArtifactStatus.REGISTERED
        ):
            raise NotFound("artifact", artifact_id)
        data_key = self._unwrap(record)
        with _verified_object(self._objects, record) as read:
            yield Decryption(
                data_key, artifact.id, expected_sha256=artifact.sha256, expected_size=artifact.size
            ).stream(read)

    def read(self, organization_id: str, artifact_id: str) -> bytes:
        """The whole plaintext, verified through EOF (for artifacts that fit in memory)."""
        with self.open(organization_id, artifact_id) as plaintext:
            return b"".join(plaintext)

    def new_inbox_upload(self, organization_id: str) -> InboxUpload:
        """A single-purpose URL to PUT one plaintext upload to, short-lived."""
        upload_id = self._ids.new(IdKind.UPLOAD)
        url = self._objects.presign("PUT", inbox_key(organization_id, upload_id), self._url_seconds)
        expires_at = self._clock.now() + timedelta(seconds=self._url_seconds)
        return InboxUpload(upload_id, url, expires_at)

    def ingest(
        self,
        organization_id: str,
        kind: ArtifactKind,
        upload_id: str,
        together: Callable[[Artifact], object] | None = None,
    ) -> Artifact:
        """Stream an inbox upload through envelope encryption into the artifact store
        (``together``: as ``put``'s).

        The inbox object is deleted whatever happens: plaintext never lingers.
        """
        key = inbox_key(organization_id, upload_id)
        try:
            with self._objects.open(key) as read:
                chunks = iter(lambda: read(CHUNK_SIZE), b"")
                return self.put(organization_id, kind, chunks, together)
        except ObjectMissing:
            raise NotFound("upload", upload_id) from None
        finally:
            self._objects.delete(key)


@contextmanager
def _verified_object(objects: ObjectStore, record: ArtifactRecord) -> Iterator[Read]:
    try:
        with objects.open(record.object_key, record.etag) as read:
            yield read
    except ObjectChanged:
        raise ArtifactCorrupt(
            record.artifact.id, "replaced", "the stored object is not the verified one"
        ) from None
    except ObjectMissing:
        raise ArtifactCorrupt(record.artifact.id, "missing", "the stored object is gone") from None


class SandboxTransfers(_ArtifactAccess):
    """What a runner session may move, through URLs that carry no authority of their own.

    A URL only moves ciphertext. Plaintext needs the data key, released here
    only to the bound session; an uploaded object counts only once
    ``register`` has verified it.
    """

    def download(self, session: RunnerSession, artifact_id: str) -> DownloadGrant:
        """A transfer URL and the data key for one of the session's inputs."""
        if artifact_id not in session.inputs:
            raise NotFound("artifact", artifact_id)
        return self._download(session, self._records.get(artifact_id))

    def _download(self, session: RunnerSession, record: ArtifactRecord) -> DownloadGrant:
        artifact = record.artifact
        if (
            artifact.id not in session.inputs
            or artifact.status is not ArtifactStatus.REGISTERED
            or artifact.organization_id != session.organization_id
            or artifact.sha256 is None
            or artifact.size is None
        ):
            raise NotFound("artifact", artifact.id)
        url = self._objects.presign("GET", record.object_key, self._url_seconds)
        return DownloadGrant(artifact.id, url, artifact.sha256, artifact.size, self._unwrap(record))

    def phase_grants(
        self,
        session: RunnerSession,
        inputs: Iterable[str],
        records: Mapping[str, ArtifactRecord],
        uploads: Iterable[ArtifactKind],
    ) -> PhaseGrants:
        """Grants for a phase, issued exactly as ``download`` and ``begin_upload`` issue
        them, from ``records`` the caller read with the run (one request for all).

        An input gets no grant where ``download`` would refuse it (not the session's,
        another organization's, unreadable, unknown, its key refused): the runner then
        asks the download route, which refuses it with its usual error."""
        downloads = []
        for artifact_id in dict.fromkeys(inputs):
            record = records.get(artifact_id)
            if record is None:
                continue
            try:
                downloads.append(self._download(session, record))
            except (NotFound, ArtifactCorrupt):
                continue
        lifetime = min(self._url_seconds, int(TICKET_LIFETIME.total_seconds()))
        tickets = {kind: self.begin_upload(session, kind) for kind in sorted(set(uploads))}
        return PhaseGrants(tuple(downloads), tickets, lifetime)

    def begin_upload(self, session: RunnerSession, kind: ArtifactKind) -> UploadGrant:
        """A URL, a data key and a ticket for one upload; nothing is written until register."""
        ticket = UploadTicket(
            session_id=session.id,
            kind=kind,
            nonce=self._ids.new(IdKind.UPLOAD),
            issued=issued_at(self._clock.now()),
            wrapped_key=b"",
        )
        artifact_id = ticket.artifact_id
        data_key = self._keys.generate(key_context(artifact_id, session.organization_id))
        ticket = replace(ticket, wrapped_key=data_key.wrapped)
        url = self._objects.presign(
            "PUT", object_key(session.organization_id, artifact_id), self._url_seconds
        )
        return UploadGrant(
            artifact_id, url, CHUNK_SIZE, self._limit, data_key.plaintext, ticket.encode()
        )

    def register(
        self, session: RunnerSession, artifact_id: str, *, ticket: str, size: int, sha256: str
    ) -> Artifact:
        """Make an uploaded artifact readable, after proving it is what the session says.

        The ticket must be this session's for ``artifact_id`` and current, and its
        key must unwrap under the artifact's context. The object must be exactly
        the ciphertext of ``size`` bytes under that key, every chunk must
        authenticate, and the plaintext must hash to ``sha256``. Only then is the
        record written, in one conditional put; on a failed check the object is
        deleted (unless an earlier register made it an artifact) and nothing is
        written.
        """
        return self.register_all(session, [UploadReport(artifact_id, ticket, size, sha256)])[0]

    def register_all(
        self, session: RunnerSession, uploads: Sequence[UploadReport]
    ) -> list[Artifact]:
        """``register`` for several uploads of one session, written in one transaction:
        each is checked as ``register`` checks it (a failed check deletes that upload's
        object and refuses them all), then all are written or none."""
        registered = self._all_checked(session, uploads)
        self._records.register_all(registered, self._clock.now())
        return [record.artifact for record in registered]

    def checked(
        self, session: RunnerSession, uploads: Sequence[UploadReport]
    ) -> list[ArtifactRecord]:
        """``register_all``'s checks, the records left for the caller to register with
        what refers to the uploads (a runner's result, which also checks them against
        what it names): registered only if that commits, with the store's own writes
        (``store.artifact_records.registration_writes``)."""
        return self._all_checked(session, uploads)

    def _all_checked(
        self, session: RunnerSession, uploads: Sequence[UploadReport]
    ) -> list[ArtifactRecord]:
        ids = [upload.artifact_id for upload in uploads]
        if len(set(ids)) < len(ids):
            raise InvalidInput("each upload may be registered once per call", "/uploads")
        return [self._checked(session, upload) for upload in uploads]

    def _checked(self, session: RunnerSession, report: UploadReport) -> ArtifactRecord:
        """The record ``register`` writes, once the ticket and the object check out."""
        artifact_id, size, sha256 = report.artifact_id, report.size, report.sha256
        upload = redeem(session.id, artifact_id, report.ticket, self._clock.now())
        record = ArtifactRecord(
            Artifact(
                id=artifact_id,
                organization_id=session.organization_id,
                kind=upload.kind,
                status=ArtifactStatus.PENDING,
                size=None,
                sha256=None,
                created_at=upload.issued_at,
            ),
            object_key(session.organization_id, artifact_id),
            upload.wrapped_key,
            CHUNK_SIZE,
            None,
            session.id,
            # Its attempt, which alone may name it in a report.
            session.binding.attempt_id,
        )
        try:
            data_key = self._keys.unwrap(
                upload.wrapped_key, key_context(artifact_id, session.organization_id)
            )
        except KeyUnavailable:
            raise UploadTicketRefused(
                artifact_id, "not_issued", "its key was not issued for this artifact"
            ) from None
        stored = self._verify(record, data_key, size=size, sha256=sha256)
        artifact = replace(
            record.artifact, status=ArtifactStatus.REGISTERED, size=size, sha256=sha256
        )
        return replace(record, artifact=artifact, etag=stored)

    def _verify(self, record: ArtifactRecord, data_key: bytes, *, size: int, sha256: str) -> str:
        """The verified object's ETag; on a failed check the upload is deleted."""
        artifact_id = record.artifact.id
        try:
            if size > self._limit:
                raise ArtifactTooLarge(self._limit)
            stored = self._objects.head(record.object_key)
            if stored.size != sealed_size(artifact_id, size, record.chunk_size):
                raise ArtifactCorrupt(
                    artifact_id, "size_mismatch", "the object's length does not match the report"
                )
            pinned = replace(record, etag=stored.etag)
            with _verified_object(self._objects, pinned) as read:
                decryption = Decryption(
                    data_key, artifact_id, expected_sha256=sha256, expected_size=size
                )
                for _ in decryption.stream(read):  # verify every chunk through EOF
                    pass
        except ObjectMissing:
            raise ArtifactCorrupt(artifact_id, "missing", "nothing was uploaded") from None
        except (ArtifactCorrupt, ArtifactTooLarge):
            # A replayed register with a false report must not remove a registered
            # artifact's object: only the failure path pays for this read.
            if not self._records.exists(artifact_id):
                self._objects.delete(record.object_key)
            raise
        return stored.etag
