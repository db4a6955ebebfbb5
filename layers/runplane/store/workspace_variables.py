"""Workspace variables in the table: one item per variable, and one tally per workspace
(how many, how many value bytes) that every set and delete updates in the same
transaction, so concurrent writers cannot pass the limits between them."""

from __future__ import annotations

from datetime import datetime

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)

from runplane.domain.errors import ConcurrentChange, InvalidInput, VariablesTooLarge
from runplane.domain.variables import (
    MAX_VARIABLES,
    MAX_VARIABLES_BYTES,
    StoredVariable,
    VariableCategory,
    WorkspaceVariable,
)
from runplane.store import audit
from runplane.store.models import TableItem, org_event_key, tally_key
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, OnRefused, Transaction

VARIABLE_PREFIX = "VAR#"


def variable_key(
    workspace_id: str, name: str, category: VariableCategory = VariableCategory.TERRAFORM
) -> tuple[str, str]:
    """A Terraform variable's key is ``VAR#name``, as before categories; an environment
    variable's ``VAR#env#name`` (no variable name holds a ``#``), so one query reads both."""
    if category is VariableCategory.TERRAFORM:
        return f"WS#{workspace_id}", f"{VARIABLE_PREFIX}{name}"
    return f"WS#{workspace_id}", f"{VARIABLE_PREFIX}{category.value}#{name}"


def category_of_item(value: str | None) -> VariableCategory:
    """An item's category: absent on a Terraform variable's (written before categories,
    or since: only other categories are written)."""
    return VariableCategory(value) if value else VariableCategory.TERRAFORM


def category_attribute(category: VariableCategory) -> str | None:
    return None if category is VariableCategory.TERRAFORM else category.value


def by_category_and_name(stored: StoredVariable) -> tuple[bool, str]:
    """Terraform variables first, then environment variables, each by name."""
    return stored.variable.category is not VariableCategory.TERRAFORM, stored.variable.name


class WorkspaceVariableItem(TableItem):
    """A non-sensitive value is stored as is; a sensitive one only sealed (a wrapped
    KMS data key and AES-GCM ciphertext bound to the workspace and the name)."""

    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    # Absent: a Terraform variable (``category_of_item``).
    category = UnicodeAttribute(null=True)
    sensitive = BooleanAttribute()
    description = UnicodeAttribute(null=True)
    value = UnicodeAttribute(null=True)
    wrapped_key = BinaryAttribute(null=True, legacy_encoding=False)
    sealed = BinaryAttribute(null=True, legacy_encoding=False)
    size = NumberAttribute()
    version = NumberAttribute()
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()


class VariableTallyItem(TableItem):
    workspace_id = UnicodeAttribute()
    variables = NumberAttribute()
    bytes = NumberAttribute()


def _stored(item: WorkspaceVariableItem) -> StoredVariable:
    """The variable an item holds (the inverse of ``_item``)."""
    return StoredVariable(
        variable=WorkspaceVariable(
            name=item.name,
            sensitive=bool(item.sensitive),
            description=item.description,
            value=None if item.sensitive else item.value,
            updated_at=item.updated_at,
            updated_by=item.updated_by,
            category=category_of_item(item.category),
        ),
        size=int(item.size),
        version=int(item.version),
        wrapped_key=item.wrapped_key,
        sealed=item.sealed,
    )


def _item(stored: StoredVariable, *, org_id: str, workspace_id: str) -> WorkspaceVariableItem:
    """The item holding ``stored`` (the inverse of ``_stored``): a sensitive value only
    sealed."""
    variable = stored.variable
    return WorkspaceVariableItem(
        *variable_key(workspace_id, variable.name, variable.category),
        workspace_id=workspace_id,
        org_id=org_id,
        name=variable.name,
        category=category_attribute(variable.category),
        sensitive=variable.sensitive,
        description=variable.description,
        value=None if variable.sensitive else variable.value,
        wrapped_key=stored.wrapped_key,
        sealed=stored.sealed,
        size=stored.size,
        version=stored.version,
        updated_at=variable.updated_at,
        updated_by=variable.updated_by,
    )


def all_of(workspace_id: str, *, reads: IdentityMap) -> list[StoredVariable]:
    """The workspace's variables by name (a consistent read of each). None, without a
    query, when ``reads`` holds the workspace's tally read ahead and it counts none (the
    tally changes in the same transaction as every variable)."""
    known, tally = reads.take_known(tally_key(workspace_id))
    if known and (tally is None or not VariableTallyItem.from_raw_data(tally).variables):
        return []
    items = WorkspaceVariableItem.query(
        f"WS#{workspace_id}",
        WorkspaceVariableItem.sk.startswith(VARIABLE_PREFIX),
        consistent_read=True,
    )
    return sorted((_stored(item) for item in items), key=by_category_and_name)


def find(
    workspace_id: str, name: str, category: VariableCategory = VariableCategory.TERRAFORM
) -> StoredVariable | None:
    try:
        return _stored(
            WorkspaceVariableItem.get(
                *variable_key(workspace_id, name, category), consistent_read=True
            )
        )
    except WorkspaceVariableItem.DoesNotExist:
        return None


def audit_details(variable: WorkspaceVariable) -> dict[str, str]:
    """What an audit event says of a variable: its name, category and sensitive flag,
    never its value."""
    return {
        "name": variable.name,
        "category": variable.category.value,
        "sensitive": str(variable.sensitive).lower(),
    }


def _changed(name: str) -> OnRefused:
    def refuse(current: Item | None) -> Exception:
        return ConcurrentChange(f"variable {name} changed meanwhile; nothing was written")

    return refuse


def _audit(
    org_id: str,
    workspace_id: str,
    event_id: str,
    type_: str,
    details: dict[str, str],
    actor: str,
    now: datetime,
) -> Transaction:
    return Transaction().put_new(
        audit.audit_item(
            key=org_event_key(org_id, f"{now.isoformat()}#{event_id}"),
            event_id=event_id,
            org_id=org_id,
            subject_id=workspace_id,
            type=type_,
            actor=actor,
            at=now,
            details=details,
        )
    )


def put(
    *,
    org_id: str,
    workspace_id: str,
    variable: WorkspaceVariable,
    size: int,
    wrapped_key: bytes | None,
    sealed: bytes | None,
    previous: StoredVariable | None,
    event_id: str,
) -> Transaction:
    """Create (``previous`` None) or replace exactly the ``previous`` version read; the
    tally's condition keeps the workspace within its count and byte limits."""
    name, now = variable.name, variable.updated_at
    item = _item(
        StoredVariable(
            variable,
            size=size,
            version=1 if previous is None else previous.version + 1,
            wrapped_key=wrapped_key,
            sealed=sealed,
        ),
        org_id=org_id,
        workspace_id=workspace_id,
    )
    condition = (
        WorkspaceVariableItem.pk.does_not_exist()
        if previous is None
        else WorkspaceVariableItem.version == previous.version
    )
    grows = size - (0 if previous is None else previous.size)
    added = 1 if previous is None else 0
    tally = VariableTallyItem(*tally_key(workspace_id))
    within = (VariableTallyItem.pk.does_not_exist()) | (
        (VariableTallyItem.variables <= MAX_VARIABLES - added)
        & (VariableTallyItem.bytes <= MAX_VARIABLES_BYTES - grows)
    )

    def over(current: Item | None) -> Exception:
        count = int((current or {}).get("variables", 0))
        if added and count + added > MAX_VARIABLES:
            return InvalidInput(f"a workspace has at most {MAX_VARIABLES} variables", "/name")
        return VariablesTooLarge(
            f"the workspace's variable values would add up to more than "
            f"{MAX_VARIABLES_BYTES:,} bytes",
            "/value",
        )

    details = audit_details(variable)
    return (
        Transaction()
        .put(item, condition=condition, on_refused=_changed(name))
        .update(
            tally,
            [
                VariableTallyItem.workspace_id.set(workspace_id),
                VariableTallyItem.variables.add(added),
                VariableTallyItem.bytes.add(grows),
            ],
            condition=within,
            on_refused=over,
        )
        .extend(
            [
                _audit(
                    org_id,
                    workspace_id,
                    event_id,
                    "workspace.variable_set",
                    details,
                    variable.updated_by,
                    now,
                )
            ]
        )
    )


def delete(
    *,
    org_id: str,
    workspace_id: str,
    previous: StoredVariable,
    actor: str,
    now: datetime,
    event_id: str,
) -> Transaction:
    name = previous.variable.name
    details = audit_details(previous.variable)
    return (
        Transaction()
        .delete(
            WorkspaceVariableItem(*variable_key(workspace_id, name, previous.variable.category)),
            condition=WorkspaceVariableItem.version == previous.version,
            on_refused=_changed(name),
        )
        .update(
            VariableTallyItem(*tally_key(workspace_id)),
            [
                VariableTallyItem.variables.add(-1),
                VariableTallyItem.bytes.add(-previous.size),
            ],
        )
        .extend(
            [
                _audit(
                    org_id,
                    workspace_id,
                    event_id,
                    "workspace.variable_deleted",
                    details,
                    actor,
                    now,
                )
            ]
        )
    )
