"""The workspace variables contract: the same cases against the DynamoDB store (on
moto) and the in-memory fake the service tier uses (tests/service), so the fake cannot
drift from the table's conditions and limits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runplane.domain.errors import ConcurrentChange, InvalidInput, VariablesTooLarge
from runplane.domain.variables import (
    MAX_VARIABLES,
    MAX_VARIABLES_BYTES,
    StoredVariable,
    WorkspaceVariable,
)
from runplane.services.repositories import VariableStore
from runplane.store.variable_store import DynamoVariableStore
from tests.fakes import InMemoryVariables

AT = datetime(2026, 1, 1, tzinfo=UTC)
WS = "ws-1"


@pytest.fixture(params=["dynamodb", "memory"])
def variables(request: pytest.FixtureRequest) -> VariableStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoVariableStore()
    return InMemoryVariables()


def _put(
    store: VariableStore,
    name: str,
    value: str = "v",
    *,
    previous: StoredVariable | None = None,
    size: int | None = None,
    workspace_id: str = WS,
) -> None:
    store.put(
        org_id="org-acme",
        workspace_id=workspace_id,
        variable=WorkspaceVariable(
            name=name,
            sensitive=False,
            description=None,
            value=value,
            updated_at=AT,
            updated_by="user:ada",
        ),
        size=len(value) if size is None else size,
        wrapped_key=None,
        sealed=None,
        previous=previous,
        event_id=f"evt-{name}-{value}",
    )


def _delete(store: VariableStore, previous: StoredVariable) -> None:
    store.delete(
        org_id="org-acme",
        workspace_id=WS,
        previous=previous,
        actor="user:ada",
        now=AT,
        event_id=f"evt-del-{previous.variable.name}",
    )


def _found(store: VariableStore, name: str, workspace_id: str = WS) -> StoredVariable:
    found = store.find(workspace_id, name)
    assert found is not None
    return found


def test_variables_read_back_in_name_order_and_a_replace_bumps_the_version(
    variables: VariableStore,
) -> None:
    # Given two variables, and one in another workspace
    _put(variables, "zone", "a")
    _put(variables, "region", "eu")
    _put(variables, "other", "x", workspace_id="ws-2")
    # When one is replaced with the version read
    _put(variables, "zone", "b", previous=_found(variables, "zone"))
    # Then the workspace's variables read back by name, the replaced one at version 2
    listed = variables.all_of(WS)
    assert [(s.variable.name, s.variable.value, s.version) for s in listed] == [
        ("region", "eu", 1),
        ("zone", "b", 2),
    ]
    assert variables.find(WS, "other") is None
    assert variables.find(WS, "none") is None


def test_a_create_over_a_taken_name_or_a_stale_replace_is_refused_and_writes_nothing(
    variables: VariableStore,
) -> None:
    # Given a variable read at version 1, then replaced by another writer
    _put(variables, "zone", "a")
    stale = _found(variables, "zone")
    _put(variables, "zone", "b", previous=stale)
    before = variables.all_of(WS)
    # When it is created again, or replaced or deleted with the stale version
    # Then each is ConcurrentChange and the variable is as the other writer left it
    with pytest.raises(ConcurrentChange):
        _put(variables, "zone", "c")
    with pytest.raises(ConcurrentChange):
        _put(variables, "zone", "d", previous=stale)
    with pytest.raises(ConcurrentChange):
        _delete(variables, stale)
    assert variables.all_of(WS) == before


def test_a_deleted_variable_is_gone_and_a_second_delete_is_refused(
    variables: VariableStore,
) -> None:
    # Given a variable, deleted with the version read
    _put(variables, "zone", "a")
    read = _found(variables, "zone")
    _delete(variables, read)
    # Then it is gone, deleting it again is refused, and the name can be created anew
    assert variables.all_of(WS) == []
    with pytest.raises(ConcurrentChange):
        _delete(variables, read)
    _put(variables, "zone", "b")
    assert _found(variables, "zone").version == 1


def test_the_variable_after_the_limit_is_invalid_input_but_a_replace_is_not(
    variables: VariableStore,
) -> None:
    # Given a workspace at its limit of variables
    for n in range(MAX_VARIABLES):
        _put(variables, f"v{n:03}")
    # When one more is created
    with pytest.raises(InvalidInput) as refused:
        _put(variables, "extra")
    # Then it is refused on the name and nothing was written; replacing one still works
    assert refused.value.pointer == "/name"
    assert variables.find(WS, "extra") is None
    _put(variables, "v000", "new", previous=_found(variables, "v000"))
    assert len(variables.all_of(WS)) == MAX_VARIABLES


def test_values_past_the_byte_limit_are_too_large_and_write_nothing(
    variables: VariableStore,
) -> None:
    # Given variables whose values add up to exactly the byte limit
    quarter = MAX_VARIABLES_BYTES // 4
    for n in range(4):
        _put(variables, f"big{n}", size=quarter)
    before = variables.all_of(WS)
    # When another byte is added, by a new variable or by growing one
    # Then both are VariablesTooLarge and nothing changed
    with pytest.raises(VariablesTooLarge):
        _put(variables, "small", size=1)
    with pytest.raises(VariablesTooLarge):
        _put(variables, "big0", size=quarter + 1, previous=_found(variables, "big0"))
    assert variables.all_of(WS) == before
    # And once one is deleted, its bytes are free again
    _delete(variables, _found(variables, "big3"))
    _put(variables, "small", size=1)
