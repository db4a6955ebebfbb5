"""Environment variables and organization variable sets against moto (DynamoDB, S3,
KMS): sealing bound to the set or workspace, category and name; the organization's
audit trail; a run's variables artifact resolved run > workspace > set and pinned at
creation; and two organizations kept apart."""

from __future__ import annotations

import json

import pytest
import requests

from runplane.adapters.keys import KeyUnavailable
from runplane.adapters.sealed import Sealed, unseal
from runplane.domain.errors import NotFound, ReservedVariableName
from runplane.domain.identity import Permission, Principal
from runplane.domain.run import RunKind
from runplane.domain.variables import VariableCategory
from runplane.store import audit, run_parts
from runplane.store import variable_sets as set_store
from runplane.store import workspace_variables as variable_store
from runplane.store.workspace_variables import WorkspaceVariableItem, variable_key
from tests.integration.arena import Arena
from tests.integration.test_workspace_variables import everything, uploaded

SECRET = "s3cr3t-env-value-91ad"
TF, ENV = VariableCategory.TERRAFORM, VariableCategory.ENV


def test_a_workspace_holds_the_same_name_in_both_categories_each_sealed_to_its_own(
    arena: Arena,
) -> None:
    # Given a workspace
    variables = arena.stack.services.workspace_variables
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "env-both")

    # When a Terraform variable and an environment variable of one name are set, the
    # environment one sensitive
    variables.set(arena.admin, ws.id, "TOKEN", "plain-terraform")
    variables.set(arena.admin, ws.id, "TOKEN", SECRET, sensitive=True, category=ENV)

    # Then both list, Terraform first, and the sensitive value is never read back
    listed = [(v.category, v.name, v.value) for v in variables.list(arena.admin, ws.id)]
    assert listed == [(TF, "TOKEN", "plain-terraform"), (ENV, "TOKEN", None)]
    assert SECRET not in everything(arena)
    # And its seal opens only under its workspace, name and category
    stored = variable_store.find(ws.id, "TOKEN", ENV)
    assert stored is not None
    sealed = Sealed(stored.wrapped_key or b"", stored.sealed or b"")
    context = {
        "purpose": "workspace-variable",
        "workspace_id": ws.id,
        "name": "TOKEN",
        "category": "env",
    }
    assert unseal(arena.stack.keys, context, sealed) == SECRET.encode()
    terraform_context = {k: v for k, v in context.items() if k != "category"}
    with pytest.raises(KeyUnavailable):
        unseal(arena.stack.keys, terraform_context, sealed)
    # And a Terraform variable's item is keyed and shaped as before categories
    item = WorkspaceVariableItem.get(*variable_key(ws.id, "TOKEN"), consistent_read=True)
    assert item.sk == "VAR#TOKEN"
    assert item.category is None
    # And deleting one category leaves the other
    variables.delete(arena.admin, ws.id, "TOKEN", ENV)
    assert [(v.category, v.name) for v in variables.list(arena.admin, ws.id)] == [(TF, "TOKEN")]
    events = [e for e in audit.organization_trail(arena.org.id) if e.subject_id == ws.id]
    assert [(e.type, e.details["category"]) for e in events] == [
        ("workspace.variable_set", "terraform"),
        ("workspace.variable_set", "env"),
        ("workspace.variable_deleted", "env"),
    ]


def test_a_reserved_environment_name_is_refused_and_writes_nothing(arena: Arena) -> None:
    variables = arena.stack.services.workspace_variables
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "env-reserved")
    before = json.dumps(arena.stack.scan(), default=str)
    for name in ("PATH", "TF_TOKEN_example_com", "LD_PRELOAD", "RUNPLANE_BOOTSTRAP"):
        with pytest.raises(ReservedVariableName):
            variables.set(arena.admin, ws.id, name, "x", category=ENV)
    assert json.dumps(arena.stack.scan(), default=str) == before


def test_set_changes_are_audited_and_sealed_values_open_only_for_their_set(arena: Arena) -> None:
    # Given a set with a sensitive environment variable, applied, renamed and deleted
    sets = arena.stack.services.variable_sets
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "set-audit")
    made = sets.create(arena.admin, "creds")
    sets.set_variable(arena.admin, made.id, ENV, "API_TOKEN", SECRET, sensitive=True)
    stored = set_store.find_variable(made.id, ENV, "API_TOKEN")
    assert stored is not None
    sealed = Sealed(stored.wrapped_key or b"", stored.sealed or b"")
    context = {
        "purpose": "variable-set-variable",
        "variable_set_id": made.id,
        "category": "env",
        "name": "API_TOKEN",
    }
    assert unseal(arena.stack.keys, context, sealed) == SECRET.encode()
    for moved in (
        {**context, "variable_set_id": "varset-other"},
        {**context, "category": "terraform"},
    ):
        with pytest.raises(KeyUnavailable):
            unseal(arena.stack.keys, moved, sealed)
    sets.apply(arena.admin, made.id, ws.id)
    sets.update(arena.admin, made.id, name="creds-prod")
    sets.unapply(arena.admin, made.id, ws.id)
    sets.delete_variable(arena.admin, made.id, ENV, "API_TOKEN")
    sets.delete(arena.admin, made.id)

    # Then the organization's trail records each change with the actor, never a value
    events = [e for e in audit.organization_trail(arena.org.id) if e.subject_id == made.id]
    assert [e.type for e in events] == [
        "variable_set.created",
        "variable_set.variable_set",
        "variable_set.applied",
        "variable_set.updated",
        "variable_set.unapplied",
        "variable_set.variable_deleted",
        "variable_set.deleted",
    ]
    assert {e.actor for e in events} == {arena.admin.ref}
    assert events[1].details == {
        "variable_set_id": made.id,
        "name": "creds",
        "variable": "API_TOKEN",
        "category": "env",
        "sensitive": "true",
    }
    assert events[2].details["workspace_id"] == ws.id
    assert events[3].details["previous_name"] == "creds"
    assert SECRET not in everything(arena)
    with pytest.raises(NotFound):
        sets.get(arena.admin, made.id)


def test_a_run_pins_its_sets_workspace_and_own_variables_in_one_encrypted_artifact(
    arena: Arena,
) -> None:
    # Given a global set and a set applied by name, the workspace's variables and an
    # environment variable in each
    stack = arena.stack
    sets, variables, runs = (
        stack.services.variable_sets,
        stack.services.workspace_variables,
        stack.services.runs,
    )
    ws = stack.tenancy.create_workspace(arena.org.id, "set-run")
    base = sets.create(arena.admin, "base", global_=True)
    prod = sets.create(arena.admin, "prod")
    sets.apply(arena.admin, prod.id, ws.id)
    sets.set_variable(arena.admin, base.id, TF, "region", "base-region")
    sets.set_variable(arena.admin, base.id, ENV, "TF_VAR_owner", "base-owner")
    sets.set_variable(arena.admin, prod.id, ENV, "TF_VAR_owner", "prod-owner")
    sets.set_variable(arena.admin, prod.id, ENV, "API_TOKEN", SECRET, sensitive=True)
    variables.set(arena.admin, ws.id, "region", "workspace-region")

    # When a run is created with its own region
    run = runs.create(
        arena.admin,
        ws.id,
        kind=RunKind.PLAN_ONLY,
        configuration_version_id=uploaded(arena, runs, ws.id),
        engine_version=None,
        variables={"region": "run-region"},
    )
    # ... and a set changes afterwards
    sets.set_variable(arena.admin, prod.id, ENV, "TF_VAR_owner", "changed")

    # Then the artifact holds what each variable resolved to at creation
    snapshot = run_parts.require(run.id, "input").body
    pinned = json.loads(stack.artifacts.read(arena.org.id, snapshot["variables_artifact_id"]))
    assert pinned == {
        "terraform": {"region": "run-region"},
        "env": {"API_TOKEN": SECRET, "TF_VAR_owner": "prod-owner"},
        "sensitive_env": ["API_TOKEN"],
    }
    # And the snapshot and review name sources, never values
    review = runs.review(arena.admin, run.id)
    assert [(v["name"], v["source"], v["variable_set"]) for v in review["input"]["variables"]] == [
        ("region", "run", None),
        ("API_TOKEN", "variable_set", {"id": prod.id, "name": "prod"}),
        ("TF_VAR_owner", "variable_set", {"id": prod.id, "name": "prod"}),
    ]
    assert SECRET not in json.dumps(snapshot) + json.dumps(review)
    assert SECRET not in everything(arena)

    # And another organization's workspace gets none of the global set
    other = stack.tenancy.create_organization("globex-sets")
    token = stack.identity.issue_token(
        other.id, "admin", sorted(Permission), created_by="test"
    ).token
    other_admin = stack.identity.authenticate(f"Bearer {token}")
    other_ws = stack.tenancy.create_workspace(other.id, "set-run")
    other_run = runs.create(
        other_admin,
        other_ws.id,
        kind=RunKind.PLAN_ONLY,
        configuration_version_id=uploaded_by(arena, other_admin, other_ws.id),
        engine_version=None,
        variables={},
    )
    assert run_parts.require(other_run.id, "input").body["variables"] == []
    with pytest.raises(NotFound):
        sets.apply(other_admin, prod.id, other_ws.id)
    with pytest.raises(NotFound):
        sets.apply(arena.admin, prod.id, other_ws.id)


def uploaded_by(arena: Arena, principal: Principal, ws_id: str) -> str:
    runs = arena.stack.services.runs
    upload = runs.new_configuration_upload(principal, ws_id)
    requests.put(upload.upload_url, data=b"config", timeout=30).raise_for_status()
    return str(runs.finalize_configuration(principal, upload.id)["id"])
