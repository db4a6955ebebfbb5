"""An in-memory ``AutoDestroyStore`` (``services/repositories/auto_destroy.py``), with the
same version conditions as the DynamoDB store (tests/integration/test_auto_destroy_store.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.auto_destroy import AutoDestroy
from runplane.domain.entities import AuditEvent, Workspace
from runplane.domain.errors import ConcurrentChange
from tests.fakes import InMemorySchedules


class InMemoryAutoDestroys:
    """Records by workspace, the audit events written with them, and ``activity``: when a
    test says each workspace's current state was published."""

    def __init__(self, schedules: InMemorySchedules) -> None:
        self.records: dict[str, AutoDestroy] = {}
        self.audit: list[AuditEvent] = []
        self.activity: dict[str, datetime] = {}
        # The outbox writes committed with the records (the tier announces an event as
        # itself).
        self.announced: list[Any] = []
        # The schedule store's configurations: the latest a destroy run plans.
        self._schedules = schedules

    def get(self, workspace_id: str) -> AutoDestroy | None:
        return self.records.get(workspace_id)

    def refuse_moved(self, workspace_id: str, previous_version: int) -> None:
        current = self.records.get(workspace_id)
        if (0 if current is None else current.version) != previous_version:
            raise ConcurrentChange(f"the auto-destroy of workspace {workspace_id} changed")

    def put(
        self,
        record: AutoDestroy,
        *,
        previous_version: int,
        event: AuditEvent | None = None,
        announce: Any = None,
    ) -> None:
        self.refuse_moved(record.workspace_id, previous_version)
        self.records[record.workspace_id] = record
        if event is not None:
            self.audit.append(event)
        if announce is not None:
            self.announced.append(announce)

    def delete(self, workspace_id: str, *, previous_version: int, event: AuditEvent) -> None:
        self.refuse_moved(workspace_id, previous_version)
        del self.records[workspace_id]
        self.audit.append(event)

    def armed(self) -> list[AutoDestroy]:
        return sorted(self.records.values(), key=lambda r: r.workspace_id)

    def last_activity(self, workspace: Workspace) -> datetime | None:
        return self.activity.get(workspace.id)

    def latest_configuration_id(self, workspace_id: str) -> str | None:
        return self._schedules.configurations.get(workspace_id)
