"""Workspace variables against moto (DynamoDB, S3, KMS): sealing, limits, permissions,
audit, and the snapshot every run takes at creation."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import requests

from runplane.adapters.keys import KeyUnavailable
from runplane.adapters.sealed import Sealed, unseal
from runplane.domain.errors import InvalidInput, NotFound, VariablesTooLarge
from runplane.domain.identity import Forbidden, Principal
from runplane.domain.run import RunKind
from runplane.domain.variables import MAX_VARIABLE_BYTES, MAX_VARIABLES
from runplane.services.runs import Runs
from runplane.store import audit, run_parts
from runplane.store import workspace_variables as variable_store
from tests.integration.arena import Arena

SECRET = "s3cr3t-token-value-7f1d"


def principal_of(arena: Arena, org_id: str, role: str) -> Principal:
    from runplane.domain.identity import ROLES

    token = arena.stack.identity.issue_token(
        org_id, role, sorted(ROLES[role]), created_by="test"
    ).token
    return arena.stack.identity.authenticate(f"Bearer {token}")


def uploaded(arena: Arena, runs: Runs, ws_id: str) -> str:
    upload = runs.new_configuration_upload(arena.admin, ws_id)
    requests.put(upload.upload_url, data=b"config", timeout=30).raise_for_status()
    return str(runs.finalize_configuration(arena.admin, upload.id)["id"])


def everything(arena: Arena) -> str:
    """The table and the bucket's objects, as text: where a value must not be."""
    stack = arena.stack
    objects = [
        stack.s3.get_object(Bucket="runplane-artifacts-test", Key=key)["Body"].read()  # type: ignore[attr-defined]
        for key in stack.bucket_keys()
    ]
    return json.dumps(stack.scan(), default=str) + repr(objects)


def test_a_sensitive_variable_is_sealed_to_its_workspace_and_name_and_never_read_back(
    arena: Arena,
) -> None:
    # Given a workspace
    variables = arena.stack.services.workspace_variables
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "vars-sealed")

    # When an admin sets a plain and a sensitive variable
    _, created = variables.set(arena.admin, ws.id, "region", "eu-west-1", description="where")
    variables.set(arena.admin, ws.id, "token", SECRET, sensitive=True)

    # Then the list shows the plain value and only the sensitive one's name
    views = {v.name: v.view() for v in variables.list(arena.admin, ws.id)}
    assert created is True
    assert views["region"]["value"] == "eu-west-1"
    assert views["region"]["description"] == "where"
    assert (views["token"]["sensitive"], views["token"]["value"]) == (True, None)
    # And the sensitive value is nowhere in the table or the bucket, nor in any repr
    assert SECRET not in everything(arena)
    stored = variable_store.find(ws.id, "token")
    assert stored is not None
    assert SECRET not in repr(stored)
    # And its seal opens only for its own workspace and name
    sealed = Sealed(stored.wrapped_key or b"", stored.sealed or b"")
    context = {"purpose": "workspace-variable", "workspace_id": ws.id, "name": "token"}
    assert unseal(arena.stack.keys, context, sealed) == SECRET.encode()
    for moved in ({**context, "name": "region"}, {**context, "workspace_id": "ws-other"}):
        with pytest.raises(KeyUnavailable):
            unseal(arena.stack.keys, moved, sealed)


def test_every_run_snapshots_the_workspace_variables_under_its_own(arena: Arena) -> None:
    # Given a workspace with a plain and a sensitive variable
    stack = arena.stack
    variables = stack.services.workspace_variables
    runs = stack.services.runs
    ws = stack.tenancy.create_workspace(arena.org.id, "vars-merge")
    variables.set(arena.admin, ws.id, "region", "eu-west-1")
    variables.set(arena.admin, ws.id, "token", SECRET, sensitive=True)

    # When a run is created with its own value for region
    run = runs.create(
        arena.admin,
        ws.id,
        kind=RunKind.PLAN_ONLY,
        configuration_version_id=uploaded(arena, runs, ws.id),
        engine_version=None,
        variables={"region": "us-east-2", "extra": "x"},
    )
    # ... and the workspace's variables change afterwards
    variables.set(arena.admin, ws.id, "region", "ap-south-1")
    variables.delete(arena.admin, ws.id, "token")

    # Then the run's variables artifact holds the merged set as it was at creation,
    # the run's own value winning
    snapshot = run_parts.require(run.id, "input").body
    pinned = json.loads(stack.artifacts.read(arena.org.id, snapshot["variables_artifact_id"]))
    assert pinned == {"region": "us-east-2", "extra": "x", "token": SECRET}
    assert snapshot["variable_names"] == ["extra", "region", "token"]
    assert snapshot["workspace_variable_names"] == ["token"]
    # And the review names each variable and its source, never a value
    review = runs.review(arena.admin, run.id)
    plain = {"category": "terraform", "variable_set": None}
    assert review["input"]["variables"] == [
        {"name": "extra", "source": "run", "sensitive": False, **plain},
        {"name": "region", "source": "run", "sensitive": False, **plain},
        {"name": "token", "source": "workspace", "sensitive": True, **plain},
    ]
    assert SECRET not in json.dumps(review)
    # And the sensitive value exists only encrypted
    assert SECRET not in everything(arena)


def test_a_run_records_which_of_its_variables_are_sensitive_without_values(
    arena: Arena,
) -> None:
    # Given a workspace with a plain variable and two sensitive ones
    stack = arena.stack
    variables = stack.services.workspace_variables
    runs = stack.services.runs
    ws = stack.tenancy.create_workspace(arena.org.id, "vars-sensitive")
    variables.set(arena.admin, ws.id, "region", "eu-west-1")
    variables.set(arena.admin, ws.id, "token", SECRET, sensitive=True)
    variables.set(arena.admin, ws.id, "password", SECRET + "-pw", sensitive=True)

    # When a run is created giving its own value for one sensitive variable and a new one
    run = runs.create(
        arena.admin,
        ws.id,
        kind=RunKind.PLAN_ONLY,
        configuration_version_id=uploaded(arena, runs, ws.id),
        engine_version=None,
        variables={"password": "run-value", "extra": "x"},
    )

    # Then the input snapshot names the workspace's sensitive variables, the overridden
    # one included, and no run variable else; values never
    snapshot = run_parts.require(run.id, "input").body
    assert snapshot["sensitive_variable_names"] == ["password", "token"]
    assert snapshot["workspace_variable_names"] == ["region", "token"]
    assert SECRET not in json.dumps(snapshot)
    # And a run of a workspace without sensitive variables records none
    plain = stack.tenancy.create_workspace(arena.org.id, "vars-plain")
    variables.set(arena.admin, plain.id, "region", "eu-west-1")
    other = runs.create(
        arena.admin,
        plain.id,
        kind=RunKind.PLAN_ONLY,
        configuration_version_id=uploaded(arena, runs, plain.id),
        engine_version=None,
        variables={"token": "given-by-the-run"},
    )
    assert run_parts.require(other.id, "input").body["sensitive_variable_names"] == []


def test_set_and_delete_are_audited_without_values(arena: Arena) -> None:
    # Given a workspace
    variables = arena.stack.services.workspace_variables
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "vars-audit")
    # When a sensitive variable is set, replaced and deleted
    variables.set(arena.admin, ws.id, "token", SECRET, sensitive=True)
    variables.set(arena.admin, ws.id, "token", SECRET + "2", sensitive=True)
    variables.delete(arena.admin, ws.id, "token")
    # Then the organization's trail has the three events with name, flag and actor
    events = [e for e in audit.organization_trail(arena.org.id) if e.subject_id == ws.id]
    assert [e.type for e in events] == [
        "workspace.variable_set",
        "workspace.variable_set",
        "workspace.variable_deleted",
    ]
    assert {(e.details["name"], e.details["sensitive"], e.actor) for e in events} == {
        ("token", "true", arena.admin.ref)
    }
    assert SECRET not in json.dumps([e.details for e in events])
    # And the variable is gone
    assert variables.list(arena.admin, ws.id) == []


@pytest.mark.parametrize(
    ("name", "value", "error", "pointer"),
    [
        ("1bad", "x", InvalidInput, "/name"),
        ("count", "x", InvalidInput, "/name"),
        ("big", "x" * (MAX_VARIABLE_BYTES + 1), VariablesTooLarge, "/value"),
    ],
)
def test_a_bad_variable_is_refused_and_writes_nothing(
    arena: Arena, name: str, value: str, error: type[Exception], pointer: str
) -> None:
    # Given a workspace
    ws = arena.stack.tenancy.create_workspace(arena.org.id, f"vars-bad-{len(value)}-{name}")
    before = arena.stack.scan()
    # When a variable the engine could not take is set
    with pytest.raises(error) as refused:
        arena.stack.services.workspace_variables.set(arena.admin, ws.id, name, value)
    # Then it is refused with a pointer, and nothing was written
    assert getattr(refused.value, "pointer", None) == pointer
    assert arena.stack.scan() == before


def test_the_workspace_holds_at_most_the_limit_and_a_sensitive_variable_stays_sensitive(
    arena: Arena,
) -> None:
    # Given a workspace with as many variables as it may hold
    variables = arena.stack.services.workspace_variables
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "vars-full")
    for n in range(MAX_VARIABLES):
        variables.set(arena.admin, ws.id, f"v{n}", "x", sensitive=n == 0)
    before = arena.stack.scan()
    # When one more is set, or the sensitive one is replaced in the clear
    with pytest.raises(InvalidInput, match=f"at most {MAX_VARIABLES}"):
        variables.set(arena.admin, ws.id, "one_more", "x")
    with pytest.raises(InvalidInput, match="sensitive"):
        variables.set(arena.admin, ws.id, "v0", "now plain")
    # Then nothing was written; replacing an existing one still works
    assert arena.stack.scan() == before
    assert variables.set(arena.admin, ws.id, "v1", "y")[1] is False


def test_readers_may_list_but_not_set_and_another_organization_sees_nothing(
    arena: Arena,
) -> None:
    # Given two organizations, each with a workspace holding a variable
    stack = arena.stack
    variables = stack.services.workspace_variables
    other = stack.tenancy.create_organization("globex")
    mine = stack.tenancy.create_workspace(arena.org.id, "vars-mine")
    theirs = stack.tenancy.create_workspace(other.id, "vars-theirs")
    their_admin = principal_of(arena, other.id, "admin")
    variables.set(arena.admin, mine.id, "region", "eu-west-1")
    variables.set(their_admin, theirs.id, "region", "us-east-1")
    reader = principal_of(arena, arena.org.id, "reader")

    # When both organizations' admins reach for the other's workspace at once
    outcomes: dict[str, Any] = {}

    def reach(label: str, who: Principal, ws_id: str) -> None:
        try:
            variables.set(who, ws_id, "region", "stolen")
            outcomes[label] = "written"
        except NotFound as missing:
            outcomes[label] = missing.code

    threads = [
        threading.Thread(target=reach, args=("mine->theirs", arena.admin, theirs.id)),
        threading.Thread(target=reach, args=("theirs->mine", their_admin, mine.id)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then both are refused as not found and nothing changed
    assert outcomes == {"mine->theirs": "NOT_FOUND", "theirs->mine": "NOT_FOUND"}
    with pytest.raises(NotFound):
        variables.list(arena.admin, theirs.id)
    assert [v.value for v in variables.list(arena.admin, mine.id)] == ["eu-west-1"]
    assert [v.value for v in variables.list(their_admin, theirs.id)] == ["us-east-1"]
    # And a reader lists but may not set or delete
    assert [v.name for v in variables.list(reader, mine.id)] == ["region"]
    with pytest.raises(Forbidden):
        variables.set(reader, mine.id, "region", "x")
    with pytest.raises(Forbidden):
        variables.delete(reader, mine.id, "region")
