"""A run's source provenance, followed through persisted records only.

run -> input snapshot -> configuration version -> ready source ingestion ->
configuration artifact. Any broken link means no provenance is claimed. Only
identifiers and digests are returned: never object keys, tokens or content.
"""

from __future__ import annotations

from typing import Any

from runplane.domain.entities import Run
from runplane.domain.errors import NotFound
from runplane.domain.github import PROVIDER
from runplane.store import artifacts as artifact_store
from runplane.store import github as github_store
from runplane.store.models import ConfigurationVersionItem, configuration_version_key


def source_provenance(run: Run, cv_id: str | None) -> dict[str, Any] | None:
    if not cv_id:
        return None
    try:
        cv = ConfigurationVersionItem.get(*configuration_version_key(cv_id), consistent_read=True)
    except ConfigurationVersionItem.DoesNotExist:
        return None
    if cv.source_id is None or cv.org_id != run.organization_id:
        return None
    if cv.workspace_id != run.workspace_id:
        return None
    source = github_store.find_source(cv.source_id)
    if source is None or source.status != "ready" or source.org_id != run.organization_id:
        return None
    target = next(
        (t for t in source.targets or [] if t.get("configuration_version_id") == cv_id), None
    )
    if target is None or target.get("configuration_artifact_id") != cv.artifact_id:
        return None
    try:
        artifact = artifact_store.get(str(cv.artifact_id)).artifact
    except NotFound:
        return None
    if artifact.organization_id != run.organization_id:
        return None
    return {
        "provider": PROVIDER,
        "repository": source.repository,
        "event": source.event,
        "ref": source.ref,
        "branch": source.branch,
        "pull_request": None if source.pull_request is None else int(source.pull_request),
        "commit_sha": source.commit_sha,
        "commit_message": source.commit_message,
        "sender": source.sender,
        "pull_request_title": source.pull_request_title,
        "pull_request_author": source.pull_request_author,
        "working_directory": target.get("working_directory", ""),
        "source_ingestion": {"id": source.source_id, "status": source.status},
        "workflow_id": source.workflow_id,
        "delivery_id": source.delivery_id,
        "configuration_version_id": cv.cv_id,
        "archive_sha256": source.archive_sha256,
        "configuration_artifact_id": artifact.id,
    }
