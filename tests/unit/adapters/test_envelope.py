"""The chunked AES-256-GCM artifact format: round trips and every tamper case."""

from __future__ import annotations

import hashlib
import io
import itertools
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.adapters.envelope import CHUNK_SIZE, TAG_SIZE, Decryption, Encryption, header
from runplane.domain.errors import ArtifactCorrupt, ArtifactTooLarge

KEY = bytes(range(32))
OTHER_KEY = bytes(reversed(range(32)))
ART = "art-aaaaaaaaaaaaaaaaaaaaaaaaaa"
OTHER = "art-bbbbbbbbbbbbbbbbbbbbbbbbbb"
SMALL = 16  # a tiny chunk size makes multi-chunk cases cheap


def seal(plaintext: bytes, *, artifact: str = ART, key: bytes = KEY, chunk: int = SMALL) -> bytes:
    pieces = [plaintext[i : i + 7] for i in range(0, len(plaintext), 7)] or [b""]
    return b"".join(Encryption(key, artifact, chunk_size=chunk).stream(pieces))


def open_(ciphertext: bytes, *, artifact: str = ART, key: bytes = KEY, **expect: object) -> bytes:
    stream = io.BytesIO(ciphertext)
    return b"".join(Decryption(key, artifact, **expect).stream(stream.read))  # type: ignore[arg-type]


def split(ciphertext: bytes, artifact: str = ART, chunk: int = SMALL) -> tuple[bytes, list[bytes]]:
    head = len(header(artifact, chunk))
    body = ciphertext[head:]
    sealed = chunk + TAG_SIZE
    return ciphertext[:head], [body[i : i + sealed] for i in range(0, len(body), sealed)]


@pytest.mark.parametrize("size", [0, 1, SMALL - 1, SMALL, SMALL + 1, 10 * SMALL, 10 * SMALL + 3])
def test_round_trip_at_every_boundary(size: int) -> None:
    plaintext = os.urandom(size)
    encryption = Encryption(KEY, ART, chunk_size=SMALL)
    ciphertext = b"".join(encryption.stream([plaintext]))

    assert encryption.size == size
    assert encryption.sha256 == hashlib.sha256(plaintext).hexdigest()
    assert open_(ciphertext, expected_sha256=encryption.sha256, expected_size=size) == plaintext


@pytest.mark.parametrize("size", [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 5 * CHUNK_SIZE])
def test_round_trip_with_the_production_chunk_size(size: int) -> None:
    plaintext = os.urandom(size)
    ciphertext = seal(plaintext, chunk=CHUNK_SIZE)
    chunks = max(1, -(-size // CHUNK_SIZE))
    assert len(ciphertext) == len(header(ART)) + size + chunks * TAG_SIZE
    assert open_(ciphertext) == plaintext


@settings(max_examples=60, deadline=None)
@given(plaintext=st.binary(max_size=200), cuts=st.lists(st.integers(0, 200), max_size=6))
def test_any_input_split_round_trips(plaintext: bytes, cuts: list[int]) -> None:
    points = sorted({0, len(plaintext), *(c for c in cuts if c <= len(plaintext))})
    pieces = [plaintext[a:b] for a, b in itertools.pairwise(points)]
    ciphertext = b"".join(Encryption(KEY, ART, chunk_size=SMALL).stream(pieces))
    assert open_(ciphertext) == plaintext


def test_reordered_chunks_fail() -> None:
    head, chunks = split(seal(os.urandom(5 * SMALL + 1)))
    chunks[1], chunks[2] = chunks[2], chunks[1]
    with pytest.raises(ArtifactCorrupt) as corrupt:
        open_(head + b"".join(chunks))
    assert corrupt.value.reason == "tampered"


@pytest.mark.parametrize("keep", [0, 1, 3])
def test_dropping_the_tail_at_a_chunk_boundary_fails(keep: int) -> None:
    head, chunks = split(seal(os.urandom(5 * SMALL)))
    with pytest.raises(ArtifactCorrupt) as corrupt:
        open_(head + b"".join(chunks[:keep]))
    assert corrupt.value.reason in {"truncated", "truncated_or_tampered"}


def test_cutting_inside_a_chunk_fails() -> None:
    ciphertext = seal(os.urandom(3 * SMALL))
    for cut in (1, 5, TAG_SIZE, len(ciphertext) - 1):
        with pytest.raises(ArtifactCorrupt):
            open_(ciphertext[:-cut])


def test_trailing_bytes_fail() -> None:
    for size in (SMALL, SMALL + 5):
        with pytest.raises(ArtifactCorrupt):
            open_(seal(os.urandom(size)) + b"x")


def test_a_chunk_spliced_from_another_artifact_fails_even_under_the_same_key() -> None:
    head, chunks = split(seal(os.urandom(3 * SMALL)))
    _, foreign = split(seal(os.urandom(3 * SMALL), artifact=OTHER), OTHER)
    chunks[1] = foreign[1]
    with pytest.raises(ArtifactCorrupt) as corrupt:
        open_(head + b"".join(chunks))
    assert corrupt.value.reason == "tampered"


def test_another_artifacts_whole_ciphertext_is_refused() -> None:
    with pytest.raises(ArtifactCorrupt) as corrupt:
        open_(seal(b"other content", artifact=OTHER))
    assert corrupt.value.reason == "foreign_artifact"


def test_a_header_naming_this_artifact_on_another_artifacts_chunks_fails() -> None:
    _, foreign = split(seal(os.urandom(2 * SMALL), artifact=OTHER), OTHER)
    with pytest.raises(ArtifactCorrupt):
        open_(header(ART, SMALL) + b"".join(foreign))


def test_a_wrong_key_fails() -> None:
    with pytest.raises(ArtifactCorrupt):
        open_(seal(b"secret"), key=OTHER_KEY)


def test_a_flipped_bit_anywhere_fails() -> None:
    ciphertext = seal(os.urandom(2 * SMALL + 3))
    for position in range(len(ciphertext)):
        tampered = bytearray(ciphertext)
        tampered[position] ^= 0x01
        with pytest.raises(ArtifactCorrupt):
            open_(bytes(tampered))


def test_a_recorded_digest_or_size_that_differs_fails_at_the_end() -> None:
    ciphertext = seal(b"hello world")
    with pytest.raises(ArtifactCorrupt) as corrupt:
        open_(ciphertext, expected_sha256=hashlib.sha256(b"other").hexdigest())
    assert corrupt.value.reason == "digest_mismatch"
    with pytest.raises(ArtifactCorrupt) as corrupt:
        open_(ciphertext, expected_size=12)
    assert corrupt.value.reason == "size_mismatch"


def test_garbage_is_not_an_artifact() -> None:
    for garbage in (b"", b"RPA", b"PK\x03\x04 a zip file", os.urandom(100)):
        with pytest.raises(ArtifactCorrupt) as corrupt:
            open_(garbage)
        assert corrupt.value.reason in {"bad_header", "foreign_artifact"}


def test_the_limit_stops_at_the_first_byte_past_it() -> None:
    limit = 3 * SMALL
    at_limit = Encryption(KEY, ART, limit=limit, chunk_size=SMALL)
    assert open_(b"".join(at_limit.stream([b"x" * limit]))) == b"x" * limit

    sealed: list[bytes] = []
    over = Encryption(KEY, ART, limit=limit, chunk_size=SMALL)
    with pytest.raises(ArtifactTooLarge):
        sealed.extend(over.stream([b"x" * limit, b"y"]))
    assert over.sha256 is None


def test_ciphertext_reveals_no_plaintext() -> None:
    plaintext = b"password=hunter2 " * 100
    assert b"hunter2" not in seal(plaintext)
