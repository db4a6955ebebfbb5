"""A runner session moves ciphertext through URLs; only verified artifacts become readable."""

from __future__ import annotations

import hashlib
import os

import pytest
import requests

from runplane.adapters.envelope import CHUNK_SIZE, Encryption
from runplane.domain.artifacts import ArtifactKind, ArtifactStatus
from runplane.domain.entities import Organization
from runplane.domain.errors import ArtifactCorrupt, ArtifactTooLarge, NotFound
from runplane.services.artifacts import SandboxTransfers, object_key
from tests.integration.conftest import BUCKET, Stack
from tests.integration.sandbox import fetch, put, put_raw, session_for

PLAN = ArtifactKind.PLAN


def test_a_session_downloads_its_inputs_and_nothing_else(stack: Stack, org: Organization) -> None:
    config = stack.artifacts.put(org.id, ArtifactKind.CONFIGURATION, [b"terraform {}"])
    unrelated = stack.artifacts.put(org.id, ArtifactKind.CONFIGURATION, [b"not yours"])
    session = session_for(stack, org.id, inputs=[config.id]).session

    assert fetch(stack.transfers.download(session, config.id)) == b"terraform {}"
    with pytest.raises(NotFound):
        stack.transfers.download(session, unrelated.id)


def test_an_upload_becomes_readable_only_once_registered(stack: Stack, org: Organization) -> None:
    session = session_for(stack, org.id).session
    plan = os.urandom(2 * CHUNK_SIZE + 5)
    grant = stack.transfers.begin_upload(session, PLAN)
    assert stack.artifacts.describe(org.id, grant.artifact_id).status is ArtifactStatus.PENDING
    with pytest.raises(NotFound), stack.artifacts.open(org.id, grant.artifact_id):
        pass

    size, sha256 = put(grant, plan)
    artifact = stack.transfers.register(session, grant.artifact_id, size=size, sha256=sha256)

    assert artifact.status is ArtifactStatus.REGISTERED
    with stack.artifacts.open(org.id, artifact.id) as plaintext:
        assert b"".join(plaintext) == plan


def _registration_fails(stack: Stack, session, grant, *, size: int, sha256: str) -> ArtifactCorrupt:  # type: ignore[no-untyped-def]
    with pytest.raises(ArtifactCorrupt) as corrupt:
        stack.transfers.register(session, grant.artifact_id, size=size, sha256=sha256)
    assert object_key(session.organization_id, grant.artifact_id) not in stack.bucket_keys()
    assert stack.artifacts_status(grant.artifact_id) is ArtifactStatus.PENDING
    return corrupt.value


def test_a_false_digest_report_fails_registration(stack: Stack, org: Organization) -> None:
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    size, _ = put(grant, b"the real plan")

    failure = _registration_fails(
        stack, session, grant, size=size, sha256=hashlib.sha256(b"another plan").hexdigest()
    )
    assert failure.reason == "digest_mismatch"


def test_a_truncated_upload_fails_registration(stack: Stack, org: Organization) -> None:
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    plan = os.urandom(3 * CHUNK_SIZE)
    encryption = Encryption(grant.data_key, grant.artifact_id)
    body = b"".join(encryption.stream([plan]))
    put_raw(grant.url, body[: -(CHUNK_SIZE + 16)])

    failure = _registration_fails(
        stack, session, grant, size=len(plan), sha256=hashlib.sha256(plan).hexdigest()
    )
    assert failure.reason == "size_mismatch"


def test_a_truncated_upload_with_a_matching_report_fails_authentication(
    stack: Stack, org: Organization
) -> None:
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    plan = os.urandom(3 * CHUNK_SIZE)
    body = b"".join(Encryption(grant.data_key, grant.artifact_id).stream([plan]))
    cut = body[: -(CHUNK_SIZE + 16)]
    # The sandbox lies consistently: it reports the size of what it uploaded.
    short = plan[: 2 * CHUNK_SIZE]
    put_raw(grant.url, cut)

    failure = _registration_fails(
        stack, session, grant, size=len(short), sha256=hashlib.sha256(short).hexdigest()
    )
    assert failure.reason in {"truncated_or_tampered", "tampered"}


def test_another_artifacts_ciphertext_fails_registration(stack: Stack, org: Organization) -> None:
    session = session_for(stack, org.id).session
    mine = stack.transfers.begin_upload(session, PLAN)
    theirs = stack.transfers.begin_upload(session, PLAN)
    plan = b"plan bytes"
    foreign = b"".join(Encryption(theirs.data_key, theirs.artifact_id).stream([plan]))
    put_raw(mine.url, foreign)

    failure = _registration_fails(
        stack, session, mine, size=len(plan), sha256=hashlib.sha256(plan).hexdigest()
    )
    assert failure.reason == "foreign_artifact"


def test_an_object_swapped_after_upload_fails_registration(stack: Stack, org: Organization) -> None:
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    size, sha256 = put(grant, b"honest plan")
    # Someone holding the URL replaces the object with same-length garbage.
    key = object_key(org.id, grant.artifact_id)
    original = stack.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()  # type: ignore[attr-defined]
    put_raw(grant.url, os.urandom(len(original)))

    failure = _registration_fails(stack, session, grant, size=size, sha256=sha256)
    assert failure.reason in {"tampered", "truncated_or_tampered", "bad_header", "foreign_artifact"}


def test_an_object_swapped_after_registration_is_never_served(
    stack: Stack, org: Organization
) -> None:
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    size, sha256 = put(grant, b"plan v1")
    stack.transfers.register(session, grant.artifact_id, size=size, sha256=sha256)
    # The sandbox still has the key and the URL: it uploads a valid different plan.
    put(grant, b"plan v2")

    with (
        pytest.raises(ArtifactCorrupt) as corrupt,
        stack.artifacts.open(org.id, grant.artifact_id) as plaintext,
    ):
        b"".join(plaintext)
    assert corrupt.value.reason == "replaced"


def test_only_the_uploading_session_registers(stack: Stack, org: Organization) -> None:
    uploader = session_for(stack, org.id).session
    other = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(uploader, PLAN)
    size, sha256 = put(grant, b"plan")

    with pytest.raises(NotFound):
        stack.transfers.register(other, grant.artifact_id, size=size, sha256=sha256)
    stack.transfers.register(uploader, grant.artifact_id, size=size, sha256=sha256)
    with pytest.raises(NotFound):
        stack.transfers.register(uploader, grant.artifact_id, size=size, sha256=sha256)


def test_an_oversized_report_is_refused_without_reading(stack: Stack, org: Organization) -> None:
    transfers = SandboxTransfers(stack.clock, stack.ids, stack.objects, stack.keys, limit=10)
    session = session_for(stack, org.id).session
    grant = transfers.begin_upload(session, PLAN)
    requests.put(grant.url, data=b"x" * 100, timeout=30).raise_for_status()

    with pytest.raises(ArtifactTooLarge):
        transfers.register(session, grant.artifact_id, size=11, sha256="0" * 64)
    assert stack.bucket_keys() == []


def test_nothing_uploaded_fails_registration(stack: Stack, org: Organization) -> None:
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    with pytest.raises(ArtifactCorrupt) as corrupt:
        stack.transfers.register(session, grant.artifact_id, size=0, sha256="0" * 64)
    assert corrupt.value.reason == "missing"
