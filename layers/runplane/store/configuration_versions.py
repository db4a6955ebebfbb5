"""Configuration versions: an upload of a workspace's configuration, then its artifact."""

from __future__ import annotations

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
