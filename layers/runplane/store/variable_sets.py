"""Organization variable sets in the table.

Keys (one partition per organization for what lists and limits its sets, one per set
for its variables):

| item | partition | sort |
| --- | --- | --- |
| a set's head | ``VARSETS#<org>`` | ``SET#<set id>`` |
| its name's claim | ``VARSETS#<org>`` | ``NAME#<name>`` |
| the organization's tally (sets, global sets) | ``VARSETS#<org>`` | ``TALLY`` |
| the sets applied to a workspace by name | ``VARSETS#<org>`` | ``APPLIED#<workspace id>`` |
| a set's variable | ``VARSET#<set id>`` | ``VAR#<category>#<name>`` |

The head counts its variables and their bytes: every variable's put and delete
updates it in the same transaction, conditioned on the limits, so concurrent writers
cannot pass them between them. The organization's tally does the same for the number
of sets and of global ones, and a workspace's record for the sets applied to it. Reads
are strongly consistent queries and gets (no index involved).
"""

from __future__ import annotations

from datetime import datetime

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)

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
from runplane.store import audit
from runplane.store.models import NameClaimItem, TableItem
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, Transaction
from runplane.store.workspace_variables import audit_details, by_category_and_name

SET_PREFIX = "SET#"
VARIABLE_PREFIX = "VAR#"


def set_key(org_id: str, set_id: str) -> tuple[str, str]:
    return f"VARSETS#{org_id}", f"{SET_PREFIX}{set_id}"


def name_key(org_id: str, name: str) -> tuple[str, str]:
    return f"VARSETS#{org_id}", f"NAME#{name}"


def tally_key(org_id: str) -> tuple[str, str]:
    return f"VARSETS#{org_id}", "TALLY"


def applied_key(org_id: str, workspace_id: str) -> tuple[str, str]:
    return f"VARSETS#{org_id}", f"APPLIED#{workspace_id}"


def variable_key(set_id: str, category: VariableCategory, name: str) -> tuple[str, str]:
    return f"VARSET#{set_id}", f"{VARIABLE_PREFIX}{category.value}#{name}"


class VariableSetItem(TableItem):
    set_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    description = UnicodeAttribute(null=True)
    is_global = BooleanAttribute()
    workspace_ids: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    variables = NumberAttribute()
    bytes = NumberAttribute()
    version = NumberAttribute()
    created_at = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()


class VariableSetTallyItem(TableItem):
    org_id = UnicodeAttribute()
    sets = NumberAttribute()
    global_sets = NumberAttribute()


class AppliedSetsItem(TableItem):
    """The sets applied to a workspace by name (IDs of sets deleted since may remain
    until the workspace's next application or removal, which drops them)."""

    workspace_id = UnicodeAttribute()
    set_ids: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    version = NumberAttribute()


class VariableSetVariableItem(TableItem):
    """As a workspace variable's item: a sensitive value only sealed (to the set, the
    category and the name)."""

    set_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    category = UnicodeAttribute()
    name = UnicodeAttribute()
    sensitive = BooleanAttribute()
    description = UnicodeAttribute(null=True)
    value = UnicodeAttribute(null=True)
    wrapped_key = BinaryAttribute(null=True, legacy_encoding=False)
    sealed = BinaryAttribute(null=True, legacy_encoding=False)
    size = NumberAttribute()
    version = NumberAttribute()
    updated_at = UTCDateTimeAttribute()
    updated_by = UnicodeAttribute()


# -- mapping -------------------------------------------------------------------------------


def _set(item: VariableSetItem) -> VariableSet:
    """The set an item holds (the inverse of ``_set_item``)."""
    return VariableSet(
        id=item.set_id,
        organization_id=item.org_id,
        name=item.name,
        description=item.description,
        global_=bool(item.is_global),
        workspace_ids=tuple(item.workspace_ids or ()),
        variables=int(item.variables),
        bytes=int(item.bytes),
        version=int(item.version),
        created_at=item.created_at,
        created_by=item.created_by,
        updated_at=item.updated_at,
        updated_by=item.updated_by,
    )


def _set_item(variable_set: VariableSet) -> VariableSetItem:
    return VariableSetItem(
        *set_key(variable_set.organization_id, variable_set.id),
        set_id=variable_set.id,
        org_id=variable_set.organization_id,
        name=variable_set.name,
        description=variable_set.description,
        is_global=variable_set.global_,
        workspace_ids=list(variable_set.workspace_ids),
        variables=variable_set.variables,
        bytes=variable_set.bytes,
        version=variable_set.version,
        created_at=variable_set.created_at,
        created_by=variable_set.created_by,
        updated_at=variable_set.updated_at,
        updated_by=variable_set.updated_by,
    )


def _stored(item: VariableSetVariableItem) -> StoredVariable:
    return StoredVariable(
        variable=WorkspaceVariable(
            name=item.name,
            sensitive=bool(item.sensitive),
            description=item.description,
            value=None if item.sensitive else item.value,
            updated_at=item.updated_at,
            updated_by=item.updated_by,
            category=VariableCategory(item.category),
        ),
        size=int(item.size),
        version=int(item.version),
        wrapped_key=item.wrapped_key,
        sealed=item.sealed,
    )


def _variable_item(stored: StoredVariable, *, org_id: str, set_id: str) -> VariableSetVariableItem:
    variable = stored.variable
    return VariableSetVariableItem(
        *variable_key(set_id, variable.category, variable.name),
        set_id=set_id,
        org_id=org_id,
        category=variable.category.value,
        name=variable.name,
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


# -- reads ----------------------------------------------------------------------------------


def all_of(org_id: str, *, reads: IdentityMap) -> list[VariableSet]:
    """The organization's sets by name. None, without a query, when the request read the
    organization's tally ahead (``reads``) and it counts none (the tally changes in the same
    transaction as every set's creation and deletion)."""
    known, tally = reads.take_known(tally_key(org_id))
    if known and (tally is None or not VariableSetTallyItem.from_raw_data(tally).sets):
        return []
    pk, _ = set_key(org_id, "")
    items = VariableSetItem.query(
        pk, VariableSetItem.sk.startswith(SET_PREFIX), consistent_read=True
    )
    return sorted((_set(item) for item in items), key=lambda s: s.name)


def get(org_id: str, set_id: str) -> VariableSet:
    try:
        return _set(VariableSetItem.get(*set_key(org_id, set_id), consistent_read=True))
    except VariableSetItem.DoesNotExist:
        raise NotFound("variable set", set_id) from None


def find_id(org_id: str, name: str) -> str | None:
    try:
        return str(NameClaimItem.get(*name_key(org_id, name), consistent_read=True).owner_id)
    except NameClaimItem.DoesNotExist:
        return None


def workspace_sets(org_id: str, workspace_id: str) -> WorkspaceSets:
    try:
        item = AppliedSetsItem.get(*applied_key(org_id, workspace_id), consistent_read=True)
    except AppliedSetsItem.DoesNotExist:
        return WorkspaceSets(workspace_id, (), 0)
    return WorkspaceSets(workspace_id, tuple(item.set_ids or ()), int(item.version))


def variables(set_id: str) -> list[StoredVariable]:
    items = VariableSetVariableItem.query(
        f"VARSET#{set_id}",
        VariableSetVariableItem.sk.startswith(VARIABLE_PREFIX),
        consistent_read=True,
    )
    return sorted((_stored(item) for item in items), key=by_category_and_name)


def find_variable(set_id: str, category: VariableCategory, name: str) -> StoredVariable | None:
    try:
        return _stored(
            VariableSetVariableItem.get(*variable_key(set_id, category, name), consistent_read=True)
        )
    except VariableSetVariableItem.DoesNotExist:
        return None


# -- writes ---------------------------------------------------------------------------------


def _event(
    variable_set: VariableSet,
    event_id: str,
    type_: str,
    details: dict[str, str],
    actor: str,
    now: datetime,
) -> Transaction:
    return audit.org_event(
        organization_id=variable_set.organization_id,
        subject_id=variable_set.id,
        event_id=event_id,
        type=type_,
        actor=actor,
        at=now,
        details={"variable_set_id": variable_set.id, "name": variable_set.name, **details},
    )


def _stale(variable_set: VariableSet) -> ConcurrentChange:
    return ConcurrentChange(
        f"variable set {variable_set.name} changed meanwhile; nothing was written"
    )


def _gone_or_stale(variable_set: VariableSet, head: Item | None) -> Exception:
    """A head write refused: the set was deleted (404) or changed meanwhile (409)."""
    if head is None:
        return NotFound("variable set", variable_set.id)
    return _stale(variable_set)


def _name_taken(name: str) -> Exception:
    return AlreadyExists(f"a variable set named {name} exists in the organization")


def _count(current: Item | None, field: str) -> int:
    return int((current or {}).get(field, 0))


def _tally_change(org_id: str, *, sets: int, global_sets: int) -> Transaction:
    """The organization's tally moved by ``sets`` and ``global_sets``; an increase only
    within the limits."""
    tally = VariableSetTallyItem(*tally_key(org_id))
    within = None
    if sets > 0 or global_sets > 0:
        fits = []
        if sets > 0:
            fits.append(VariableSetTallyItem.sets <= MAX_SETS_PER_ORGANIZATION - sets)
        if global_sets > 0:
            fits.append(VariableSetTallyItem.global_sets <= MAX_GLOBAL_SETS - global_sets)
        condition = fits[0] if len(fits) == 1 else fits[0] & fits[1]
        within = VariableSetTallyItem.pk.does_not_exist() | condition

    def over(current: Item | None) -> Exception:
        if sets > 0 and _count(current, "sets") + sets > MAX_SETS_PER_ORGANIZATION:
            return VariableSetLimit(
                f"an organization has at most {MAX_SETS_PER_ORGANIZATION} variable sets", "/name"
            )
        return VariableSetLimit(
            f"an organization has at most {MAX_GLOBAL_SETS} global variable sets", "/global"
        )

    return Transaction().update(
        tally,
        [
            VariableSetTallyItem.org_id.set(org_id),
            VariableSetTallyItem.sets.add(sets),
            VariableSetTallyItem.global_sets.add(global_sets),
        ],
        condition=within,
        on_refused=over,
    )


def create(variable_set: VariableSet, *, event_id: str) -> Transaction:
    name, org_id = variable_set.name, variable_set.organization_id
    return (
        Transaction()
        .put_new(
            NameClaimItem(*name_key(org_id, name), owner_id=variable_set.id),
            on_refused=lambda current: _name_taken(name),
        )
        .put_new(
            _set_item(variable_set),
            on_refused=lambda current: ConcurrentChange(
                f"variable set {variable_set.id} exists; nothing was written"
            ),
        )
        .extend(
            [
                _tally_change(org_id, sets=1, global_sets=1 if variable_set.global_ else 0),
                _event(
                    variable_set,
                    event_id,
                    "variable_set.created",
                    {"global": str(variable_set.global_).lower()},
                    variable_set.created_by,
                    variable_set.created_at,
                ),
            ]
        )
    )


def update(current: VariableSet, updated: VariableSet, *, event_id: str) -> Transaction:
    org_id = current.organization_id
    # Only what an update changes: the counters move with the variables' own writes,
    # which leave the version as it is.
    writes = Transaction().update(
        VariableSetItem(*set_key(org_id, current.id)),
        [
            VariableSetItem.name.set(updated.name),
            (
                VariableSetItem.description.set(updated.description)
                if updated.description is not None
                else VariableSetItem.description.remove()
            ),
            VariableSetItem.is_global.set(updated.global_),
            VariableSetItem.version.set(current.version + 1),
            VariableSetItem.updated_at.set(updated.updated_at),
            VariableSetItem.updated_by.set(updated.updated_by),
        ],
        condition=VariableSetItem.version == current.version,
        on_refused=lambda item: _gone_or_stale(current, item),
    )
    if updated.name != current.name:
        writes.put_new(
            NameClaimItem(*name_key(org_id, updated.name), owner_id=current.id),
            on_refused=lambda item: _name_taken(updated.name),
        ).delete(
            NameClaimItem(*name_key(org_id, current.name)),
            condition=NameClaimItem.owner_id == current.id,
            on_refused=lambda item: _stale(current),
        )
    if updated.global_ != current.global_:
        writes.extend([_tally_change(org_id, sets=0, global_sets=1 if updated.global_ else -1)])
    details = {"global": str(updated.global_).lower()}
    if updated.name != current.name:
        details["previous_name"] = current.name
    return writes.extend(
        [
            _event(
                updated,
                event_id,
                "variable_set.updated",
                details,
                updated.updated_by,
                updated.updated_at,
            )
        ]
    )


def delete(current: VariableSet, *, actor: str, now: datetime, event_id: str) -> Transaction:
    """The head, its name and its count in the tally; its variables are deleted after
    (``delete_variables``): once the head is gone nothing reads or writes them."""
    org_id = current.organization_id
    return (
        Transaction()
        .delete(
            VariableSetItem(*set_key(org_id, current.id)),
            condition=VariableSetItem.version == current.version,
            on_refused=lambda item: _gone_or_stale(current, item),
        )
        .delete(
            NameClaimItem(*name_key(org_id, current.name)),
            condition=NameClaimItem.owner_id == current.id,
            on_refused=lambda item: _stale(current),
        )
        .extend(
            [
                _tally_change(org_id, sets=-1, global_sets=-1 if current.global_ else 0),
                _event(current, event_id, "variable_set.deleted", {}, actor, now),
            ]
        )
    )


def delete_variables(set_id: str) -> None:
    """Every variable of a deleted set (each one item; a set holds at most 100)."""
    with VariableSetVariableItem.batch_write() as batch:
        for item in VariableSetVariableItem.query(
            f"VARSET#{set_id}",
            VariableSetVariableItem.sk.startswith(VARIABLE_PREFIX),
            consistent_read=True,
        ):
            batch.delete(item)


def _application(
    current: VariableSet,
    applied: WorkspaceSets,
    set_ids: tuple[str, ...],
    workspace_ids: tuple[str, ...],
    *,
    actor: str,
    now: datetime,
    event_id: str,
    type_: str,
) -> Transaction:
    org_id, workspace_id = current.organization_id, applied.workspace_id
    head = VariableSetItem(*set_key(org_id, current.id))
    record = AppliedSetsItem(
        *applied_key(org_id, workspace_id),
        workspace_id=workspace_id,
        set_ids=list(set_ids),
        version=applied.version + 1,
    )
    recorded = (
        AppliedSetsItem.pk.does_not_exist()
        if applied.version == 0
        else AppliedSetsItem.version == applied.version
    )
    return (
        Transaction()
        .update(
            head,
            [
                VariableSetItem.workspace_ids.set(list(workspace_ids)),
                VariableSetItem.version.set(current.version + 1),
                VariableSetItem.updated_at.set(now),
                VariableSetItem.updated_by.set(actor),
            ],
            condition=VariableSetItem.version == current.version,
            on_refused=lambda item: _gone_or_stale(current, item),
        )
        .put(
            record,
            condition=recorded,
            on_refused=lambda item: ConcurrentChange(
                f"the variable sets of workspace {workspace_id} changed meanwhile; "
                "nothing was written"
            ),
        )
        .extend([_event(current, event_id, type_, {"workspace_id": workspace_id}, actor, now)])
    )


def apply(
    current: VariableSet,
    applied: WorkspaceSets,
    keep: tuple[str, ...],
    *,
    actor: str,
    now: datetime,
    event_id: str,
) -> Transaction:
    workspace_id = applied.workspace_id
    return _application(
        current,
        applied,
        (*(s for s in keep if s != current.id), current.id),
        (*(w for w in current.workspace_ids if w != workspace_id), workspace_id),
        actor=actor,
        now=now,
        event_id=event_id,
        type_="variable_set.applied",
    )


def unapply(
    current: VariableSet,
    applied: WorkspaceSets,
    keep: tuple[str, ...],
    *,
    actor: str,
    now: datetime,
    event_id: str,
) -> Transaction:
    workspace_id = applied.workspace_id
    return _application(
        current,
        applied,
        tuple(s for s in keep if s != current.id),
        tuple(w for w in current.workspace_ids if w != workspace_id),
        actor=actor,
        now=now,
        event_id=event_id,
        type_="variable_set.unapplied",
    )


def put_variable(
    current: VariableSet,
    *,
    variable: WorkspaceVariable,
    size: int,
    wrapped_key: bytes | None,
    sealed: bytes | None,
    previous: StoredVariable | None,
    event_id: str,
) -> Transaction:
    """Create (``previous`` None) or replace exactly the ``previous`` version read; the
    head's counters keep the set within its limits and refuse a set deleted meanwhile."""
    name, org_id = variable.name, current.organization_id
    item = _variable_item(
        StoredVariable(
            variable,
            size=size,
            version=1 if previous is None else previous.version + 1,
            wrapped_key=wrapped_key,
            sealed=sealed,
        ),
        org_id=org_id,
        set_id=current.id,
    )
    condition = (
        VariableSetVariableItem.pk.does_not_exist()
        if previous is None
        else VariableSetVariableItem.version == previous.version
    )
    added = 1 if previous is None else 0
    grows = size - (0 if previous is None else previous.size)
    within = (
        VariableSetItem.pk.exists()
        & (VariableSetItem.variables <= MAX_SET_VARIABLES - added)
        & (VariableSetItem.bytes <= MAX_SET_BYTES - grows)
    )

    def over(head: Item | None) -> Exception:
        if head is None:
            return NotFound("variable set", current.id)
        if added and _count(head, "variables") + added > MAX_SET_VARIABLES:
            return VariableSetLimit(
                f"a variable set has at most {MAX_SET_VARIABLES} variables", "/name"
            )
        return VariablesTooLarge(
            f"the variable set's values would add up to more than {MAX_SET_BYTES:,} bytes",
            "/value",
        )

    return (
        Transaction()
        .put(
            item,
            condition=condition,
            on_refused=lambda found: ConcurrentChange(
                f"variable {name} changed meanwhile; nothing was written"
            ),
        )
        .update(
            VariableSetItem(*set_key(org_id, current.id)),
            [VariableSetItem.variables.add(added), VariableSetItem.bytes.add(grows)],
            condition=within,
            on_refused=over,
        )
        .extend(
            [
                _event(
                    current,
                    event_id,
                    "variable_set.variable_set",
                    _variable_details(variable),
                    variable.updated_by,
                    variable.updated_at,
                )
            ]
        )
    )


def delete_variable(
    current: VariableSet,
    *,
    previous: StoredVariable,
    actor: str,
    now: datetime,
    event_id: str,
) -> Transaction:
    variable, org_id = previous.variable, current.organization_id
    return (
        Transaction()
        .delete(
            VariableSetVariableItem(*variable_key(current.id, variable.category, variable.name)),
            condition=VariableSetVariableItem.version == previous.version,
            on_refused=lambda found: ConcurrentChange(
                f"variable {variable.name} changed meanwhile; nothing was written"
            ),
        )
        .update(
            VariableSetItem(*set_key(org_id, current.id)),
            [VariableSetItem.variables.add(-1), VariableSetItem.bytes.add(-previous.size)],
            condition=VariableSetItem.pk.exists(),
            on_refused=lambda head: NotFound("variable set", current.id),
        )
        .extend(
            [
                _event(
                    current,
                    event_id,
                    "variable_set.variable_deleted",
                    _variable_details(variable),
                    actor,
                    now,
                )
            ]
        )
    )


def _variable_details(variable: WorkspaceVariable) -> dict[str, str]:
    details = audit_details(variable)
    return {"variable": details.pop("name"), **details}
