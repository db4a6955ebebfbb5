"""Envelope-encrypted artifacts in S3 (moto) with KMS data keys, streamed both ways."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest
import requests

from runplane.adapters.envelope import CHUNK_SIZE
from runplane.adapters.object_store import PART_SIZE
from runplane.domain.artifacts import MAX_LAUNCH_ARTIFACT_BYTES, ArtifactKind, ArtifactStatus
from runplane.domain.entities import Organization
from runplane.domain.errors import ArtifactCorrupt, ArtifactTooLarge, NotFound
from runplane.services.artifacts import object_key
from runplane.store.artifact_records import DynamoArtifactRecords
from runplane.store.models import ArtifactItem, artifact_key
from tests.integration.conftest import BUCKET, Stack

CONFIG = ArtifactKind.CONFIGURATION


def read_all(stack: Stack, org: str, artifact_id: str) -> bytes:
    with stack.artifacts.open(org, artifact_id) as plaintext:
        return b"".join(plaintext)


def repeated(block: bytes, total: int) -> Iterator[bytes]:
    """``total`` bytes made of ``block``, produced lazily (never held whole)."""
    sent = 0
    while sent < total:
        piece = block[: total - sent]
        sent += len(piece)
        yield piece


@pytest.mark.parametrize(
    "size", [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, PART_SIZE + 3 * CHUNK_SIZE + 7]
)
def test_round_trip_through_s3_and_kms(stack: Stack, org: Organization, size: int) -> None:
    plaintext = os.urandom(size)

    artifact = stack.artifacts.put(org.id, CONFIG, [plaintext[:1000], plaintext[1000:]])

    assert artifact.size == size
    assert artifact.sha256 == hashlib.sha256(plaintext).hexdigest()
    assert read_all(stack, org.id, artifact.id) == plaintext
    stored = stack.s3.get_object(Bucket=BUCKET, Key=object_key(org.id, artifact.id))  # type: ignore[attr-defined]
    body = stored["Body"].read()
    assert size < 32 or plaintext[:32] not in body


def _s3_calls(stack: Stack) -> list[str]:
    """The S3 operations the stack's client sends from now on, by name."""
    calls: list[str] = []
    events = stack.s3.meta.events  # type: ignore[attr-defined]
    events.register("before-call.s3.*", lambda model, **_: calls.append(model.name))
    return calls


@pytest.mark.parametrize(
    ("size", "operations"),
    [
        (0, ["PutObject"]),
        (PART_SIZE - 1, ["PutObject"]),
        (
            PART_SIZE,
            ["CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"],
        ),
        (
            PART_SIZE + 1,
            ["CreateMultipartUpload", "UploadPart", "UploadPart", "CompleteMultipartUpload"],
        ),
    ],
)
def test_an_object_within_its_first_part_is_one_put_and_a_longer_one_is_uploaded_in_parts(
    stack: Stack, size: int, operations: list[str]
) -> None:
    # Given a stream of ``size`` bytes in small pieces
    block = os.urandom(64 * 1024)
    calls = _s3_calls(stack)

    # When it is uploaded
    stored = stack.objects.upload_stream("plain/sized", repeated(block, size))

    # Then it took the requests its size needs, and the object is the stream
    assert calls == operations
    assert stored.size == size
    body = stack.s3.get_object(Bucket=BUCKET, Key="plain/sized")["Body"].read()  # type: ignore[attr-defined]
    assert len(body) == size
    assert hashlib.sha256(body).digest() == hashlib.sha256(b"".join(repeated(block, size))).digest()


def test_a_stream_failing_within_its_first_part_sends_nothing(stack: Stack) -> None:
    # Given a stream that fails after its first piece
    def failing() -> Iterator[bytes]:
        yield b"the first piece"
        raise OSError("the source went away")

    calls = _s3_calls(stack)

    # When it is uploaded, then the failure is the caller's and no object exists
    with pytest.raises(OSError, match="went away"):
        stack.objects.upload_stream("plain/failing", failing())
    assert calls == []
    assert "plain/failing" not in stack.bucket_keys()


def test_the_cap_accepts_exactly_100_mb_and_refuses_one_byte_more(
    stack: Stack, org: Organization
) -> None:
    block = os.urandom(1024 * 1024)
    at_cap = stack.artifacts.put(org.id, CONFIG, repeated(block, MAX_LAUNCH_ARTIFACT_BYTES))
    assert at_cap.size == MAX_LAUNCH_ARTIFACT_BYTES
    objects_before, items_before = stack.bucket_keys(), stack.scan()

    with pytest.raises(ArtifactTooLarge) as too_large:
        stack.artifacts.put(org.id, CONFIG, repeated(block, MAX_LAUNCH_ARTIFACT_BYTES + 1))

    assert too_large.value.http_status == 413
    assert stack.bucket_keys() == objects_before
    assert stack.scan() == items_before
    uploads = stack.s3.list_multipart_uploads(Bucket=BUCKET)  # type: ignore[attr-defined]
    assert not uploads.get("Uploads")


def test_another_organization_cannot_read_it(stack: Stack, org: Organization) -> None:
    artifact = stack.artifacts.put(org.id, CONFIG, [b"config"])
    other = stack.tenancy.create_organization("globex")
    with pytest.raises(NotFound):
        read_all(stack, other.id, artifact.id)


def test_an_object_replaced_in_the_bucket_is_never_served(stack: Stack, org: Organization) -> None:
    artifact = stack.artifacts.put(org.id, CONFIG, [b"original"])
    impostor = stack.artifacts.put(org.id, CONFIG, [b"impostor"])
    key = object_key(org.id, artifact.id)
    foreign = stack.s3.get_object(Bucket=BUCKET, Key=object_key(org.id, impostor.id))["Body"].read()  # type: ignore[attr-defined]
    stack.s3.put_object(Bucket=BUCKET, Key=key, Body=foreign)  # type: ignore[attr-defined]

    with pytest.raises(ArtifactCorrupt) as corrupt:
        read_all(stack, org.id, artifact.id)
    assert corrupt.value.reason == "replaced"


def test_a_data_key_moved_to_another_artifact_is_refused_by_kms(
    stack: Stack, org: Organization
) -> None:
    first = stack.artifacts.put(org.id, CONFIG, [b"first"])
    second = stack.artifacts.put(org.id, CONFIG, [b"second"])
    first_item = ArtifactItem.get(*artifact_key(first.id))
    second_item = ArtifactItem.get(*artifact_key(second.id))
    second_item.wrapped_key = first_item.wrapped_key
    second_item.save()

    with pytest.raises(ArtifactCorrupt) as corrupt:
        read_all(stack, org.id, second.id)
    assert corrupt.value.reason == "key_unavailable"


def test_an_inbox_upload_is_encrypted_into_an_artifact_and_the_plaintext_removed(
    stack: Stack, org: Organization
) -> None:
    archive = os.urandom(3 * CHUNK_SIZE + 11)
    upload = stack.artifacts.new_inbox_upload(org.id)
    requests.put(upload.url, data=archive, timeout=30).raise_for_status()

    artifact = stack.artifacts.ingest(org.id, CONFIG, upload.upload_id)

    assert read_all(stack, org.id, artifact.id) == archive
    assert stack.bucket_keys() == [object_key(org.id, artifact.id)]


def test_an_oversized_inbox_upload_leaves_nothing_behind(stack: Stack, org: Organization) -> None:
    small = type(stack.artifacts)(
        stack.clock,
        stack.ids,
        stack.objects,
        stack.keys,
        limit=2 * CHUNK_SIZE,
        records=DynamoArtifactRecords(),
    )
    upload = small.new_inbox_upload(org.id)
    requests.put(upload.url, data=os.urandom(2 * CHUNK_SIZE + 1), timeout=30).raise_for_status()
    items_before = stack.scan()

    with pytest.raises(ArtifactTooLarge):
        small.ingest(org.id, CONFIG, upload.upload_id)

    assert stack.bucket_keys() == []
    assert stack.scan() == items_before


def test_a_missing_inbox_upload_is_not_found(stack: Stack, org: Organization) -> None:
    with pytest.raises(NotFound):
        stack.artifacts.ingest(org.id, CONFIG, "upl-" + "a" * 26)


def test_status_is_registered_for_server_side_artifacts(stack: Stack, org: Organization) -> None:
    artifact = stack.artifacts.put(org.id, CONFIG, [b"x"])
    assert stack.artifacts.describe(org.id, artifact.id).status is ArtifactStatus.REGISTERED
