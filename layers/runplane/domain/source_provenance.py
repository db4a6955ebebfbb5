"""The records a run's source provenance is followed through: where a configuration
version came from, and the GitHub source ingestion that recorded it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigurationOrigin:
    """What a configuration version records of its origin: its workspace, its artifact
    (None until uploaded) and the source ingestion that made it (None for an upload)."""

    id: str
    organization_id: str
    workspace_id: str
    artifact_id: str | None
    source_id: str | None


@dataclass(frozen=True)
class SourceTarget:
    """One workspace a source ingestion recorded a configuration version for."""

    configuration_version_id: str | None
    configuration_artifact_id: str | None
    working_directory: str


@dataclass(frozen=True)
class SourceIngestion:
    """A commit fetched from GitHub for one delivery, as provenance shows it: public
    identifiers and what the delivery said, never tokens or content."""

    id: str
    organization_id: str
    status: str
    delivery_id: str
    workflow_id: str
    event: str
    repository: str
    ref: str
    branch: str
    pull_request: int | None
    commit_sha: str
    commit_message: str | None
    sender: str | None
    pull_request_title: str | None
    pull_request_author: str | None
    archive_sha256: str | None
    targets: tuple[SourceTarget, ...]
