"""A run's source provenance, followed through persisted records only.

run -> input snapshot -> configuration version -> ready source ingestion ->
configuration artifact. Any broken link means no provenance is claimed. Only
identifiers and digests are returned: never object keys, tokens or content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runplane.domain.entities import Run
from runplane.domain.errors import NotFound
from runplane.domain.github import PROVIDER
from runplane.domain.gitlab import PROVIDER as GITLAB
from runplane.domain.gitlab import workspace_of_delivery

if TYPE_CHECKING:
    from runplane.services.repositories import ArtifactRecords
    from runplane.services.repositories.operations import SourceRecords


def source_provenance(
    run: Run, cv_id: str | None, records: SourceRecords, artifacts: ArtifactRecords
) -> dict[str, Any] | None:
    if not cv_id:
        return None
    cv = records.configuration_origin(cv_id)
    if cv is None:
        return None
    if cv.source_id is None or cv.organization_id != run.organization_id:
        return None
    if cv.workspace_id != run.workspace_id:
        return None
    source = records.source(cv.source_id)
    if source is None or source.status != "ready" or source.organization_id != run.organization_id:
        return None
    target = next((t for t in source.targets if t.configuration_version_id == cv_id), None)
    if target is None or target.configuration_artifact_id != cv.artifact_id:
        return None
    try:
        artifact = artifacts.get(str(cv.artifact_id)).artifact
    except NotFound:
        return None
    if artifact.organization_id != run.organization_id:
        return None
    return {
        # A GitLab delivery's ID names its workspace (gitlab:<workspace>:<event UUID>).
        "provider": GITLAB if workspace_of_delivery(source.delivery_id) else PROVIDER,
        "repository": source.repository,
        "event": source.event,
        "ref": source.ref,
        "branch": source.branch,
        "pull_request": source.pull_request,
        "commit_sha": source.commit_sha,
        "commit_message": source.commit_message,
        "sender": source.sender,
        "pull_request_title": source.pull_request_title,
        "pull_request_author": source.pull_request_author,
        "working_directory": target.working_directory,
        "source_ingestion": {"id": source.id, "status": source.status},
        "workflow_id": source.workflow_id,
        "delivery_id": source.delivery_id,
        "configuration_version_id": cv.id,
        "archive_sha256": source.archive_sha256,
        "configuration_artifact_id": artifact.id,
    }
