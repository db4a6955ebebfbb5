"""The artifact store's rules over the in-memory records, with a dict for the bucket and a
local wrapping key for KMS: what is stored is what was verified (size, SHA-256, the object
version read), a refused write stores nothing, another organization's artifact is absent,
a discarded one is gone, and a runner session moves only its own inputs and uploads.
Streaming through S3 multipart uploads and KMS itself are tested on moto
(tests/integration/test_artifacts.py, test_sandbox_transfers.py)."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.adapters.envelope import CHUNK_SIZE, Decryption, Encryption
from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactStatus
from runplane.domain.capabilities import Binding, Phase, RunnerSession
from runplane.domain.errors import (
    ArtifactCorrupt,
    ArtifactTooLarge,
    ConcurrentChange,
    InvalidInput,
    NotFound,
    UploadTicketRefused,
)
from runplane.domain.ids import IdKind
from runplane.domain.upload_tickets import TICKET_LIFETIME
from runplane.services.artifacts import (
    ArtifactStore,
    DownloadGrant,
    SandboxTransfers,
    UploadGrant,
    UploadReport,
    inbox_key,
    object_key,
)
from tests.fakes import (
    FakeClock,
    InMemoryArtifactRecords,
    InMemoryObjects,
    LocalDataKeys,
    SeededIds,
)

ORG, OTHER = "org-acme", "org-other"
PLAN, CONFIG = ArtifactKind.PLAN, ArtifactKind.CONFIGURATION
SEED = 11
LIMIT = 4 * CHUNK_SIZE


@dataclass
class ArtifactTier:
    clock: FakeClock
    ids: SeededIds
    records: InMemoryArtifactRecords
    objects: InMemoryObjects
    keys: LocalDataKeys
    artifacts: ArtifactStore
    transfers: SandboxTransfers

    def session(self, org: str = ORG, inputs: tuple[str, ...] = ()) -> RunnerSession:
        return RunnerSession(
            id=self.ids.new(IdKind.SESSION),
            organization_id=org,
            jti=self.ids.new(IdKind.CAPABILITY),
            binding=Binding(
                run_id=self.ids.new(IdKind.RUN),
                attempt_id=self.ids.new(IdKind.ATTEMPT),
                phase=Phase.PLAN,
                sandbox_id=self.ids.new(IdKind.SANDBOX),
            ),
            inputs=inputs,
            expires_at=self.clock.current + timedelta(minutes=15),
        )

    def upload(self, grant: UploadGrant, plaintext: bytes) -> tuple[int, str]:
        """What a runner does with its grant: encrypt with the released key and PUT."""
        encryption = Encryption(grant.data_key, grant.artifact_id)
        self.objects.put_url(grant.url, b"".join(encryption.stream([plaintext])))
        assert encryption.sha256 is not None
        return encryption.size, encryption.sha256

    def fetch(self, grant: DownloadGrant) -> bytes:
        """What a runner does with a download grant: GET the ciphertext and decrypt it."""
        read = io.BytesIO(self.objects.get_url(grant.url)).read
        decryption = Decryption(
            grant.data_key,
            grant.artifact_id,
            expected_sha256=grant.sha256,
            expected_size=grant.size,
        )
        return b"".join(decryption.stream(read))

    def snapshot(self) -> tuple[dict[str, object], dict[str, bytes]]:
        return dict(self.records.records), dict(self.objects.bodies)


@pytest.fixture
def at() -> ArtifactTier:
    clock, ids = FakeClock(datetime(2026, 1, 1, tzinfo=UTC)), SeededIds(SEED)
    records, objects, keys = InMemoryArtifactRecords(), InMemoryObjects(), LocalDataKeys()
    return ArtifactTier(
        clock,
        ids,
        records,
        objects,
        keys,
        ArtifactStore(clock, ids, objects, keys, limit=LIMIT, records=records),
        SandboxTransfers(clock, ids, objects, keys, limit=LIMIT, records=records),
    )


# --- the control plane's own artifacts ---------------------------------------------------


def test_a_stored_artifact_reads_back_only_in_its_own_organization(at: ArtifactTier) -> None:
    # Given an artifact stored from a stream of pieces
    body = bytes(range(256)) * (CHUNK_SIZE // 128)
    artifact = at.artifacts.put(ORG, CONFIG, [body[:1000], body[1000:]])

    # Then it is recorded readable with the size and SHA-256 of what was streamed
    assert artifact.status is ArtifactStatus.REGISTERED
    assert (artifact.size, artifact.sha256) == (len(body), hashlib.sha256(body).hexdigest())
    assert at.records.get(artifact.id).artifact == artifact
    assert at.artifacts.read(ORG, artifact.id) == body
    # And the bucket holds ciphertext only, the record a wrapped key only
    stored = at.objects.bodies[object_key(ORG, artifact.id)]
    assert body[:64] not in stored
    # And another organization sees nothing, as for an unknown artifact
    with pytest.raises(NotFound):
        at.artifacts.describe(OTHER, artifact.id)
    with pytest.raises(NotFound):
        at.artifacts.read(OTHER, artifact.id)
    with pytest.raises(NotFound):
        at.artifacts.read(ORG, "art-unknown")


def test_the_limit_admits_exactly_its_size_and_a_byte_more_stores_nothing(
    at: ArtifactTier,
) -> None:
    # Given an artifact of exactly the limit
    at_limit = at.artifacts.put(ORG, CONFIG, [b"x" * LIMIT])
    assert at_limit.size == LIMIT
    before = at.snapshot()

    # When one a byte longer is stored
    with pytest.raises(ArtifactTooLarge):
        at.artifacts.put(ORG, CONFIG, [b"x" * LIMIT, b"y"])

    # Then nothing is recorded and no object is left
    assert at.snapshot() == before


def test_a_refused_record_leaves_no_object(at: ArtifactTier) -> None:
    # Given the ID the next artifact will take (a twin generator foretells it) already
    # recorded, for another organization's artifact
    taken = SeededIds(SEED).new(IdKind.ARTIFACT)
    theirs = Artifact(taken, OTHER, CONFIG, ArtifactStatus.REGISTERED, 5, "0" * 64, at.clock.now())
    at.records.register(
        theirs,
        object_key=object_key(OTHER, taken),
        wrapped_key=b"w",
        chunk_size=CHUNK_SIZE,
        etag='"e"',
    )
    before = at.snapshot()

    # When an artifact is stored and its record is refused
    with pytest.raises(ConcurrentChange):
        at.artifacts.put(ORG, CONFIG, [b"second"])

    # Then the object it uploaded is removed and the record there stands
    assert at.snapshot() == before
    assert at.records.get(taken).artifact == theirs


def test_a_discarded_artifact_is_gone_for_every_reader(at: ArtifactTier) -> None:
    # Given an artifact that is a runner session's input
    artifact = at.artifacts.put(ORG, CONFIG, [b"terraform {}"])
    session = at.session(inputs=(artifact.id,))

    # When it is discarded
    at.artifacts.discard(artifact.id)

    # Then neither the control plane nor the session can read it, and its object is gone
    with pytest.raises(NotFound):
        at.artifacts.read(ORG, artifact.id)
    with pytest.raises(NotFound):
        at.transfers.download(session, artifact.id)
    assert at.snapshot() == ({}, {})
    # And discarding it again is NotFound
    with pytest.raises(NotFound):
        at.artifacts.discard(artifact.id)


def test_an_object_replaced_or_removed_in_the_bucket_is_never_served(at: ArtifactTier) -> None:
    # Given two artifacts, whose objects are replaced (same bytes, new version) and removed
    replaced = at.artifacts.put(ORG, CONFIG, [b"verified"])
    removed = at.artifacts.put(ORG, CONFIG, [b"also verified"])
    key = object_key(ORG, replaced.id)
    at.objects.put_object(key, at.objects.bodies[key])
    at.objects.delete(object_key(ORG, removed.id))

    # Then reading either fails its verification, saying which check failed
    with pytest.raises(ArtifactCorrupt) as corrupt:
        at.artifacts.read(ORG, replaced.id)
    assert corrupt.value.reason == "replaced"
    with pytest.raises(ArtifactCorrupt) as corrupt:
        at.artifacts.read(ORG, removed.id)
    assert corrupt.value.reason == "missing"


def test_a_data_key_moved_to_another_artifact_does_not_unwrap(at: ArtifactTier) -> None:
    # Given two artifacts, the second's record given the first's wrapped key
    first = at.artifacts.put(ORG, CONFIG, [b"one"])
    second = at.artifacts.put(ORG, CONFIG, [b"two"])
    moved = replace(at.records.get(second.id), wrapped_key=at.records.get(first.id).wrapped_key)
    at.records.records[second.id] = moved

    # Then reading the second is refused: its key is bound to the first artifact
    with pytest.raises(ArtifactCorrupt) as corrupt:
        at.artifacts.read(ORG, second.id)
    assert corrupt.value.reason == "key_unavailable"


def test_an_inbox_upload_is_encrypted_into_an_artifact_and_its_plaintext_removed(
    at: ArtifactTier,
) -> None:
    # Given a plaintext PUT to an inbox URL
    inbox = at.artifacts.new_inbox_upload(ORG)
    at.objects.put_url(inbox.url, b"resource {}")

    # When it is ingested
    artifact = at.artifacts.ingest(ORG, CONFIG, inbox.upload_id)

    # Then it is an artifact reading back the same, and the plaintext is gone
    assert at.artifacts.read(ORG, artifact.id) == b"resource {}"
    assert list(at.objects.bodies) == [object_key(ORG, artifact.id)]


def test_an_oversized_or_missing_inbox_upload_leaves_nothing(at: ArtifactTier) -> None:
    # Given an inbox upload over the limit
    inbox = at.artifacts.new_inbox_upload(ORG)
    at.objects.put_url(inbox.url, b"x" * (LIMIT + 1))

    # When it is ingested, it is refused and neither the plaintext nor an artifact is left
    with pytest.raises(ArtifactTooLarge):
        at.artifacts.ingest(ORG, CONFIG, inbox.upload_id)
    assert at.snapshot() == ({}, {})
    # And ingesting an upload never made is NotFound
    with pytest.raises(NotFound):
        at.artifacts.ingest(ORG, CONFIG, "upl-never")
    assert inbox_key(ORG, "upl-never") not in at.objects.bodies


# --- what a runner session moves ---------------------------------------------------------


def test_a_session_downloads_its_own_organizations_inputs_only(at: ArtifactTier) -> None:
    # Given an input of the session, an artifact it was not given, and another
    # organization's artifact named among its inputs
    config = at.artifacts.put(ORG, CONFIG, [b"terraform {}"])
    unrelated = at.artifacts.put(ORG, CONFIG, [b"not yours"])
    foreign = at.artifacts.put(OTHER, CONFIG, [b"theirs"])
    session = at.session(inputs=(config.id, foreign.id))

    # Then its input downloads and decrypts with the key released to it
    grant = at.transfers.download(session, config.id)
    assert (grant.size, grant.sha256) == (config.size, config.sha256)
    assert at.fetch(grant) == b"terraform {}"
    # And the others are not found
    for artifact_id in (unrelated.id, foreign.id, "art-unknown"):
        with pytest.raises(NotFound):
            at.transfers.download(session, artifact_id)


def test_an_upload_is_recorded_only_once_registered(at: ArtifactTier) -> None:
    # Given a session that begins an upload: nothing is recorded yet
    session = at.session()
    plan = bytes(range(256)) * (2 * CHUNK_SIZE // 256) + b"tail"
    grant = at.transfers.begin_upload(session, PLAN)
    assert at.records.records == {}
    with pytest.raises(NotFound):
        at.artifacts.describe(ORG, grant.artifact_id)

    # When it uploads and registers it with the true size and digest
    size, sha256 = at.upload(grant, plan)
    artifact = at.transfers.register(
        session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
    )

    # Then it is recorded readable, as the session's, and reads back
    assert artifact.status is ArtifactStatus.REGISTERED
    assert (artifact.size, artifact.sha256) == (len(plan), hashlib.sha256(plan).hexdigest())
    assert at.records.get(artifact.id).session_id == session.id
    assert at.artifacts.read(ORG, artifact.id) == plan


def test_a_second_register_is_refused_writing_nothing(at: ArtifactTier) -> None:
    # Given a registered upload
    session = at.session()
    grant = at.transfers.begin_upload(session, PLAN)
    size, sha256 = at.upload(grant, b"plan")
    at.transfers.register(session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256)
    before = at.snapshot()

    # When it is registered again, it is a conflict and changes nothing
    with pytest.raises(ConcurrentChange):
        at.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )
    assert at.snapshot() == before
    assert at.artifacts.read(ORG, grant.artifact_id) == b"plan"


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        ("digest", "digest_mismatch"),
        ("size", "size_mismatch"),
        ("foreign", "foreign_artifact"),
        ("nothing", "missing"),
    ],
)
def test_an_upload_that_fails_verification_is_removed_and_nothing_recorded(
    at: ArtifactTier, report: str, reason: str
) -> None:
    # Given an upload whose report or object is false
    session = at.session()
    grant = at.transfers.begin_upload(session, PLAN)
    other = at.transfers.begin_upload(session, PLAN)
    plan = b"the real plan"
    size, sha256 = len(plan), hashlib.sha256(plan).hexdigest()
    if report == "digest":
        at.upload(grant, plan)
        sha256 = hashlib.sha256(b"another plan").hexdigest()
    elif report == "size":
        at.upload(grant, plan)
        size += 1
    elif report == "foreign":
        # Another upload's ciphertext, of the same plan, at this upload's URL
        ciphertext = b"".join(Encryption(other.data_key, other.artifact_id).stream([plan]))
        at.objects.put_url(grant.url, ciphertext)

    # When it is registered
    with pytest.raises(ArtifactCorrupt) as corrupt:
        at.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )

    # Then the check that failed is named, the object is removed and nothing is recorded
    assert corrupt.value.reason == reason
    assert at.snapshot() == ({}, {})


def plan_and_log(
    at: ArtifactTier, session: RunnerSession
) -> tuple[tuple[UploadGrant, UploadGrant], list[UploadReport]]:
    """A plan ("the plan") and a log ("the log") uploaded under two grants, as reported."""
    grants = (
        at.transfers.begin_upload(session, PLAN),
        at.transfers.begin_upload(session, ArtifactKind.LOGS),
    )
    reports = [
        UploadReport(g.artifact_id, g.ticket, *at.upload(g, body))
        for g, body in zip(grants, (b"the plan", b"the log"), strict=True)
    ]
    return grants, reports


def test_a_phases_uploads_register_together(at: ArtifactTier) -> None:
    # Given a session that uploaded a plan and its log under two grants
    session = at.session()
    (plan, log), reports = plan_and_log(at, session)

    # When both are registered in one call
    registered = at.transfers.register_all(session, reports)

    # Then both are recorded readable, as the session's, in the order given
    assert [a.id for a in registered] == [plan.artifact_id, log.artifact_id]
    assert at.artifacts.read(ORG, plan.artifact_id) == b"the plan"
    assert at.artifacts.read(ORG, log.artifact_id) == b"the log"
    assert {at.records.get(a.id).session_id for a in registered} == {session.id}


def test_one_false_report_among_uploads_registers_none(at: ArtifactTier) -> None:
    # Given two uploads, the second reported with a false digest
    session = at.session()
    (good, bad), reports = plan_and_log(at, session)
    reports[1] = replace(reports[1], sha256="0" * 64)

    # When both are registered together, the false one is named
    with pytest.raises(ArtifactCorrupt) as corrupt:
        at.transfers.register_all(session, reports)

    # Then nothing is recorded, the false upload's object is removed, the good one's kept
    # for the runner to register on its own
    assert corrupt.value.reason == "digest_mismatch"
    assert at.records.records == {}
    assert object_key(ORG, bad.artifact_id) not in at.objects.bodies
    assert object_key(ORG, good.artifact_id) in at.objects.bodies
    at.transfers.register(
        session, good.artifact_id, ticket=good.ticket, size=8, sha256=reports[0].sha256
    )
    assert at.artifacts.read(ORG, good.artifact_id) == b"the plan"


def test_one_upload_twice_in_one_call_is_invalid_and_writes_nothing(at: ArtifactTier) -> None:
    session = at.session()
    grant = at.transfers.begin_upload(session, PLAN)
    report = UploadReport(grant.artifact_id, grant.ticket, *at.upload(grant, b"plan"))
    before = at.snapshot()
    with pytest.raises(InvalidInput):
        at.transfers.register_all(session, [report, report])
    assert at.snapshot() == before


def test_an_oversized_report_is_refused_and_the_upload_removed(at: ArtifactTier) -> None:
    # Given an upload reported one byte over the limit
    session = at.session()
    grant = at.transfers.begin_upload(session, PLAN)
    at.objects.put_url(grant.url, b"x" * 100)

    # When it is registered, it is too large, and the object is removed
    with pytest.raises(ArtifactTooLarge):
        at.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=LIMIT + 1, sha256="0" * 64
        )
    assert at.snapshot() == ({}, {})


def test_only_the_uploading_session_registers_within_the_tickets_lifetime(
    at: ArtifactTier,
) -> None:
    # Given an upload by one session, and another session of the same organization
    uploader, other = at.session(), at.session()
    grant = at.transfers.begin_upload(uploader, PLAN)
    size, sha256 = at.upload(grant, b"plan")
    before = at.snapshot()

    # When the other session presents the uploader's ticket, it is refused, changing nothing
    with pytest.raises(UploadTicketRefused) as refused:
        at.transfers.register(
            other, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )
    assert refused.value.reason == "not_issued"
    assert at.snapshot() == before

    # And once the ticket has expired the uploader is refused too, changing nothing
    at.clock.advance(TICKET_LIFETIME)
    with pytest.raises(UploadTicketRefused) as refused:
        at.transfers.register(
            uploader, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256
        )
    assert refused.value.reason == "expired"
    assert at.snapshot() == before


def test_a_false_report_replayed_after_registration_keeps_the_artifact(at: ArtifactTier) -> None:
    # Given a registered upload
    session = at.session()
    grant = at.transfers.begin_upload(session, PLAN)
    size, sha256 = at.upload(grant, b"plan")
    at.transfers.register(session, grant.artifact_id, ticket=grant.ticket, size=size, sha256=sha256)
    before = at.snapshot()

    # When its session registers it again with a false digest
    with pytest.raises(ArtifactCorrupt):
        at.transfers.register(
            session, grant.artifact_id, ticket=grant.ticket, size=size, sha256="0" * 64
        )

    # Then the artifact and its object stay and still read back
    assert at.snapshot() == before
    assert at.artifacts.read(ORG, grant.artifact_id) == b"plan"
