"""Run logs: live chunks stored while a phase runs, and reads by byte offset.

While a phase runs, its runner sends the redacted head of its log in numbered chunks;
each is envelope-encrypted as its own artifact and recorded by an immutable chunk
(``LogChunkStore``, services/repositories/operations.py). Once the runner uploads its
final log artifact (recorded on the attempt), reads come from that artifact: it is the
source of truth, and it starts with exactly the streamed bytes, so offsets stay valid
across the switch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runplane.domain.artifacts import Artifact, ArtifactKind
from runplane.domain.capabilities import Phase
from runplane.domain.clock import Clock
from runplane.domain.errors import ArtifactTooLarge, Conflict, InvalidInput, NotFound
from runplane.domain.identity import Principal
from runplane.domain.logs import (
    DEFAULT_READ_BYTES,
    LIVE_LOG_BYTES,
    MAX_CHUNK_BYTES,
    MAX_CHUNKS,
    MIN_READ_BYTES,
    LogChunk,
    utf8_end,
)
from runplane.domain.parts import OPEN_ATTEMPT, AttemptBody
from runplane.services.artifacts import ArtifactStore
from runplane.services.runner_api import session_of
from runplane.services.runs import Runs

if TYPE_CHECKING:
    from runplane.services.repositories import RunReader
    from runplane.services.repositories.operations import LogChunkStore


@dataclass(frozen=True)
class LogRead:
    """Bytes ``[offset, next_offset)`` of a phase's log; ``complete``: nothing more
    will be added to it."""

    data: bytes
    offset: int
    next_offset: int
    length: int
    """Bytes of the log so far."""
    complete: bool
    source: str
    """``final`` (the uploaded log artifact) or ``live`` (the streamed chunks)."""

    @property
    def at_end(self) -> bool:
        """The read reached the end of a complete log."""
        return self.complete and self.next_offset >= self.length


class RunLogs:
    def __init__(
        self,
        clock: Clock,
        artifacts: ArtifactStore,
        runs: Runs,
        *,
        reader: RunReader,
        chunks: LogChunkStore[Any],
    ) -> None:
        self._clock = clock
        self._artifacts = artifacts
        self._runs = runs
        self._reader = reader
        # Its writes are the store's own kind, committed with the artifact's record.
        self._chunks = chunks

    # -- the runner's side ----------------------------------------------------------------

    def store_chunk(
        self, principal: Principal, sequence: int, offset: int, data: bytes
    ) -> dict[str, int | bool]:
        """Store one live chunk of the session's attempt, once.

        A resend of a stored chunk (same number, offset and bytes) is acknowledged
        again without writing; different bytes under a stored number are a conflict.
        """
        session = session_of(principal)
        binding = session.binding
        self._check_chunk(sequence, offset, data)
        part = f"attempt#{binding.phase.value}"
        # No read first: the session's authentication has just read its attempt, and
        # the chunk's one transaction is conditioned on that attempt being open and
        # on the chunk's number being free (a runner call: keep it cheap). A resend
        # is told apart by that refusal, and then read.
        digest = hashlib.sha256(data).hexdigest()
        created_at = self._clock.now()

        def chunk_of(artifact: Artifact) -> LogChunk:
            return LogChunk(
                run_id=binding.run_id,
                organization_id=session.organization_id,
                attempt_id=binding.attempt_id,
                phase=binding.phase.value,
                sequence=sequence,
                offset=offset,
                size=len(data),
                sha256=digest,
                artifact_id=artifact.id,
                created_at=created_at,
            )

        try:
            artifact = self._artifacts.put(
                session.organization_id,
                ArtifactKind.LOGS,
                [data],
                together=lambda artifact: self._chunks.put(chunk_of(artifact), part, OPEN_ATTEMPT),
            )
        except Conflict:
            # Refused with the artifact's record: nothing of this call was stored. A
            # resend is acknowledged again, even once the attempt has ended (a store
            # may report any of the refused conditions).
            stored = self._chunks.get(binding.run_id, binding.attempt_id, sequence)
            if stored is None:
                raise
            return self._replayed(stored, offset, digest)
        return {"sequence": sequence, "next_offset": chunk_of(artifact).end, "replayed": False}

    @staticmethod
    def _check_chunk(sequence: int, offset: int, data: bytes) -> None:
        if not 0 <= sequence < MAX_CHUNKS:
            raise InvalidInput(
                f"a live log has chunks 0 to {MAX_CHUNKS - 1}; past that, only the final "
                "log is kept",
                "/sequence",
            )
        if offset < 0 or (sequence == 0 and offset != 0):
            raise InvalidInput("chunk 0 starts at byte 0; offsets are not negative", "/offset")
        if not data:
            raise InvalidInput("a live log chunk carries at least one byte", "/data")
        if len(data) > MAX_CHUNK_BYTES:
            raise ArtifactTooLarge(MAX_CHUNK_BYTES)
        if offset + len(data) > LIVE_LOG_BYTES:
            raise ArtifactTooLarge(LIVE_LOG_BYTES)

    @staticmethod
    def _replayed(stored: LogChunk, offset: int, digest: str) -> dict[str, int | bool]:
        if stored.offset != offset or stored.sha256 != digest:
            raise Conflict(f"live log chunk {stored.sequence} was already stored with other bytes")
        return {"sequence": stored.sequence, "next_offset": stored.end, "replayed": True}

    # -- readers ----------------------------------------------------------------------------

    def read(
        self,
        principal: Principal,
        run_id: str,
        phase: Phase,
        offset: int = 0,
        limit: int | None = None,
    ) -> LogRead:
        """Bytes of the phase's log from ``offset``, at most ``limit`` (404 before the
        phase started). A read never ends inside a UTF-8 character unless the log does."""
        if offset < 0:
            raise InvalidInput("offset is a byte position (0 or more)", "/offset")
        size = DEFAULT_READ_BYTES if limit is None else limit
        if not MIN_READ_BYTES <= size <= DEFAULT_READ_BYTES:
            raise InvalidInput(
                f"limit is between {MIN_READ_BYTES} and {DEFAULT_READ_BYTES} bytes", "/limit"
            )
        run = self._runs.get(principal, run_id)
        attempt = self._reader.parts(run.id).get(f"attempt#{phase.value}")
        if attempt is None:
            raise NotFound(f"{phase.value} log of run", run.id)
        body = AttemptBody.from_body(attempt.body)
        if body.log_artifact_id:
            text = self._final(run.organization_id, body.log_artifact_id, run.id, phase)
            return _slice(text, offset, size, complete=True, source="final")
        chunks = self._chunks.of_attempt(run.id, body.attempt_id)
        complete = attempt.state not in OPEN_ATTEMPT
        return self._live(run.organization_id, chunks, offset, size, complete=complete)

    def _final(self, organization_id: str, artifact_id: str, run_id: str, phase: Phase) -> bytes:
        try:
            artifact = self._artifacts.describe(organization_id, artifact_id)
        except NotFound:
            raise NotFound(f"{phase.value} log of run", run_id) from None
        if artifact.kind is not ArtifactKind.LOGS:
            raise NotFound(f"{phase.value} log of run", run_id)
        return self._artifacts.read(organization_id, artifact.id)

    def _live(
        self,
        organization_id: str,
        chunks: list[LogChunk],
        offset: int,
        size: int,
        *,
        complete: bool,
    ) -> LogRead:
        # Only the contiguous run of chunks counts (the store refuses gaps anyway).
        length = 0
        needed: list[LogChunk] = []
        for chunk in chunks:
            if chunk.offset != length:
                break
            length = chunk.end
            if chunk.end > offset and chunk.offset < offset + size:
                needed.append(chunk)
        parts = [self._artifacts.read(organization_id, chunk.artifact_id) for chunk in needed]
        window = b"".join(parts)
        start = offset - needed[0].offset if needed else 0
        data = window[start : start + size]
        data = data[: utf8_end(data, more=not complete or offset + len(data) < length)]
        return LogRead(data, offset, offset + len(data), length, complete, "live")


def _slice(text: bytes, offset: int, size: int, *, complete: bool, source: str) -> LogRead:
    data = text[offset : offset + size]
    data = data[: utf8_end(data, more=not complete or offset + len(data) < len(text))]
    return LogRead(data, offset, offset + len(data), len(text), complete, source)
