"""Organization variable sets: create, change and delete them, set their variables,
apply them to workspaces, and what a new run of a workspace takes from them.

Reading a set needs ``organization:read``; every change ``variable-sets:manage`` (the
admin role). Sensitive values are write-only, as a workspace's are: sealed with a KMS
data key bound to the set, the category and the name, opened only to pin them into a
new run's encrypted variables artifact, never returned, logged or audited. Another
organization's set (and workspace) is not found.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from runplane.adapters.keys import DataKeys
from runplane.adapters.sealed import seal
from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.entities import Workspace
from runplane.domain.errors import NotFound, VariableSetLimit
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.variable_precedence import PinnedSet
from runplane.domain.variable_sets import (
    MAX_SETS_PER_WORKSPACE,
    VariableSet,
    WorkspaceSets,
    check_description,
    check_set_name,
)
from runplane.domain.variables import (
    StoredVariable,
    VariableCategory,
    WorkspaceVariable,
    check_workspace_variable,
    replacing,
)
from runplane.services.variables import pin, variable_kind
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.services.repositories.variable_sets import VariableSetStore


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()
"""An update's field left as it is (``description=None`` clears the description)."""


def _context(set_id: str, category: VariableCategory, name: str) -> dict[str, str]:
    # KMS encryption context and AES-GCM associated data: a sealed value copied to
    # another set, category or name does not open.
    return {
        "purpose": "variable-set-variable",
        "variable_set_id": set_id,
        "category": category.value,
        "name": name,
    }


def _opener(set_id: str) -> Callable[[StoredVariable], dict[str, str]]:
    """The context a variable of the set was sealed under."""
    return lambda stored: _context(set_id, stored.variable.category, stored.variable.name)


@dataclass(frozen=True)
class SetDetail:
    """A set with its variables (sensitive values never among them)."""

    variable_set: VariableSet
    variables: list[WorkspaceVariable]


class VariableSets:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        keys: DataKeys,
        store: VariableSetStore,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._keys = keys
        self._store = store

    # -- reads ----------------------------------------------------------------------------

    def list(self, principal: Principal) -> list[VariableSet]:
        """The organization's sets in name order."""
        principal.require(Permission.ORGANIZATION_READ)
        return self._store.all_of(principal.organization_id)

    def get(self, principal: Principal, set_id: str) -> VariableSet:
        principal.require(Permission.ORGANIZATION_READ)
        return self._store.get(principal.organization_id, set_id)

    def show(self, principal: Principal, set_id: str) -> SetDetail:
        found = self.get(principal, set_id)
        return SetDetail(found, [s.variable for s in self._store.variables(found.id)])

    # -- the set ---------------------------------------------------------------------------

    def create(
        self,
        principal: Principal,
        name: str,
        *,
        description: str | None = None,
        global_: bool = False,
    ) -> VariableSet:
        principal.require(Permission.VARIABLE_SETS_MANAGE)
        check_set_name(name)
        check_description(description)
        now = self._clock.now()
        created = VariableSet(
            id=self._ids.new(IdKind.VARIABLE_SET),
            organization_id=principal.organization_id,
            name=name,
            description=description,
            global_=global_,
            workspace_ids=(),
            variables=0,
            bytes=0,
            version=1,
            created_at=now,
            created_by=principal.ref,
            updated_at=now,
            updated_by=principal.ref,
        )
        self._store.create(
            created,
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(principal, created.id, {"change": "created", "name": name}),
        )
        return created

    def update(
        self,
        principal: Principal,
        set_id: str,
        *,
        name: str | _Unchanged = UNCHANGED,
        description: str | _Unchanged | None = UNCHANGED,
        global_: bool | _Unchanged = UNCHANGED,
    ) -> VariableSet:
        """Rename the set, change its description, or make it global or not."""
        principal.require(Permission.VARIABLE_SETS_MANAGE)
        if not isinstance(name, _Unchanged):
            check_set_name(name)
        if not isinstance(description, _Unchanged):
            check_description(description)
        current = self._store.get(principal.organization_id, set_id)
        updated = replace(
            current,
            name=current.name if isinstance(name, _Unchanged) else name,
            description=(
                current.description if isinstance(description, _Unchanged) else description
            ),
            global_=current.global_ if isinstance(global_, _Unchanged) else global_,
            version=current.version + 1,
            updated_at=self._clock.now(),
            updated_by=principal.ref,
        )
        self._store.update(
            current,
            updated,
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(principal, current.id, {"change": "updated", "name": updated.name}),
        )
        return updated

    def delete(self, principal: Principal, set_id: str) -> None:
        """Delete the set and its variables: it applies nowhere from then on (runs
        created before keep what they pinned)."""
        principal.require(Permission.VARIABLE_SETS_MANAGE)
        current = self._store.get(principal.organization_id, set_id)
        self._store.delete(
            current,
            actor=principal.ref,
            now=self._clock.now(),
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(
                principal,
                current.id,
                {"name": current.name},
                action=AuditAction.VARIABLE_SET_DELETED,
            ),
        )

    # -- its variables ----------------------------------------------------------------------

    def set_variable(
        self,
        principal: Principal,
        set_id: str,
        category: VariableCategory,
        name: str,
        value: str,
        *,
        sensitive: bool = False,
        description: str | None = None,
    ) -> tuple[WorkspaceVariable, bool]:
        """Create or replace the set's variable; True if it was created. As a
        workspace's, a sensitive variable stays sensitive until it is deleted."""
        principal.require(Permission.VARIABLE_SETS_MANAGE)
        current = self._store.get(principal.organization_id, set_id)
        size = check_workspace_variable(name, value, description, category)
        previous = self._store.find_variable(current.id, category, name)
        variable = replacing(
            previous,
            name=name,
            value=value,
            sensitive=sensitive,
            description=description,
            category=category,
            at=self._clock.now(),
            by=principal.ref,
        )
        sealed = (
            seal(self._keys, _context(current.id, category, name), value.encode("utf-8"))
            if sensitive
            else None
        )
        self._store.put_variable(
            current,
            variable=variable,
            size=size,
            wrapped_key=sealed.wrapped_key if sealed else None,
            sealed=sealed.ciphertext if sealed else None,
            previous=previous,
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(
                principal,
                current.id,
                {"change": "variable_written", "key": name, "category": category.value},
            ),
        )
        return variable, previous is None

    def delete_variable(
        self, principal: Principal, set_id: str, category: VariableCategory, name: str
    ) -> None:
        principal.require(Permission.VARIABLE_SETS_MANAGE)
        current = self._store.get(principal.organization_id, set_id)
        previous = self._store.find_variable(current.id, category, name)
        if previous is None:
            raise NotFound(variable_kind(category), name)
        self._store.delete_variable(
            current,
            previous=previous,
            actor=principal.ref,
            now=self._clock.now(),
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(
                principal,
                current.id,
                {"change": "variable_deleted", "key": name, "category": category.value},
            ),
        )

    # -- where it applies -----------------------------------------------------------------

    def apply(self, principal: Principal, set_id: str, workspace_id: str) -> VariableSet:
        """Apply the set to the workspace by name (again: nothing changes). A set applied
        by name takes precedence over global sets in the workspace's runs."""
        principal.require(Permission.VARIABLE_SETS_MANAGE)
        current = self._store.get(principal.organization_id, set_id)
        workspace = self._workspace(principal, workspace_id)
        if current.specific_to(workspace.id):
            return current
        applied, keep = self._applied(principal, workspace)
        if len([s for s in keep if s != current.id]) >= MAX_SETS_PER_WORKSPACE:
            raise VariableSetLimit(
                f"a workspace has at most {MAX_SETS_PER_WORKSPACE} variable sets applied to "
                "it by name; remove one first"
            )
        self._store.apply(
            current,
            applied,
            keep,
            actor=principal.ref,
            now=self._clock.now(),
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(
                principal, current.id, {"change": "applied", "workspace_id": workspace.id}
            ),
        )
        return self._store.get(principal.organization_id, current.id)

    def unapply(self, principal: Principal, set_id: str, workspace_id: str) -> VariableSet:
        """Stop applying the set to the workspace by name (a global set still applies)."""
        principal.require(Permission.VARIABLE_SETS_MANAGE)
        current = self._store.get(principal.organization_id, set_id)
        workspace = self._workspace(principal, workspace_id)
        if not current.specific_to(workspace.id):
            raise NotFound(f"variable set {current.name}'s application to workspace", workspace.id)
        applied, keep = self._applied(principal, workspace)
        self._store.unapply(
            current,
            applied,
            keep,
            actor=principal.ref,
            now=self._clock.now(),
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(
                principal, current.id, {"change": "unapplied", "workspace_id": workspace.id}
            ),
        )
        return self._store.get(principal.organization_id, current.id)

    def _record(
        self,
        principal: Principal,
        set_id: str,
        details: dict[str, str],
        *,
        action: AuditAction = AuditAction.VARIABLE_SET_CHANGED,
    ) -> AuditRecord:
        # Names, keys and categories only: never a value.
        return AuditRecord.of(
            principal,
            action,
            "variable_set",
            set_id,
            at=self._clock.now(),
            id=self._ids.new(IdKind.AUDIT_EVENT),
            details=details,
        )

    def _workspace(self, principal: Principal, workspace_id: str) -> Workspace:
        workspace = self._workspaces.by_id(principal, workspace_id)
        if workspace.organization_id != principal.organization_id:
            raise NotFound("workspace", workspace_id)
        return workspace

    def _applied(
        self, principal: Principal, workspace: Workspace
    ) -> tuple[WorkspaceSets, tuple[str, ...]]:
        """The workspace's record of its sets, and those of them that still exist."""
        applied = self._store.workspace_sets(principal.organization_id, workspace.id)
        live = {s.id for s in self._store.all_of(principal.organization_id)}
        return applied, tuple(s for s in applied.set_ids if s in live)

    # -- runs -----------------------------------------------------------------------------

    def pinned_for(self, workspace: Workspace) -> builtins.list[PinnedSet]:
        """The sets that apply to ``workspace`` with their values (sensitive ones
        opened): only for a new run's variables artifact (encrypted), never for a
        reply."""
        pinned: list[PinnedSet] = []
        for each in self._store.all_of(workspace.organization_id):
            if not each.applies_to(workspace.id):
                continue
            values = pin(self._keys, self._store.variables(each.id), _opener(each.id))
            pinned.append(PinnedSet(each.id, each.name, each.specific_to(workspace.id), values))
        return pinned
