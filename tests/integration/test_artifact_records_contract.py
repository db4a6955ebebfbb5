"""The artifact records contract: the same cases against the DynamoDB store (on moto) and
the in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactRecord, ArtifactStatus
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.services.repositories import ArtifactRecords
from runplane.store import state_versions
from runplane.store.artifact_records import DynamoArtifactRecords
from tests.fakes import InMemoryArtifactRecords

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG = "org-acme"


@pytest.fixture(params=["dynamodb", "memory"])
def records(request: pytest.FixtureRequest) -> ArtifactRecords:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoArtifactRecords()
    return InMemoryArtifactRecords()


def _artifact(artifact_id: str, *, size: int = 12, sha256: str = "a" * 64) -> Artifact:
    return Artifact(
        id=artifact_id,
        organization_id=ORG,
        kind=ArtifactKind.PLAN,
        status=ArtifactStatus.REGISTERED,
        size=size,
        sha256=sha256,
        created_at=AT,
    )


def _register(
    records: ArtifactRecords, artifact: Artifact, *, etag: str = '"e1"', session: str | None = None
) -> None:
    records.register(
        artifact,
        object_key=f"artifacts/{ORG}/{artifact.id}",
        wrapped_key=b"wrapped-" + artifact.id.encode(),
        chunk_size=65536,
        etag=etag,
        session_id=session,
        registered_at=AT + timedelta(minutes=1) if session else None,
    )


def test_a_registered_artifact_reads_back_whole(records: ArtifactRecords) -> None:
    # Given one artifact the control plane stored and one a runner session uploaded
    _register(records, _artifact("art-1"))
    _register(records, _artifact("art-2", size=0), etag='"e2"', session="ses-1")
    # Then each reads back whole: where it is, its wrapped key, what it decrypts to
    assert records.get("art-1") == ArtifactRecord(
        artifact=_artifact("art-1"),
        object_key=f"artifacts/{ORG}/art-1",
        wrapped_key=b"wrapped-art-1",
        chunk_size=65536,
        etag='"e1"',
        session_id=None,
    )
    second = records.get("art-2")
    assert (second.artifact.size, second.etag, second.session_id) == (0, '"e2"', "ses-1")
    assert records.exists("art-1")
    assert records.exists("art-2")


def test_an_unknown_artifact_is_not_found(records: ArtifactRecords) -> None:
    # Given no artifact recorded
    # Then reading one is NotFound and it does not exist
    with pytest.raises(NotFound):
        records.get("art-missing")
    assert not records.exists("art-missing")


def test_a_second_register_of_one_id_is_refused_writing_nothing(
    records: ArtifactRecords,
) -> None:
    # Given a registered artifact
    _register(records, _artifact("art-1"))
    before = records.get("art-1")
    # When the same ID is registered again, with another report and object version
    with pytest.raises(ConcurrentChange):
        _register(records, _artifact("art-1", size=99, sha256="b" * 64), etag='"e9"', session="s")
    # Then the first record stands unchanged
    assert records.get("art-1") == before


def test_a_discarded_artifact_reads_as_unknown_and_others_stay(
    records: ArtifactRecords,
) -> None:
    # Given two registered artifacts
    _register(records, _artifact("art-1"))
    _register(records, _artifact("art-2"))
    # When one is discarded, and an unknown one too
    records.discard("art-1")
    records.discard("art-missing")
    # Then the discarded one is gone, the other untouched
    with pytest.raises(NotFound):
        records.get("art-1")
    assert not records.exists("art-1")
    assert records.get("art-2").artifact == _artifact("art-2")
    # And its ID can be registered afresh (nothing of the old record is left)
    _register(records, _artifact("art-1", size=3), etag='"e3"')
    assert records.get("art-1").artifact.size == 3


def _records_of(*artifacts: Artifact) -> list[ArtifactRecord]:
    return [
        ArtifactRecord(a, f"artifacts/{ORG}/{a.id}", b"wrapped", 65536, '"e1"', "ses-1")
        for a in artifacts
    ]


def test_several_artifacts_register_together(records: ArtifactRecords) -> None:
    # When two verified uploads of a session are registered together
    records.register_all(_records_of(_artifact("art-1"), _artifact("art-2")), AT)
    # Then both read back whole, as the session's
    for artifact_id in ("art-1", "art-2"):
        assert records.get(artifact_id) == _records_of(_artifact(artifact_id))[0]


def test_registering_together_is_all_or_nothing(records: ArtifactRecords) -> None:
    # Given one artifact already registered
    _register(records, _artifact("art-2"))
    before = records.get("art-2")
    # When it is registered again together with a new one
    with pytest.raises(ConcurrentChange):
        records.register_all(_records_of(_artifact("art-1"), _artifact("art-2", size=9)), AT)
    # Then neither the new one nor a change to the old one is written
    assert not records.exists("art-1")
    assert records.get("art-2") == before


@dataclass
class Joint:
    """Artifact records, and another write of the store to register one with: a marker
    put once under a key (on DynamoDB an upload token, in memory a set)."""

    records: ArtifactRecords
    marker: Callable[[str], object]
    marked: Callable[[str], bool]


@pytest.fixture(params=["dynamodb", "memory"])
def joint(request: pytest.FixtureRequest) -> Joint:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return Joint(
            DynamoArtifactRecords(),
            lambda key: state_versions.put_upload_token(key, "sv-1", "state", AT),
            lambda key: state_versions.get_upload_token(key) is not None,
        )
    marks: set[str] = set()

    def marker(key: str) -> Callable[[], None]:
        def write() -> None:
            if key in marks:
                raise ConcurrentChange(f"marker {key} changed concurrently")
            marks.add(key)

        return write

    return Joint(InMemoryArtifactRecords(), marker, marks.__contains__)


def _register_with(joint: Joint, artifact: Artifact, together: object) -> None:
    joint.records.register_with(
        artifact,
        object_key=f"artifacts/{ORG}/{artifact.id}",
        wrapped_key=b"wrapped",
        chunk_size=65536,
        etag='"e1"',
        together=together,
    )


def test_an_artifact_registers_with_what_refers_to_it(joint: Joint) -> None:
    # When an artifact is registered with another write
    _register_with(joint, _artifact("art-1"), joint.marker("m-1"))
    # Then both are written
    assert joint.records.get("art-1").artifact == _artifact("art-1")
    assert joint.marked("m-1")


def test_a_refused_write_with_an_artifact_registers_neither(joint: Joint) -> None:
    # Given a marker written already
    _register_with(joint, _artifact("art-1"), joint.marker("m-1"))
    # When a new artifact is registered with that marker again
    with pytest.raises(ConcurrentChange):
        _register_with(joint, _artifact("art-2"), joint.marker("m-1"))
    # Then the artifact is not recorded
    assert not joint.records.exists("art-2")


def test_an_artifact_id_taken_refuses_the_write_with_it(joint: Joint) -> None:
    # Given a registered artifact
    _register_with(joint, _artifact("art-1"), joint.marker("m-1"))
    before = joint.records.get("art-1")
    # When its ID is registered again with a new marker
    with pytest.raises(ConcurrentChange) as refused:
        _register_with(joint, _artifact("art-1", size=5), joint.marker("m-2"))
    # Then the artifact's refusal is raised and neither is written
    assert "art-1" in refused.value.message
    assert joint.records.get("art-1") == before
    assert not joint.marked("m-2")
