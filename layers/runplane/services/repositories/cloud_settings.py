"""The seam of workspace cloud settings (``services.cloud_settings``)."""

from __future__ import annotations

from typing import Protocol

from runplane.domain.audit import AuditRecord
from runplane.domain.cloud_settings import StoredCloudSettings
from runplane.domain.entities import AuditEvent


class CloudSettingsStore(Protocol):
    """Each workspace's cloud settings, replaced whole at a version.

    - ``get`` is the workspace's settings as last written (a consistent read), or None
      if none were ever written. A clear is a write of no settings, so a workspace
      whose settings were cleared reads as empty settings at a later version.
    - ``put`` writes ``stored`` (whose version is ``previous_version + 1``) only while
      the workspace's settings are still at ``previous_version`` (0: none yet), and the
      organization audit event ``event`` with it, in one write; otherwise it raises
      ``ConcurrentChange`` and writes nothing (neither the settings nor the event).
    """

    def get(self, workspace_id: str) -> StoredCloudSettings | None: ...

    def put(
        self,
        stored: StoredCloudSettings,
        *,
        org_id: str,
        previous_version: int,
        event: AuditEvent,
        audit: AuditRecord | None = None,
    ) -> None: ...
