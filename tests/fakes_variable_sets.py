"""The in-memory ``VariableSetStore`` the service tier uses: the table's conditions and
limits, checked in the same order (tests/integration/test_variable_set_store_contract.py
holds both to the same cases). Every write checks all its conditions before it changes
anything, so a refused write writes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from runplane.domain.audit import AuditRecord
from runplane.domain.errors import (
    AlreadyExists,
    ConcurrentChange,
    NotFound,
    VariableSetLimit,
    VariablesTooLarge,
)
from runplane.domain.variable_sets import (
    MAX_GLOBAL_SETS,
    MAX_SET_BYTES,
    MAX_SET_VARIABLES,
    MAX_SETS_PER_ORGANIZATION,
    VariableSet,
    WorkspaceSets,
)
from runplane.domain.variables import StoredVariable, VariableCategory, WorkspaceVariable
from tests.fakes import AuditedChange, variable_details

Key = tuple[VariableCategory, str]


@dataclass
class InMemoryVariableSets:
    sets: dict[str, VariableSet] = field(default_factory=dict)
    names: dict[tuple[str, str], str] = field(default_factory=dict)
    applied: dict[tuple[str, str], WorkspaceSets] = field(default_factory=dict)
    variables_of: dict[str, dict[Key, StoredVariable]] = field(default_factory=dict)
    audit: list[AuditedChange] = field(default_factory=list)
    security_trail: list[AuditRecord] = field(default_factory=list)

    # -- reads -----------------------------------------------------------------------------

    def all_of(self, org_id: str) -> list[VariableSet]:
        return sorted(
            (s for s in self.sets.values() if s.organization_id == org_id), key=lambda s: s.name
        )

    def get(self, org_id: str, set_id: str) -> VariableSet:
        found = self.sets.get(set_id)
        if found is None or found.organization_id != org_id:
            raise NotFound("variable set", set_id)
        return found

    def find_id(self, org_id: str, name: str) -> str | None:
        return self.names.get((org_id, name))

    def workspace_sets(self, org_id: str, workspace_id: str) -> WorkspaceSets:
        return self.applied.get((org_id, workspace_id), WorkspaceSets(workspace_id, (), 0))

    def variables(self, set_id: str) -> list[StoredVariable]:
        held = self.variables_of.get(set_id, {})
        order = sorted(held, key=lambda k: (k[0] is not VariableCategory.TERRAFORM, k[1]))
        return [held[key] for key in order]

    def find_variable(
        self, set_id: str, category: VariableCategory, name: str
    ) -> StoredVariable | None:
        return self.variables_of.get(set_id, {}).get((category, name))

    # -- the set ---------------------------------------------------------------------------

    def _count(self, org_id: str) -> tuple[int, int]:
        held = self.all_of(org_id)
        return len(held), sum(1 for s in held if s.global_)

    def _record(
        self,
        variable_set: VariableSet,
        event_id: str,
        type_: str,
        details: dict[str, str],
        actor: str,
        audit: AuditRecord | None = None,
    ) -> None:
        if audit is not None:
            self.security_trail.append(audit)
        self.audit.append(
            AuditedChange(
                event_id,
                type_,
                variable_set.id,
                actor,
                {"variable_set_id": variable_set.id, "name": variable_set.name, **details},
            )
        )

    def _head(self, current: VariableSet) -> VariableSet:
        """The head as stored, only at the version read."""
        stored = self.sets.get(current.id)
        if stored is None:
            raise NotFound("variable set", current.id)
        if stored.version != current.version:
            raise ConcurrentChange(
                f"variable set {current.name} changed meanwhile; nothing was written"
            )
        return stored

    def create(
        self, variable_set: VariableSet, *, event_id: str, audit: AuditRecord | None = None
    ) -> None:
        org_id = variable_set.organization_id
        if (org_id, variable_set.name) in self.names:
            raise AlreadyExists(
                f"a variable set named {variable_set.name} exists in the organization"
            )
        if variable_set.id in self.sets:
            raise ConcurrentChange(f"variable set {variable_set.id} exists; nothing was written")
        sets, global_sets = self._count(org_id)
        if sets + 1 > MAX_SETS_PER_ORGANIZATION:
            raise VariableSetLimit(
                f"an organization has at most {MAX_SETS_PER_ORGANIZATION} variable sets", "/name"
            )
        if variable_set.global_ and global_sets + 1 > MAX_GLOBAL_SETS:
            raise VariableSetLimit(
                f"an organization has at most {MAX_GLOBAL_SETS} global variable sets", "/global"
            )
        self.names[(org_id, variable_set.name)] = variable_set.id
        self.sets[variable_set.id] = variable_set
        self._record(
            variable_set,
            event_id,
            "variable_set.created",
            {"global": str(variable_set.global_).lower()},
            variable_set.created_by,
            audit=audit,
        )

    def update(
        self,
        current: VariableSet,
        updated: VariableSet,
        *,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        org_id = current.organization_id
        stored = self._head(current)
        renamed = updated.name != current.name
        if renamed and (org_id, updated.name) in self.names:
            raise AlreadyExists(f"a variable set named {updated.name} exists in the organization")
        if updated.global_ and not current.global_ and self._count(org_id)[1] + 1 > MAX_GLOBAL_SETS:
            raise VariableSetLimit(
                f"an organization has at most {MAX_GLOBAL_SETS} global variable sets", "/global"
            )
        if renamed:
            del self.names[(org_id, current.name)]
            self.names[(org_id, updated.name)] = current.id
        # The counters are the stored head's (a variable's write moves them, not the version).
        self.sets[current.id] = replace(updated, variables=stored.variables, bytes=stored.bytes)
        details = {"global": str(updated.global_).lower()}
        if renamed:
            details["previous_name"] = current.name
        self._record(
            updated, event_id, "variable_set.updated", details, updated.updated_by, audit=audit
        )

    def delete(
        self,
        current: VariableSet,
        *,
        actor: str,
        now: datetime,
        event_id: str,
        audit: AuditRecord | None = None,
    ) -> None:
        self._head(current)
        del self.sets[current.id]
        del self.names[(current.organization_id, current.name)]
        self.variables_of.pop(current.id, None)
        self._record(current, event_id, "variable_set.deleted", {}, actor, audit=audit)

    # -- where it applies -----------------------------------------------------------------

    def _apply_record(
        self,
        current: VariableSet,
        applied: WorkspaceSets,
        set_ids: tuple[str, ...],
        workspace_ids: tuple[str, ...],
        *,
        actor: str,
        now: datetime,
        event_id: str,
        type_: str,
        audit: AuditRecord | None = None,
    ) -> None:
        org_id, workspace_id = current.organization_id, applied.workspace_id
        stored = self._head(current)
        if self.workspace_sets(org_id, workspace_id).version != applied.version:
            raise ConcurrentChange(
                f"the variable sets of workspace {workspace_id} changed meanwhile; "
                "nothing was written"
            )
        self.sets[current.id] = replace(
            stored,
            workspace_ids=workspace_ids,
            version=current.version + 1,
            updated_at=now,
            updated_by=actor,
        )
        self.applied[(org_id, workspace_id)] = WorkspaceSets(
            workspace_id, set_ids, applied.version + 1
        )
        self._record(current, event_id, type_, {"workspace_id": workspace_id}, actor, audit=audit)

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
        workspace_id = applied.workspace_id
        self._apply_record(
            current,
            applied,
            (*(s for s in keep if s != current.id), current.id),
            (*(w for w in current.workspace_ids if w != workspace_id), workspace_id),
            actor=actor,
            now=now,
            event_id=event_id,
            type_="variable_set.applied",
            audit=audit,
        )

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
        workspace_id = applied.workspace_id
        self._apply_record(
            current,
            applied,
            tuple(s for s in keep if s != current.id),
            tuple(w for w in current.workspace_ids if w != workspace_id),
            actor=actor,
            now=now,
            event_id=event_id,
            type_="variable_set.unapplied",
            audit=audit,
        )

    # -- its variables ----------------------------------------------------------------------

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
        key = (variable.category, variable.name)
        held = self.variables_of.get(current.id, {})
        found = held.get(key)
        if (previous is None) != (found is None) or (
            previous is not None and found is not None and found.version != previous.version
        ):
            raise ConcurrentChange(
                f"variable {variable.name} changed meanwhile; nothing was written"
            )
        stored = self.sets.get(current.id)
        if stored is None:
            raise NotFound("variable set", current.id)
        added = 1 if previous is None else 0
        grows = size - (0 if previous is None else previous.size)
        if added and stored.variables + added > MAX_SET_VARIABLES:
            raise VariableSetLimit(
                f"a variable set has at most {MAX_SET_VARIABLES} variables", "/name"
            )
        if stored.bytes + grows > MAX_SET_BYTES:
            raise VariablesTooLarge(
                f"the variable set's values would add up to more than {MAX_SET_BYTES:,} bytes",
                "/value",
            )
        self.variables_of.setdefault(current.id, {})[key] = StoredVariable(
            variable=replace(variable, value=None if variable.sensitive else variable.value),
            size=size,
            version=1 if previous is None else previous.version + 1,
            wrapped_key=wrapped_key,
            sealed=sealed,
        )
        self.sets[current.id] = replace(
            stored, variables=stored.variables + added, bytes=stored.bytes + grows
        )
        self._record(
            current,
            event_id,
            "variable_set.variable_set",
            _details(variable),
            variable.updated_by,
            audit=audit,
        )

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
        variable = previous.variable
        key = (variable.category, variable.name)
        held = self.variables_of.get(current.id, {})
        found = held.get(key)
        if found is None or found.version != previous.version:
            raise ConcurrentChange(
                f"variable {variable.name} changed meanwhile; nothing was written"
            )
        stored = self.sets.get(current.id)
        if stored is None:
            raise NotFound("variable set", current.id)
        del held[key]
        self.sets[current.id] = replace(
            stored, variables=stored.variables - 1, bytes=stored.bytes - previous.size
        )
        self._record(
            current,
            event_id,
            "variable_set.variable_deleted",
            _details(variable),
            actor,
            audit=audit,
        )


def _details(variable: WorkspaceVariable) -> dict[str, str]:
    details = variable_details(variable)
    return {"variable": details.pop("name"), **details}
