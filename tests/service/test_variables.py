"""Workspace variables over the in-memory store: set, list and delete rules, who may
write, tenancy and limits. No fake key service exists, so sensitive values are not
sealed here (tests/integration/test_workspace_variables.py covers them on moto); the
rules that need no KMS call (a sensitive variable stays sensitive) are."""

from __future__ import annotations

import copy

import pytest

from runplane.domain.entities import Workspace
from runplane.domain.errors import ConcurrentChange, InvalidInput, NotFound
from runplane.domain.identity import Forbidden, Permission, Principal
from runplane.domain.variables import MAX_VARIABLES, WorkspaceVariable
from tests.service.conftest import Tier

READ_ONLY = frozenset(
    {Permission.ORGANIZATION_READ, Permission.WORKSPACE_READ, Permission.RUN_READ}
)


def _workspace(tier: Tier, org_name: str = "acme") -> tuple[Principal, Workspace]:
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    return admin, tier.workspaces.create(admin, org_name, "network")


def test_variables_are_set_replaced_listed_and_snapshotted(tier: Tier) -> None:
    # Given a workspace
    admin, ws = _workspace(tier)
    # When two variables are set and one of them replaced
    _, created = tier.variables.set(admin, ws.id, "zone", "a", description="where")
    tier.variables.set(admin, ws.id, "region", "eu-west-3")
    replaced, created_again = tier.variables.set(admin, ws.id, "zone", "b")
    # Then the first set created, the replace did not, and both list by name
    assert (created, created_again) == (True, False)
    assert replaced.updated_by == admin.ref
    listed = tier.variables.list(admin, ws.id)
    assert [(v.name, v.value, v.description) for v in listed] == [
        ("region", "eu-west-3", None),
        ("zone", "b", None),
    ]
    # And a run's snapshot has their values, and each write was audited
    assert tier.variables.snapshot(ws) == {"region": "eu-west-3", "zone": "b"}
    assert [a.type for a in tier.variable_store.audit] == ["workspace.variable_set"] * 3


def test_a_deleted_variable_is_gone_and_an_unknown_one_is_not_found(tier: Tier) -> None:
    # Given a variable
    admin, ws = _workspace(tier)
    tier.variables.set(admin, ws.id, "zone", "a")
    # When it is deleted, then deleted again
    tier.variables.delete(admin, ws.id, "zone")
    # Then it is gone, and the second delete is NotFound
    assert tier.variables.list(admin, ws.id) == []
    with pytest.raises(NotFound):
        tier.variables.delete(admin, ws.id, "zone")
    assert tier.variable_store.audit[-1].type == "workspace.variable_deleted"


def test_a_reader_may_list_but_not_set_or_delete(tier: Tier) -> None:
    # Given a variable, and a principal of the organization who may only read
    admin, ws = _workspace(tier)
    tier.variables.set(admin, ws.id, "zone", "a")
    reader = Principal(
        kind=admin.kind,
        id="bob",
        organization_id=admin.organization_id,
        permissions=READ_ONLY,
        display="bob",
    )
    before = copy.deepcopy(tier.variable_store.variables)
    # When the reader lists, sets and deletes
    # Then listing works, and the writes are Forbidden (403) and change nothing
    assert [v.name for v in tier.variables.list(reader, ws.id)] == ["zone"]
    with pytest.raises(Forbidden):
        tier.variables.set(reader, ws.id, "zone", "b")
    with pytest.raises(Forbidden):
        tier.variables.delete(reader, ws.id, "zone")
    assert tier.variable_store.variables == before


def test_another_organizations_workspace_is_not_found(tier: Tier) -> None:
    # Given a workspace with a variable in another organization
    admin, _ = _workspace(tier)
    theirs_admin, theirs = _workspace(tier, "other")
    tier.variables.set(theirs_admin, theirs.id, "secret_zone", "x")
    before = copy.deepcopy(tier.variable_store.variables)
    # When acme's admin lists, sets or deletes its variables
    # Then each is NotFound, as an unknown workspace is, and nothing changed
    with pytest.raises(NotFound):
        tier.variables.list(admin, theirs.id)
    with pytest.raises(NotFound):
        tier.variables.set(admin, theirs.id, "zone", "a")
    with pytest.raises(NotFound):
        tier.variables.delete(admin, theirs.id, "secret_zone")
    assert tier.variable_store.variables == before


def test_the_variable_after_the_limit_is_refused_and_writes_nothing(tier: Tier) -> None:
    # Given a workspace with as many variables as it may have
    admin, ws = _workspace(tier)
    for n in range(MAX_VARIABLES):
        tier.variables.set(admin, ws.id, f"v{n:03}", "x")
    # When one more is set
    with pytest.raises(InvalidInput) as refused:
        tier.variables.set(admin, ws.id, "extra", "x")
    # Then it is refused on the name, and the workspace still has the limit's number
    assert refused.value.pointer == "/name"
    assert len(tier.variables.list(admin, ws.id)) == MAX_VARIABLES
    # But replacing one of them is no new variable and is allowed
    assert tier.variables.set(admin, ws.id, "v000", "y")[1] is False


def test_a_bad_name_is_invalid_input_and_writes_nothing(tier: Tier) -> None:
    admin, ws = _workspace(tier)
    with pytest.raises(InvalidInput):
        tier.variables.set(admin, ws.id, "no spaces", "x")
    assert tier.variable_store.variables == {}


def test_a_sensitive_variable_is_not_replaced_in_the_clear(tier: Tier) -> None:
    # Given a sensitive variable (stored sealed; the service never returns its value)
    admin, ws = _workspace(tier)
    tier.variable_store.put(
        org_id=ws.organization_id,
        workspace_id=ws.id,
        variable=WorkspaceVariable(
            name="token",
            sensitive=True,
            description=None,
            value=None,
            updated_at=tier.clock.now(),
            updated_by=admin.ref,
        ),
        size=6,
        wrapped_key=b"wrapped",
        sealed=b"sealed",
        previous=None,
        event_id="evt-1",
    )
    before = copy.deepcopy(tier.variable_store.variables)
    # When it is set again without sensitive
    with pytest.raises(InvalidInput) as refused:
        tier.variables.set(admin, ws.id, "token", "in-the-clear")
    # Then it is refused on /sensitive, nothing changed, and listing shows no value
    assert refused.value.pointer == "/sensitive"
    assert tier.variable_store.variables == before
    assert [(v.name, v.sensitive, v.value) for v in tier.variables.list(admin, ws.id)] == [
        ("token", True, None)
    ]


def test_a_variable_changed_between_read_and_write_is_a_concurrent_change(
    tier: Tier,
) -> None:
    # Given a variable, and another writer that replaces it while a set is under way
    admin, ws = _workspace(tier)
    tier.variables.set(admin, ws.id, "zone", "a")
    tier.clock.on_next_reading(lambda: tier.variables.set(admin, ws.id, "zone", "theirs"))
    # When the set that read the older version writes
    with pytest.raises(ConcurrentChange):
        tier.variables.set(admin, ws.id, "zone", "mine")
    # Then the other writer's value stands
    assert tier.variables.snapshot(ws) == {"zone": "theirs"}


def _stored_sensitive(tier: Tier, admin: Principal, ws: Workspace) -> None:
    """A sensitive variable ``token`` as a sealed put leaves it (no fake key service)."""
    tier.variable_store.put(
        org_id=ws.organization_id,
        workspace_id=ws.id,
        variable=WorkspaceVariable(
            name="token",
            sensitive=True,
            description="old",
            value=None,
            updated_at=tier.clock.now(),
            updated_by=admin.ref,
        ),
        size=6,
        wrapped_key=b"wrapped",
        sealed=b"sealed",
        previous=None,
        event_id="evt-1",
    )


def test_a_sensitive_variable_set_without_a_value_keeps_its_sealed_value(tier: Tier) -> None:
    # Given a sensitive variable
    admin, ws = _workspace(tier)
    _stored_sensitive(tier, admin, ws)
    # When it is set sensitive again with no value and a new description
    tier.variables.set(admin, ws.id, "token", None, sensitive=True, description="new")
    # Then its sealed value and size are the ones stored, under the new description
    (stored,) = tier.variable_store.all_of(ws.id)
    assert (stored.wrapped_key, stored.sealed, stored.size) == (b"wrapped", b"sealed", 6)
    assert (stored.variable.description, stored.version) == ("new", 2)
    assert tier.variable_store.audit[-1].type == "workspace.variable_set"


@pytest.mark.parametrize(
    ("name", "sensitive"),
    [("token", False), ("zone", True), ("fresh", True)],
)
def test_a_value_is_kept_only_for_a_stored_sensitive_variable_set_sensitive(
    tier: Tier, name: str, sensitive: bool
) -> None:
    # Given a sensitive variable and a plain one
    admin, ws = _workspace(tier)
    _stored_sensitive(tier, admin, ws)
    tier.variables.set(admin, ws.id, "zone", "a")
    before = copy.deepcopy(tier.variable_store.variables)
    # When a set without a value names the plain one, an unknown one, or the sensitive
    # one in the clear
    with pytest.raises(InvalidInput) as refused:
        tier.variables.set(admin, ws.id, name, None, sensitive=sensitive)
    # Then it is refused on /value, writing nothing
    assert refused.value.pointer == "/value"
    assert "no stored sensitive value to keep" in refused.value.message
    assert tier.variable_store.variables == before
