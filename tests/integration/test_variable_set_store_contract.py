"""The variable sets contract: the same cases against the DynamoDB store (on moto) and
the in-memory fake the service tier uses (tests/service), so the fake cannot drift from
the table's conditions and limits. Every refused write is checked to have written
nothing, audit events included."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

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
)
from runplane.domain.variables import StoredVariable, VariableCategory, WorkspaceVariable
from runplane.services.repositories.variable_sets import VariableSetStore
from runplane.store import audit
from runplane.store.variable_set_store import DynamoVariableSetStore
from tests.fakes_variable_sets import InMemoryVariableSets

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG, OTHER = "org-acme", "org-other"
TF, ENV = VariableCategory.TERRAFORM, VariableCategory.ENV


@dataclass
class Contract:
    store: VariableSetStore
    audit_types: Callable[[str], list[str]]


@pytest.fixture(params=["dynamodb", "memory"])
def sets(request: pytest.FixtureRequest) -> Contract:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return Contract(
            DynamoVariableSetStore(), lambda org: [e.type for e in audit.organization_trail(org)]
        )
    fake = InMemoryVariableSets()
    return Contract(
        fake, lambda org: [a.type for a in fake.audit if fake_org(fake, a.subject_id) == org]
    )


def fake_org(fake: InMemoryVariableSets, set_id: str) -> str:
    # The fake's audit names the set; every set of these tests is named after its org.
    return OTHER if set_id.startswith("varset-other") else ORG


_events = iter(range(10**6))


def event() -> str:
    return f"evt-{next(_events):07d}"


def new_set(
    name: str, *, org: str = ORG, global_: bool = False, set_id: str | None = None
) -> VariableSet:
    prefix = "varset-other" if org == OTHER else "varset"
    return VariableSet(
        id=set_id or f"{prefix}-{name}",
        organization_id=org,
        name=name,
        description=None,
        global_=global_,
        workspace_ids=(),
        variables=0,
        bytes=0,
        version=1,
        created_at=AT,
        created_by="user:ada",
        updated_at=AT,
        updated_by="user:ada",
    )


def put(
    store: VariableSetStore,
    current: VariableSet,
    name: str,
    value: str = "v",
    *,
    category: VariableCategory = TF,
    previous: StoredVariable | None = None,
    size: int | None = None,
) -> None:
    store.put_variable(
        current,
        variable=WorkspaceVariable(
            name=name,
            sensitive=False,
            description=None,
            value=value,
            updated_at=AT,
            updated_by="user:ada",
            category=category,
        ),
        size=len(value) if size is None else size,
        wrapped_key=None,
        sealed=None,
        previous=previous,
        event_id=event(),
    )


def test_sets_are_created_read_in_name_order_and_stay_in_their_organization(
    sets: Contract,
) -> None:
    store = sets.store
    # Given two sets of one organization and one of another
    store.create(new_set("prod"), event_id=event())
    store.create(new_set("base", global_=True), event_id=event())
    store.create(new_set("prod", org=OTHER), event_id=event())

    # Then each organization reads its own, by name
    assert [s.name for s in store.all_of(ORG)] == ["base", "prod"]
    assert [s.id for s in store.all_of(OTHER)] == ["varset-other-prod"]
    assert store.get(ORG, "varset-base").global_ is True
    assert store.find_id(ORG, "prod") == "varset-prod"
    assert store.find_id(ORG, "nope") is None
    # And another organization's set is not found
    with pytest.raises(NotFound):
        store.get(ORG, "varset-other-prod")
    assert sets.audit_types(ORG) == ["variable_set.created"] * 2


def test_a_taken_name_or_id_is_refused_and_writes_nothing(sets: Contract) -> None:
    store = sets.store
    store.create(new_set("prod"), event_id=event())

    with pytest.raises(AlreadyExists):
        store.create(new_set("prod", set_id="varset-second"), event_id=event())
    with pytest.raises(ConcurrentChange):
        store.create(new_set("other", set_id="varset-prod"), event_id=event())

    assert [s.id for s in store.all_of(ORG)] == ["varset-prod"]
    assert store.find_id(ORG, "other") is None
    assert sets.audit_types(ORG) == ["variable_set.created"]


def test_the_organizations_set_and_global_limits_hold(sets: Contract) -> None:
    store = sets.store
    # Given the organization at its global limit
    for n in range(MAX_GLOBAL_SETS):
        store.create(new_set(f"g{n:03d}", global_=True), event_id=event())
    # When another global set is created, or a set is made global
    with pytest.raises(VariableSetLimit):
        store.create(new_set("g-more", global_=True), event_id=event())
    store.create(new_set("plain"), event_id=event())
    plain = store.get(ORG, "varset-plain")
    with pytest.raises(VariableSetLimit):
        store.update(plain, replace(plain, global_=True, version=2), event_id=event())
    # Then neither was written
    assert store.get(ORG, "varset-plain").global_ is False
    assert store.find_id(ORG, "g-more") is None

    # Given the organization at its set limit
    for n in range(MAX_SETS_PER_ORGANIZATION - MAX_GLOBAL_SETS - 1):
        store.create(new_set(f"s{n:03d}"), event_id=event())
    # When one more is created, then it is refused; one deleted makes room
    with pytest.raises(VariableSetLimit):
        store.create(new_set("extra"), event_id=event())
    assert len(store.all_of(ORG)) == MAX_SETS_PER_ORGANIZATION
    store.delete(store.get(ORG, "varset-s000"), actor="user:ada", now=AT, event_id=event())
    store.create(new_set("extra"), event_id=event())
    assert store.find_id(ORG, "extra") == "varset-extra"


def test_an_update_renames_over_the_version_read_and_keeps_the_counters(
    sets: Contract,
) -> None:
    store = sets.store
    store.create(new_set("prod"), event_id=event())
    store.create(new_set("taken"), event_id=event())
    read = store.get(ORG, "varset-prod")
    # Given a variable set after the head was read
    put(store, read, "region", "eu-west-1")

    # When the set is renamed from what was read
    later = AT + timedelta(minutes=1)
    store.update(
        read,
        replace(read, name="live", description="the live one", version=2, updated_at=later),
        event_id=event(),
    )

    # Then the new name finds it, the old one is free, and its counters are the stored ones
    found = store.get(ORG, "varset-prod")
    assert (found.name, found.description, found.version) == ("live", "the live one", 2)
    assert (found.variables, found.bytes) == (1, len("eu-west-1"))
    assert store.find_id(ORG, "live") == "varset-prod"
    assert store.find_id(ORG, "prod") is None
    # And a stale update, or one to a taken name, is refused and writes nothing
    with pytest.raises(ConcurrentChange):
        store.update(read, replace(read, name="again", version=2), event_id=event())
    with pytest.raises(AlreadyExists):
        store.update(found, replace(found, name="taken", version=3), event_id=event())
    assert store.get(ORG, "varset-prod") == found
    assert store.find_id(ORG, "again") is None
    assert store.find_id(ORG, "taken") == "varset-taken"
    assert sets.audit_types(ORG).count("variable_set.updated") == 1


def test_a_deleted_set_loses_its_name_and_variables_and_takes_no_more(sets: Contract) -> None:
    store = sets.store
    store.create(new_set("prod"), event_id=event())
    head = store.get(ORG, "varset-prod")
    put(store, head, "region")
    put(store, head, "AWS_REGION", category=ENV)
    store.apply(
        head, store.workspace_sets(ORG, "ws-1"), (), actor="user:ada", now=AT, event_id=event()
    )
    # A head read before its application is stale: nothing is deleted
    with pytest.raises(ConcurrentChange):
        store.delete(head, actor="user:ada", now=AT, event_id=event())
    assert len(store.variables("varset-prod")) == 2
    current = store.get(ORG, "varset-prod")

    store.delete(current, actor="user:ada", now=AT, event_id=event())

    with pytest.raises(NotFound):
        store.get(ORG, "varset-prod")
    assert store.all_of(ORG) == []
    assert store.find_id(ORG, "prod") is None
    assert store.variables("varset-prod") == []
    with pytest.raises(NotFound):
        put(store, current, "late")
    assert store.variables("varset-prod") == []
    # The workspace's record still names it, until the workspace's next application
    assert store.workspace_sets(ORG, "ws-1").set_ids == ("varset-prod",)
    assert sets.audit_types(ORG)[-1] == "variable_set.deleted"


def test_applying_and_removing_moves_the_head_and_the_workspaces_record(sets: Contract) -> None:
    store = sets.store
    store.create(new_set("prod"), event_id=event())
    store.create(new_set("dev"), event_id=event())
    prod, dev = store.get(ORG, "varset-prod"), store.get(ORG, "varset-dev")

    empty = store.workspace_sets(ORG, "ws-1")
    assert (empty.set_ids, empty.version) == ((), 0)
    store.apply(prod, empty, (), actor="user:ada", now=AT, event_id=event())
    first = store.workspace_sets(ORG, "ws-1")
    # A second application over the record as it was is refused, writing nothing
    with pytest.raises(ConcurrentChange):
        store.apply(dev, empty, (), actor="user:ada", now=AT, event_id=event())
    assert store.get(ORG, "varset-dev").workspace_ids == ()
    store.apply(dev, first, first.set_ids, actor="user:ada", now=AT, event_id=event())

    assert store.workspace_sets(ORG, "ws-1").set_ids == ("varset-prod", "varset-dev")
    assert store.get(ORG, "varset-prod").workspace_ids == ("ws-1",)
    assert store.get(ORG, "varset-prod").version == 2
    # A head read before its application is stale
    with pytest.raises(ConcurrentChange):
        store.unapply(
            prod,
            store.workspace_sets(ORG, "ws-1"),
            ("varset-prod", "varset-dev"),
            actor="user:ada",
            now=AT,
            event_id=event(),
        )
    record = store.workspace_sets(ORG, "ws-1")
    store.unapply(
        store.get(ORG, "varset-prod"),
        record,
        record.set_ids,
        actor="user:ada",
        now=AT,
        event_id=event(),
    )
    assert store.workspace_sets(ORG, "ws-1").set_ids == ("varset-dev",)
    assert store.get(ORG, "varset-prod").workspace_ids == ()
    types = sets.audit_types(ORG)
    assert (types.count("variable_set.applied"), types.count("variable_set.unapplied")) == (2, 1)


def test_a_sets_variables_are_per_category_versioned_and_within_its_limits(
    sets: Contract,
) -> None:
    store = sets.store
    store.create(new_set("prod"), event_id=event())
    head = store.get(ORG, "varset-prod")
    # The same name in both categories, read back Terraform first, then by name
    put(store, head, "region", "eu-west-1")
    put(store, head, "region", "EU", category=ENV)
    put(store, head, "AWS_REGION", "eu-west-1", category=ENV)
    listed = [(s.variable.category, s.variable.name) for s in store.variables(head.id)]
    assert listed == [(TF, "region"), (ENV, "AWS_REGION"), (ENV, "region")]
    first = store.find_variable(head.id, ENV, "region")
    assert first is not None
    assert first.version == 1
    # A replace names the version read; a stale one, or a create over it, is refused
    put(store, head, "region", "EU-2", category=ENV, previous=first)
    with pytest.raises(ConcurrentChange):
        put(store, head, "region", "EU-3", category=ENV, previous=first)
    with pytest.raises(ConcurrentChange):
        put(store, head, "region", "EU-3", category=ENV)
    replaced = store.find_variable(head.id, ENV, "region")
    assert replaced is not None
    assert (replaced.version, replaced.variable.value) == (2, "EU-2")
    # A delete names the version read
    with pytest.raises(ConcurrentChange):
        store.delete_variable(head, previous=first, actor="user:ada", now=AT, event_id=event())
    store.delete_variable(head, previous=replaced, actor="user:ada", now=AT, event_id=event())
    assert store.find_variable(head.id, ENV, "region") is None
    found = store.get(ORG, head.id)
    assert (found.variables, found.bytes) == (2, len("eu-west-1") * 2)
    assert found.version == head.version  # variables move the counters, not the head

    # The count and byte limits hold, and a refused put writes nothing
    for n in range(MAX_SET_VARIABLES - 2):
        put(store, head, f"v{n:03d}", "", size=0)
    with pytest.raises(VariableSetLimit):
        put(store, head, "one_more")
    big = store.find_variable(head.id, TF, "v000")
    assert big is not None
    with pytest.raises(VariablesTooLarge):
        put(store, head, "v000", previous=big, size=MAX_SET_BYTES)
    assert store.find_variable(head.id, TF, "one_more") is None
    unchanged = store.find_variable(head.id, TF, "v000")
    assert unchanged is not None
    assert unchanged.version == 1
    assert store.get(ORG, head.id).variables == MAX_SET_VARIABLES
