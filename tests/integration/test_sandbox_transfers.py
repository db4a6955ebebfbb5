"""A runner session moves ciphertext through URLs; only verified artifacts become readable."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest
import requests

from runplane.adapters.envelope import CHUNK_SIZE, Encryption
from runplane.domain.artifacts import ArtifactKind, ArtifactStatus
from runplane.domain.entities import Organization
from runplane.domain.errors import (
    ArtifactCorrupt,
    ArtifactTooLarge,
    ConcurrentChange,
    NotFound,
    UploadTicketRefused,
)
from runplane.domain.ids import IdKind
from runplane.domain.upload_tickets import TICKET_LIFETIME
from runplane.services.artifacts import SandboxTransfers, UploadGrant, object_key
from runplane.store.artifact_records import DynamoArtifactRecords
from tests.integration.conftest import BUCKET, Stack
from tests.integration.dynamodb_requests import DynamoDBRequests
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
    before = stack.scan()
    grant = stack.transfers.begin_upload(session, PLAN)
    # Beginning an upload records nothing: there is no artifact to see or open.
    assert stack.scan() == before
    with pytest.raises(NotFound):
        stack.artifacts.describe(org.id, grant.artifact_id)
    with pytest.raises(NotFound), stack.artifacts.open(org.id, grant.artifact_id):
        pass

    size, sha256 = put(grant, plan)
    artifact = stack.transfers.register(
        session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
    )

    assert artifact.status is ArtifactStatus.REGISTERED
    with stack.artifacts.open(org.id, artifact.id) as plaintext:
        assert b"".join(plaintext) == plan


def _registration_fails(stack: Stack, session, grant, *, size: int, sha256: str) -> ArtifactCorrupt:  # type: ignore[no-untyped-def]
    before = stack.scan()
    with pytest.raises(ArtifactCorrupt) as corrupt:
        stack.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )
    assert object_key(session.organization_id, grant.artifact_id) not in stack.bucket_keys()
    assert stack.scan() == before
    with pytest.raises(NotFound):
        stack.artifacts.describe(session.organization_id, grant.artifact_id)
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
    stack.transfers.register(
        session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
    )
    # The sandbox still has the key and the URL: it uploads a valid different plan.
    put(grant, b"plan v2")

    with (
        pytest.raises(ArtifactCorrupt) as corrupt,
        stack.artifacts.open(org.id, grant.artifact_id) as plaintext,
    ):
        b"".join(plaintext)
    assert corrupt.value.reason == "replaced"


def test_only_the_uploading_session_registers(stack: Stack, org: Organization) -> None:
    # Given an upload granted to one session and a second session of the same organization
    uploader = session_for(stack, org.id).session
    other = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(uploader, PLAN)
    size, sha256 = put(grant, b"plan")
    before = stack.scan()

    # When the other session presents the uploader's ticket, it is refused, writing nothing
    with pytest.raises(UploadTicketRefused) as refused:
        stack.transfers.register(
            other, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )
    assert refused.value.reason == "not_issued"
    assert stack.scan() == before

    # Then the uploader registers it once; a second register is a conflict, writing nothing
    stack.transfers.register(
        uploader, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
    )
    registered = stack.scan()
    with pytest.raises(ConcurrentChange):
        stack.transfers.register(
            uploader, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )
    assert stack.scan() == registered
    assert stack.artifacts.read(org.id, grant.artifact_id) == b"plan"


def _ticket(grant: UploadGrant, **changes: object) -> str:
    body = json.loads(base64.urlsafe_b64decode(grant.ticket))
    body.update(changes)
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode("ascii")


@pytest.mark.parametrize(
    ("forge", "reason"),
    [
        ("kind", "not_issued"),
        ("nonce", "not_issued"),
        ("issued", "not_issued"),
        ("key", "not_issued"),
        ("garbage", "malformed"),
        ("version", "malformed"),
    ],
)
def test_a_forged_ticket_is_refused_writing_nothing(
    stack: Stack, org: Organization, forge: str, reason: str
) -> None:
    # Given a session's uploaded plan and a second upload of its own (a real wrapped key)
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    theirs = stack.transfers.begin_upload(session, PLAN)
    size, sha256 = put(grant, b"plan")
    body = json.loads(base64.urlsafe_b64decode(grant.ticket))
    forged = {
        "kind": _ticket(grant, kind=ArtifactKind.LOGS.value),
        "nonce": _ticket(grant, nonce=stack.ids.new(IdKind.UPLOAD)),
        "issued": _ticket(grant, issued=body["issued"] + 1),
        "key": _ticket(grant, key=json.loads(base64.urlsafe_b64decode(theirs.ticket))["key"]),
        "garbage": "not-a-ticket",
        "version": _ticket(grant, v=2),
    }[forge]
    before = stack.scan()

    # When it registers the upload with a forged ticket
    with pytest.raises(UploadTicketRefused) as refused:
        stack.transfers.register(
            session, grant.artifact_id, ticket=forged, size=size, sha256=sha256
        )

    # Then it is refused, nothing is written and nothing becomes readable
    assert refused.value.reason == reason
    assert stack.scan() == before
    with pytest.raises(NotFound):
        stack.artifacts.describe(org.id, grant.artifact_id)


def test_an_expired_ticket_is_refused_writing_nothing(stack: Stack, org: Organization) -> None:
    # Given an upload whose ticket has outlived its lifetime
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    size, sha256 = put(grant, b"plan")
    stack.clock.current += TICKET_LIFETIME
    before = stack.scan()

    # When the session registers it
    with pytest.raises(UploadTicketRefused) as refused:
        stack.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )

    # Then it is refused as expired and nothing is written
    assert refused.value.reason == "expired"
    assert stack.scan() == before


def test_a_false_report_replayed_after_registration_keeps_the_artifact(
    stack: Stack, org: Organization
) -> None:
    # Given a registered upload
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    size, sha256 = put(grant, b"plan")
    stack.transfers.register(
        session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
    )

    # When its session registers it again with a false digest
    with pytest.raises(ArtifactCorrupt):
        stack.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=size, sha256="0" * 64
        )

    # Then the registered artifact's object is kept and still reads back
    assert stack.artifacts.read(org.id, grant.artifact_id) == b"plan"


def test_an_upload_is_one_dynamodb_write_and_no_read(
    stack: Stack, org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a session
    session = session_for(stack, org.id).session
    requests_sent = DynamoDBRequests(monkeypatch)

    # When it begins an upload, uploads and registers it
    grant = stack.transfers.begin_upload(session, PLAN)
    begun = list(requests_sent.operations)
    size, sha256 = put(grant, b"plan")
    stack.transfers.register(
        session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
    )

    # Then beginning sent nothing to DynamoDB and registering one conditional write
    assert begun == []
    assert len(requests_sent.operations) == 1
    assert requests_sent.operations[0] in {"PutItem", "TransactWriteItems"}
    assert stack.artifacts.read(org.id, grant.artifact_id) == b"plan"


def test_an_oversized_report_is_refused_without_reading(stack: Stack, org: Organization) -> None:
    transfers = SandboxTransfers(
        stack.clock, stack.ids, stack.objects, stack.keys, limit=10, records=DynamoArtifactRecords()
    )
    session = session_for(stack, org.id).session
    grant = transfers.begin_upload(session, PLAN)
    requests.put(grant.url, data=b"x" * 100, timeout=30).raise_for_status()

    with pytest.raises(ArtifactTooLarge):
        transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=11, sha256="0" * 64
        )
    assert stack.bucket_keys() == []


def test_nothing_uploaded_fails_registration(stack: Stack, org: Organization) -> None:
    session = session_for(stack, org.id).session
    grant = stack.transfers.begin_upload(session, PLAN)
    with pytest.raises(ArtifactCorrupt) as corrupt:
        stack.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=0, sha256="0" * 64
        )
    assert corrupt.value.reason == "missing"
