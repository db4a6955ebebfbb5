"""A run's source provenance over the in-memory records: followed run -> configuration
version -> ready source ingestion -> configuration artifact, and claimed only when
every link holds within the run's organization and workspace."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactStatus
from runplane.domain.entities import Run
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.source_provenance import ConfigurationOrigin, SourceIngestion, SourceTarget
from runplane.services.source_provenance import source_provenance
from tests.fakes import InMemoryArtifactRecords
from tests.fakes_operations import InMemorySourceRecords

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG, WS = "org-acme", "ws-1"
RUN = Run(
    id="run-1",
    organization_id=ORG,
    workspace_id=WS,
    kind=RunKind.SPECULATIVE,
    status=RunStatus.PLANNING,
    version=3,
    created_at=AT,
    updated_at=AT,
)
ORIGIN = ConfigurationOrigin("cv-1", ORG, WS, "art-1", "src-1")
SOURCE = SourceIngestion(
    id="src-1",
    organization_id=ORG,
    status="ready",
    delivery_id="dlv-1",
    workflow_id="wf-1",
    event="pull_request",
    repository="acme/network",
    ref="refs/pull/7/head",
    branch="feature",
    pull_request=7,
    commit_sha="a" * 40,
    commit_message="Add a subnet",
    sender="ada",
    pull_request_title="Subnets",
    pull_request_author="bob",
    archive_sha256="b" * 64,
    targets=(SourceTarget("cv-0", "art-0", "envs/a"), SourceTarget("cv-1", "art-1", "envs/b")),
)


def _artifact(artifact_id: str = "art-1", organization_id: str = ORG) -> Artifact:
    return Artifact(
        artifact_id,
        organization_id,
        ArtifactKind.CONFIGURATION,
        ArtifactStatus.REGISTERED,
        10,
        "c" * 64,
        AT,
    )


class Given:
    """A pull request's commit ingested for the run's workspace, every link in place."""

    def __init__(self) -> None:
        self.records = InMemorySourceRecords()
        self.artifacts = InMemoryArtifactRecords()
        self.records.add_origin(ORIGIN)
        self.records.add_source(SOURCE)
        self.register(_artifact())

    def register(self, artifact: Artifact) -> None:
        self.artifacts.register(
            artifact, object_key=f"obj/{artifact.id}", wrapped_key=b"k", chunk_size=1, etag="e"
        )

    def provenance(self, cv_id: str | None = "cv-1") -> object:
        return source_provenance(RUN, cv_id, self.records, self.artifacts)


def test_a_run_from_an_ingested_commit_names_its_source() -> None:
    # Given a run whose configuration version an ingestion of a pull request recorded
    given = Given()
    # When its provenance is followed, Then it names the commit, never content or keys
    assert given.provenance() == {
        "provider": "github",
        "repository": "acme/network",
        "event": "pull_request",
        "ref": "refs/pull/7/head",
        "branch": "feature",
        "pull_request": 7,
        "commit_sha": "a" * 40,
        "commit_message": "Add a subnet",
        "sender": "ada",
        "pull_request_title": "Subnets",
        "pull_request_author": "bob",
        "working_directory": "envs/b",
        "source_ingestion": {"id": "src-1", "status": "ready"},
        "workflow_id": "wf-1",
        "delivery_id": "dlv-1",
        "configuration_version_id": "cv-1",
        "archive_sha256": "b" * 64,
        "configuration_artifact_id": "art-1",
    }


def _origin(**changes: Any) -> Callable[[Given], None]:
    return lambda given: given.records.add_origin(replace(ORIGIN, **changes))


def _source(**changes: Any) -> Callable[[Given], None]:
    return lambda given: given.records.add_source(replace(SOURCE, **changes))


def _forget_origin(given: Given) -> None:
    given.records.origins.clear()


def _forget_source(given: Given) -> None:
    given.records.sources.clear()


def _discard_artifact(given: Given) -> None:
    given.artifacts.discard("art-1")


def _artifact_of_another_organization(given: Given) -> None:
    given.artifacts.discard("art-1")
    given.register(_artifact(organization_id="org-other"))


@pytest.mark.parametrize(
    "break_link",
    [
        pytest.param(_forget_origin, id="unknown configuration version"),
        pytest.param(_origin(source_id=None), id="an uploaded configuration"),
        pytest.param(_origin(organization_id="org-other"), id="version of another organization"),
        pytest.param(_origin(workspace_id="ws-other"), id="version of another workspace"),
        pytest.param(_forget_source, id="unknown source ingestion"),
        pytest.param(_source(status="pending"), id="ingestion not ready"),
        pytest.param(_source(organization_id="org-other"), id="ingestion of another organization"),
        pytest.param(_source(targets=SOURCE.targets[:1]), id="ingestion without the version"),
        pytest.param(
            _source(targets=(SourceTarget("cv-1", "art-9", "envs/b"),)),
            id="ingestion naming another artifact",
        ),
        pytest.param(_discard_artifact, id="artifact gone"),
        pytest.param(_artifact_of_another_organization, id="artifact of another organization"),
    ],
)
def test_a_broken_link_claims_no_provenance(break_link: Callable[[Given], None]) -> None:
    # Given an ingested commit with one link of the chain broken
    given = Given()
    break_link(given)
    # When the run's provenance is followed, Then none is claimed
    assert given.provenance() is None


def test_a_run_without_a_configuration_version_has_no_provenance() -> None:
    assert Given().provenance(None) is None
