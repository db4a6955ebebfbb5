"""The DynamoDB workspace variables (``services.repositories.VariableStore``)."""

from __future__ import annotations

from datetime import datetime

from runplane.domain.audit import AuditRecord
from runplane.domain.variables import StoredVariable, VariableCategory, WorkspaceVariable
from runplane.store import workspace_variables as store
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.security_records import security_record


class DynamoVariableStore:
    def __init__(self, scope: RequestScope = REQUEST) -> None:
        # Reads are served from the request's identity map, taken at each call.
        self._scope = scope

    def all_of(self, workspace_id: str) -> list[StoredVariable]:
        return store.all_of(workspace_id, reads=self._scope.reads())

    def find(
        self,
        workspace_id: str,
        name: str,
        category: VariableCategory = VariableCategory.TERRAFORM,
    ) -> StoredVariable | None:
        return store.find(workspace_id, name, category)

    def put(
        self,
        *,
        org_id: str,
        workspace_id: str,
        variable: WorkspaceVariable,
        size: int,
        wrapped_key: bytes | None,
        sealed: bytes | None,
        previous: StoredVariable | None,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        write = store.put(
            org_id=org_id,
            workspace_id=workspace_id,
            variable=variable,
            size=size,
            wrapped_key=wrapped_key,
            sealed=sealed,
            previous=previous,
            event_id=event_id,
        )
        if audit is not None:
            write.extend([security_record(audit)])
        write.commit()

    def delete(
        self,
        *,
        org_id: str,
        workspace_id: str,
        previous: StoredVariable,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        write = store.delete(
            org_id=org_id,
            workspace_id=workspace_id,
            previous=previous,
            actor=actor,
            now=now,
            event_id=event_id,
        )
        if audit is not None:
            write.extend([security_record(audit)])
        write.commit()
