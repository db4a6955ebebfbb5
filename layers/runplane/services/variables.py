"""Workspace variables: set, list and delete them, and the snapshot every run takes.

A variable is a Terraform variable or an environment variable of the engine
(``VariableCategory``); a name is unique per category. Sensitive values are
write-only: sealed with a KMS data key bound to the workspace, the variable's name
and (for an environment variable) its category, opened only to snapshot them into a
new run's encrypted variables artifact, and never returned, logged or audited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from runplane.adapters.keys import DataKeys
from runplane.adapters.sealed import Sealed, seal, unseal
from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.entities import Workspace
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.variables import (
    PinnedVariables,
    StoredVariable,
    VariableCategory,
    WorkspaceVariable,
    check_workspace_variable,
    replacing,
)
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.services.repositories import VariableStore


def _context(
    workspace_id: str, name: str, category: VariableCategory = VariableCategory.TERRAFORM
) -> dict[str, str]:
    # KMS encryption context and AES-GCM associated data: a sealed value copied to
    # another workspace, name or category does not open. A Terraform variable's context
    # is as it was before categories, so values sealed then still open.
    context = {"purpose": "workspace-variable", "workspace_id": workspace_id, "name": name}
    if category is not VariableCategory.TERRAFORM:
        context["category"] = category.value
    return context


def variable_kind(category: VariableCategory) -> str:
    """How an error names a variable of ``category``."""
    return "variable" if category is VariableCategory.TERRAFORM else "environment variable"


def pin(
    keys: DataKeys,
    stored: list[StoredVariable],
    context: Callable[[StoredVariable], dict[str, str]],
) -> PinnedVariables:
    """``stored`` as a new run pins them, sensitive values opened under ``context``."""
    values: dict[str, dict[str, str]] = {category: {} for category in VariableCategory}
    sensitive: dict[str, set[str]] = {category: set() for category in VariableCategory}
    for each in stored:
        variable = each.variable
        if variable.sensitive:
            sealed = Sealed(each.wrapped_key or b"", each.sealed or b"")
            opened = unseal(keys, context(each), sealed)
            values[variable.category][variable.name] = opened.decode("utf-8")
            sensitive[variable.category].add(variable.name)
        else:
            values[variable.category][variable.name] = variable.value or ""
    return PinnedVariables(
        values[VariableCategory.TERRAFORM],
        frozenset(sensitive[VariableCategory.TERRAFORM]),
        env=values[VariableCategory.ENV],
        sensitive_env=frozenset(sensitive[VariableCategory.ENV]),
    )


def _kept_value(previous: StoredVariable | None, name: str, sensitive: bool) -> StoredVariable:
    """The stored variable whose sealed value a set without a value keeps: only a
    sensitive one, set sensitive again."""
    if previous is None or not previous.variable.sensitive or not sensitive:
        raise InvalidInput(
            f"variable {name} has no stored sensitive value to keep: type its value", "/value"
        )
    return previous


class WorkspaceVariables:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        keys: DataKeys,
        store: VariableStore,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._keys = keys
        self._store = store

    def list(self, principal: Principal, workspace_id: str) -> list[WorkspaceVariable]:
        workspace = self._workspaces.by_id(principal, workspace_id)
        return [stored.variable for stored in self._store.all_of(workspace.id)]

    def set(
        self,
        principal: Principal,
        workspace_id: str,
        name: str,
        value: str | None,
        *,
        sensitive: bool = False,
        description: str | None = None,
        category: VariableCategory = VariableCategory.TERRAFORM,
    ) -> tuple[WorkspaceVariable, bool]:
        """Create or replace the variable; True if it was created. A sensitive variable
        stays sensitive: replacing it with a non-sensitive one needs a delete first.
        ``value`` None keeps a sensitive variable's stored value (its description
        changes alone): a form that never shows the value can still edit the rest."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.VARIABLES_MANAGE, workspace.id)
        size = check_workspace_variable(name, value or "", description, category)
        previous = self._store.find(workspace.id, name, category)
        kept = _kept_value(previous, name, sensitive) if value is None else None
        variable = replacing(
            previous,
            name=name,
            value=value or "",
            sensitive=sensitive,
            description=description,
            category=category,
            at=self._clock.now(),
            by=principal.ref,
        )
        if kept is not None:
            # Sealed under the same workspace, name and category: it opens as before.
            wrapped_key, ciphertext, size = kept.wrapped_key, kept.sealed, kept.size
        elif sensitive:
            raw = (value or "").encode("utf-8")
            sealed = seal(self._keys, _context(workspace.id, name, category), raw)
            wrapped_key, ciphertext = sealed.wrapped_key, sealed.ciphertext
        else:
            wrapped_key, ciphertext = None, None
        self._store.put(
            org_id=workspace.organization_id,
            workspace_id=workspace.id,
            variable=variable,
            size=size,
            wrapped_key=wrapped_key,
            sealed=ciphertext,
            previous=previous,
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(principal, AuditAction.VARIABLE_SET, workspace.id, variable),
        )
        return variable, previous is None

    def delete(
        self,
        principal: Principal,
        workspace_id: str,
        name: str,
        category: VariableCategory = VariableCategory.TERRAFORM,
    ) -> None:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.VARIABLES_MANAGE, workspace.id)
        previous = self._store.find(workspace.id, name, category)
        if previous is None:
            raise NotFound(variable_kind(category), name)
        self._store.delete(
            org_id=workspace.organization_id,
            workspace_id=workspace.id,
            previous=previous,
            actor=principal.ref,
            now=self._clock.now(),
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            audit=self._record(
                principal, AuditAction.VARIABLE_DELETED, workspace.id, previous.variable
            ),
        )

    def _record(
        self,
        principal: Principal,
        action: AuditAction,
        workspace_id: str,
        variable: WorkspaceVariable,
    ) -> AuditRecord:
        # The key and category, never the value (sensitive or not).
        return AuditRecord.of(
            principal,
            action,
            "workspace",
            workspace_id,
            at=self._clock.now(),
            id=self._ids.new(IdKind.AUDIT_EVENT),
            details={
                "key": variable.name,
                "category": variable.category.value,
                "sensitive": str(variable.sensitive).lower(),
            },
        )

    def snapshot(self, workspace: Workspace) -> dict[str, str]:
        """Every Terraform variable's value, sensitive ones opened: only for a new run's
        variables artifact (encrypted), never for a reply."""
        return self.pinned(workspace).values

    def pinned(self, workspace: Workspace) -> PinnedVariables:
        """Every variable's value (both categories, sensitive ones opened) and the names
        of the sensitive ones, from one read (so the names are those of the values)."""
        return pin(
            self._keys,
            self._store.all_of(workspace.id),
            lambda stored: _context(workspace.id, stored.variable.name, stored.variable.category),
        )
