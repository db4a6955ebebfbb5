"""The in-memory cloud settings store (``services.repositories.cloud_settings``): the
same versions and refusals as the table's (tests/integration/test_cloud_settings_store_contract.py),
with the audit events each write recorded."""

from __future__ import annotations

from runplane.domain.audit import AuditRecord
from runplane.domain.cloud_settings import StoredCloudSettings
from runplane.domain.entities import AuditEvent
from runplane.domain.errors import ConcurrentChange


class InMemoryCloudSettings:
    def __init__(self) -> None:
        self.settings: dict[str, StoredCloudSettings] = {}
        self.audit: list[AuditEvent] = []
        self.security_trail: list[AuditRecord] = []

    def get(self, workspace_id: str) -> StoredCloudSettings | None:
        return self.settings.get(workspace_id)

    def put(
        self,
        stored: StoredCloudSettings,
        *,
        org_id: str,
        previous_version: int,
        event: AuditEvent,
        audit: AuditRecord | None = None,
    ) -> None:
        current = self.settings.get(stored.workspace_id)
        if (current.version if current is not None else 0) != previous_version:
            raise ConcurrentChange(
                f"the cloud settings of workspace {stored.workspace_id} changed meanwhile; "
                "nothing was written: read them again"
            )
        if any(held.id == event.id for held in self.audit):
            # As the table's audit item, put only if absent.
            raise ConcurrentChange(f"audit event {event.id} exists")
        self.settings[stored.workspace_id] = stored
        self.audit.append(event)
        if audit is not None:
            self.security_trail.append(audit)
