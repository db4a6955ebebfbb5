"""The DynamoDB variable sets (``services.repositories.variable_sets.VariableSetStore``)."""

from __future__ import annotations

from datetime import datetime

from runplane.domain.audit import AuditRecord
from runplane.domain.variable_sets import VariableSet, WorkspaceSets
from runplane.domain.variables import StoredVariable, VariableCategory, WorkspaceVariable
from runplane.store import variable_sets as store
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.security_records import security_record
from runplane.store.transaction import Transaction


class DynamoVariableSetStore:
    def __init__(self, scope: RequestScope = REQUEST) -> None:
        # Reads are served from the request's identity map, taken at each call.
        self._scope = scope

    def all_of(self, org_id: str) -> list[VariableSet]:
        return store.all_of(org_id, reads=self._scope.reads())

    def get(self, org_id: str, set_id: str) -> VariableSet:
        return store.get(org_id, set_id)

    def find_id(self, org_id: str, name: str) -> str | None:
        return store.find_id(org_id, name)

    def create(
        self, variable_set: VariableSet, *, event_id: str, audit: AuditRecord | None = None
    ) -> None:
        store.create(variable_set, event_id=event_id).extend(_recorded(audit)).commit()

    def update(
        self,
        current: VariableSet,
        updated: VariableSet,
        *,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        store.update(current, updated, event_id=event_id).extend(_recorded(audit)).commit()

    def delete(
        self,
        current: VariableSet,
        *,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        store.delete(current, actor=actor, now=now, event_id=event_id).extend(
            _recorded(audit)
        ).commit()
        # Once the head is gone no read reaches them and no put can add one.
        store.delete_variables(current.id)

    def workspace_sets(self, org_id: str, workspace_id: str) -> WorkspaceSets:
        return store.workspace_sets(org_id, workspace_id)

    def apply(
        self,
        current: VariableSet,
        applied: WorkspaceSets,
        keep: tuple[str, ...],
        *,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        store.apply(current, applied, keep, actor=actor, now=now, event_id=event_id).extend(
            _recorded(audit)
        ).commit()

    def unapply(
        self,
        current: VariableSet,
        applied: WorkspaceSets,
        keep: tuple[str, ...],
        *,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        store.unapply(current, applied, keep, actor=actor, now=now, event_id=event_id).extend(
            _recorded(audit)
        ).commit()

    def variables(self, set_id: str) -> list[StoredVariable]:
        return store.variables(set_id)

    def find_variable(
        self, set_id: str, category: VariableCategory, name: str
    ) -> StoredVariable | None:
        return store.find_variable(set_id, category, name)

    def put_variable(
        self,
        current: VariableSet,
        *,
        variable: WorkspaceVariable,
        size: int,
        wrapped_key: bytes | None,
        sealed: bytes | None,
        previous: StoredVariable | None,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        store.put_variable(
            current,
            variable=variable,
            size=size,
            wrapped_key=wrapped_key,
            sealed=sealed,
            previous=previous,
            event_id=event_id,
        ).extend(_recorded(audit)).commit()

    def delete_variable(
        self,
        current: VariableSet,
        *,
        previous: StoredVariable,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        store.delete_variable(
            current, previous=previous, actor=actor, now=now, event_id=event_id
        ).extend(_recorded(audit)).commit()


def _recorded(audit: AuditRecord | None) -> list[Transaction]:
    return [] if audit is None else [security_record(audit)]
