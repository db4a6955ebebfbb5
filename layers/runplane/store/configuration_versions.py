"""Configuration versions: an upload of a workspace's configuration, then its artifact."""

from __future__ import annotations

from datetime import datetime

from runplane.domain.artifacts import Artifact
from runplane.domain.creation import ConfigurationVersion
from runplane.domain.errors import Conflict
from runplane.domain.source_provenance import ConfigurationOrigin
from runplane.store.models import (
    ConfigurationVersionItem,
    configuration_version_key,
    configurations_partition,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.transaction import Transaction


def get_item(cv_id: str, *, reads: IdentityMap) -> ConfigurationVersionItem | None:
    """The version's item (consistent), or None; served from ``reads`` if it was read
    ahead there."""
    key = configuration_version_key(cv_id)
    prefetched = reads.take(key)
    if prefetched is not None:
        return ConfigurationVersionItem.from_raw_data(prefetched)
    try:
        return ConfigurationVersionItem.get(*key, consistent_read=True)
    except ConfigurationVersionItem.DoesNotExist:
        return None


def _to_origin(item: ConfigurationVersionItem) -> ConfigurationOrigin:
    """What the version's item records of its origin."""
    return ConfigurationOrigin(
        id=item.cv_id,
        organization_id=item.org_id,
        workspace_id=item.workspace_id,
        artifact_id=item.artifact_id,
        source_id=item.source_id,
    )


def find_origin(cv_id: str) -> ConfigurationOrigin | None:
    """The version's origin (consistent, never from a read ahead), or None."""
    try:
        item = ConfigurationVersionItem.get(*configuration_version_key(cv_id), consistent_read=True)
    except ConfigurationVersionItem.DoesNotExist:
        return None
    return _to_origin(item)


def to_version(item: ConfigurationVersionItem) -> ConfigurationVersion:
    """The version an item holds (the inverse of ``version_item``)."""
    return ConfigurationVersion(
        id=item.cv_id,
        organization_id=item.org_id,
        workspace_id=item.workspace_id,
        status=item.status,
        upload_id=item.upload_id,
        created_at=item.created_at,
        artifact_id=item.artifact_id,
        sha256=item.sha256,
        size=None if item.size is None else int(item.size),
        uploaded_at=item.uploaded_at,
        expires_at=item.expires_at,
        speculative=item.speculative,
        upload_token_hash=item.upload_token_hash,
        source_id=item.source_id,
    )


def version_item(version: ConfigurationVersion) -> ConfigurationVersionItem:
    """The item holding ``version`` (the inverse of ``to_version``), indexed under its
    workspace once uploaded."""
    item = ConfigurationVersionItem(
        *configuration_version_key(version.id),
        cv_id=version.id,
        org_id=version.organization_id,
        workspace_id=version.workspace_id,
        status=version.status,
        upload_id=version.upload_id,
        created_at=version.created_at,
        artifact_id=version.artifact_id,
        sha256=version.sha256,
        size=version.size,
        uploaded_at=version.uploaded_at,
        expires_at=version.expires_at,
        speculative=version.speculative,
        upload_token_hash=version.upload_token_hash,
        source_id=version.source_id,
    )
    if version.uploaded_at is not None:
        item.gsi1pk = configurations_partition(version.workspace_id)
        item.gsi1sk = f"{version.uploaded_at.isoformat()}#{version.id}"
    return item


def record_upload(cv_id: str, workspace_id: str, artifact: Artifact, now: datetime) -> Transaction:
    """The write recording ``artifact`` as the pending version's upload."""
    return Transaction().update(
        ConfigurationVersionItem(*configuration_version_key(cv_id)),
        [
            ConfigurationVersionItem.status.set("uploaded"),
            ConfigurationVersionItem.artifact_id.set(artifact.id),
            ConfigurationVersionItem.sha256.set(artifact.sha256 or ""),
            ConfigurationVersionItem.size.set(artifact.size or 0),
            ConfigurationVersionItem.uploaded_at.set(now),
            # Indexed under its workspace once uploaded: schedules plan the latest.
            ConfigurationVersionItem.gsi1pk.set(configurations_partition(workspace_id)),
            ConfigurationVersionItem.gsi1sk.set(f"{now.isoformat()}#{cv_id}"),
            ConfigurationVersionItem.expires_at.remove(),
        ],
        condition=ConfigurationVersionItem.status == "pending",
        on_refused=lambda current: Conflict(f"configuration version {cv_id} was already uploaded"),
    )


class DynamoConfigurationVersions:
    """``services.repositories.creation.ConfigurationVersions``; a version's read is served
    from the request's identity map (``scope``) where it was read ahead."""

    def __init__(self, scope: RequestScope = REQUEST) -> None:
        self._scope = scope

    def get(self, cv_id: str) -> ConfigurationVersion | None:
        item = get_item(cv_id, reads=self._scope.reads())
        return None if item is None else to_version(item)

    def create(self, version: ConfigurationVersion) -> None:
        Transaction().put_new(version_item(version)).commit()

    def record_upload(
        self, cv_id: str, workspace_id: str, artifact: Artifact, now: datetime
    ) -> Transaction:
        return record_upload(cv_id, workspace_id, artifact, now)
