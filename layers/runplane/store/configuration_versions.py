"""Configuration versions: an upload of a workspace's configuration, then its artifact."""

from __future__ import annotations

from runplane.domain.source_provenance import ConfigurationOrigin
from runplane.store import prefetch
from runplane.store.models import ConfigurationVersionItem, configuration_version_key


def get_item(cv_id: str) -> ConfigurationVersionItem | None:
    """The version's item (consistent), or None; served from a read ahead if there was one."""
    key = configuration_version_key(cv_id)
    prefetched = prefetch.take(key)
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
