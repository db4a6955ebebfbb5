"""The artifact ciphertext format: AES-256-GCM over fixed-size chunks, streamed.

Layout::

    header  = "RPA1" | chunk_size (u32 BE) | len(artifact_id) (u8) | artifact_id
    chunk_i = AES-256-GCM(key, nonce_i, plaintext_i, aad_i)   (ciphertext + 16-byte tag)
    nonce_i = i (u88 BE) | final (u8)
    aad_i   = header | i (u64 BE) | final (u8)

Every chunk but the last carries exactly ``chunk_size`` plaintext bytes; the
last carries 0..chunk_size bytes and ``final = 1`` (an empty artifact is one
empty final chunk). Each artifact has its own data key, so nonces derived from
the chunk index never repeat under a key. Binding the header (and so the
artifact ID and chunk size) and the index and final flag into every chunk's
AAD makes reordering, truncation, splicing chunks or headers between
artifacts, and a wrong key all fail authentication.

Chunk size: 64 KiB. Memory per stream stays at one chunk (plus the caller's
S3 part buffer); the tag costs 0.02%; a reader releases verified plaintext
every 64 KiB; and each AES-GCM call is long enough that per-call overhead in
Python is negligible next to the cipher (see docs/BENCHMARKS.md).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Iterator

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runplane.domain.errors import ArtifactCorrupt, ArtifactTooLarge

MAGIC = b"RPA1"
CHUNK_SIZE = 64 * 1024
TAG_SIZE = 16
KEY_SIZE = 32

Read = Callable[[int], bytes]


def header(artifact_id: str, chunk_size: int = CHUNK_SIZE) -> bytes:
    encoded = artifact_id.encode("ascii")
    if not 0 < len(encoded) < 256:
        raise ValueError("artifact ids are 1-255 ASCII characters")
    return MAGIC + struct.pack(">IB", chunk_size, len(encoded)) + encoded


def sealed_size(artifact_id: str, plaintext_size: int, chunk_size: int = CHUNK_SIZE) -> int:
    """The exact ciphertext length of ``plaintext_size`` bytes."""
    chunks = max(1, -(-plaintext_size // chunk_size))
    return len(header(artifact_id, chunk_size)) + plaintext_size + chunks * TAG_SIZE


def _nonce(index: int, final: bool) -> bytes:
    return index.to_bytes(11, "big") + (b"\x01" if final else b"\x00")


def _aad(head: bytes, index: int, final: bool) -> bytes:
    return head + struct.pack(">QB", index, 1 if final else 0)


class Encryption:
    """Encrypts one artifact as a stream; ``size`` and ``sha256`` are set once it ends."""

    def __init__(
        self,
        key: bytes,
        artifact_id: str,
        *,
        limit: int | None = None,
        chunk_size: int = CHUNK_SIZE,
    ) -> None:
        if len(key) != KEY_SIZE:
            raise ValueError("artifact keys are 256-bit")
        self._aead = AESGCM(key)
        self._header = header(artifact_id, chunk_size)
        self._limit = limit
        self._chunk_size = chunk_size
        self._digest = hashlib.sha256()
        self.size = 0
        self.sha256: str | None = None

    def stream(self, plaintext: Iterable[bytes]) -> Iterator[bytes]:
        """Yield the header, then each sealed chunk. Raises ``ArtifactTooLarge`` as
        soon as the plaintext passes the limit, before sealing anything past it."""
        yield self._header
        pending = bytearray()
        index = 0
        size = self._chunk_size
        for piece in plaintext:
            self.size += len(piece)
            if self._limit is not None and self.size > self._limit:
                raise ArtifactTooLarge(self._limit)
            self._digest.update(piece)
            pending += piece
            # Keep at least one byte back: only the end of input says which chunk is final.
            if len(pending) > size:
                sealed = 0
                with memoryview(pending) as view:
                    while len(pending) - sealed > size:
                        yield self._seal(index, view[sealed : sealed + size], final=False)
                        sealed += size
                        index += 1
                del pending[:sealed]
        yield self._seal(index, pending, final=True)
        self.sha256 = self._digest.hexdigest()

    def _seal(self, index: int, chunk: bytes | bytearray | memoryview, *, final: bool) -> bytes:
        return self._aead.encrypt(_nonce(index, final), chunk, _aad(self._header, index, final))


def read_exactly(read: Read, size: int) -> bytes:
    """Up to ``size`` bytes, fewer only at end of stream (streams may return short reads)."""
    parts = []
    remaining = size
    while remaining > 0:
        piece = read(remaining)
        if not piece:
            break
        parts.append(piece)
        remaining -= len(piece)
    return b"".join(parts)


class Decryption:
    """Decrypts one artifact's ciphertext stream, verifying it through EOF.

    ``stream`` yields plaintext one authenticated chunk at a time; it raises
    ``ArtifactCorrupt`` on any tampering, and only after the final chunk has it
    checked the size and SHA-256 it was told to expect. A consumer must treat
    what it received as unusable unless the stream ended without error.
    """

    def __init__(
        self,
        key: bytes,
        artifact_id: str,
        *,
        expected_sha256: str | None = None,
        expected_size: int | None = None,
    ) -> None:
        self._aead = AESGCM(key)
        self._artifact_id = artifact_id
        self._expected_sha256 = expected_sha256
        self._expected_size = expected_size
        self.size = 0
        self.sha256: str | None = None

    def _corrupt(self, reason: str, detail: str) -> ArtifactCorrupt:
        return ArtifactCorrupt(self._artifact_id, reason, detail)

    def _read_header(self, read: Read) -> tuple[bytes, int]:
        fixed = read_exactly(read, len(MAGIC) + 5)
        if len(fixed) < len(MAGIC) + 5 or fixed[: len(MAGIC)] != MAGIC:
            raise self._corrupt("bad_header", "not an artifact ciphertext")
        chunk_size, id_length = struct.unpack(">IB", fixed[len(MAGIC) :])
        named = read_exactly(read, id_length)
        if named != self._artifact_id.encode("ascii"):
            raise self._corrupt("foreign_artifact", "the ciphertext belongs to another artifact")
        if not 0 < chunk_size <= 16 * 1024 * 1024:
            raise self._corrupt("bad_header", "impossible chunk size")
        return fixed + named, chunk_size

    def stream(self, read: Read) -> Iterator[bytes]:
        head, chunk_size = self._read_header(read)
        digest = hashlib.sha256()
        sealed_size = chunk_size + TAG_SIZE
        index = 0
        current = read_exactly(read, sealed_size)
        while True:
            if len(current) < TAG_SIZE:
                raise self._corrupt("truncated", f"the stream ends inside chunk {index}")
            # A full chunk followed by more bytes is not final; anything else must be.
            following = read_exactly(read, sealed_size) if len(current) == sealed_size else b""
            final = not following
            try:
                chunk = self._aead.decrypt(_nonce(index, final), current, _aad(head, index, final))
            except InvalidTag:
                if final:
                    raise self._corrupt(
                        "truncated_or_tampered",
                        f"chunk {index} is not a valid final chunk under this key",
                    ) from None
                raise self._corrupt(
                    "tampered", f"chunk {index} does not authenticate under this key"
                ) from None
            digest.update(chunk)
            self.size += len(chunk)
            yield chunk
            if final:
                break
            current = following
            index += 1
        self.sha256 = digest.hexdigest()
        if self._expected_size is not None and self.size != self._expected_size:
            raise self._corrupt(
                "size_mismatch", f"{self.size} bytes, {self._expected_size} recorded"
            )
        if self._expected_sha256 is not None and self.sha256 != self._expected_sha256:
            raise self._corrupt("digest_mismatch", "the plaintext SHA-256 differs from the record")
