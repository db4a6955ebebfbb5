"""Organization variable sets over the in-memory stores: who may read and change them,
two organizations kept apart (another organization's set or workspace is not found),
the limits, a refused write writing nothing, and what a new run takes from them under
its own and its workspace's variables (sealing with the local key fake, the run's
artifact in the in-memory object store)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from runplane.domain.entities import Workspace
from runplane.domain.errors import (
    AlreadyExists,
    InvalidInput,
    NotFound,
    ReservedVariableName,
    VariableSetLimit,
)
from runplane.domain.identity import ROLES, Forbidden, Permission, Principal
from runplane.domain.run import RunKind
from runplane.domain.variable_sets import MAX_SETS_PER_WORKSPACE
from runplane.domain.variables import VariableCategory
from runplane.services.artifacts import ArtifactStore
from runplane.services.launch_controls import LaunchControls
from runplane.services.runs import ReviewReads, Runs
from runplane.services.variable_sets import VariableSets
from runplane.services.variables import WorkspaceVariables
from runplane.wiring import run_lifecycle
from tests.fakes import (
    InMemoryArtifactRecords,
    InMemoryObjects,
    InMemoryStateVersions,
    InMemoryVariables,
    LocalDataKeys,
)
from tests.fakes_creation import InMemoryRunCreations
from tests.fakes_operations import InMemoryLaunchControls, InMemorySourceRecords
from tests.fakes_variable_sets import InMemoryVariableSets
from tests.service.conftest import Tier

TF, ENV = VariableCategory.TERRAFORM, VariableCategory.ENV
SECRET = "s3cr3t-set-value-4c2e"


@dataclass
class World:
    tier: Tier
    store: InMemoryVariableSets
    sets: VariableSets
    workspace_store: InMemoryVariables
    variables: WorkspaceVariables
    artifacts: ArtifactStore
    runs: Runs

    def org(self, name: str, *workspaces: str) -> tuple[Principal, list[Workspace]]:
        org = self.tier.tenancy.create_organization(name)
        admin = self.tier.admin(org)
        return admin, [self.tier.workspaces.create(admin, name, ws) for ws in workspaces]

    def run(self, admin: Principal, workspace: Workspace, **variables: str) -> str:
        cv_id = f"cv-{workspace.id}-{len(self.tier.run_reader.runs)}"
        self.tier.configurations.add_uploaded(
            cv_id, workspace.organization_id, workspace.id, self.tier.clock.now()
        )
        run = self.runs.create(
            admin,
            workspace.id,
            kind=RunKind.PLAN_ONLY,
            configuration_version_id=cv_id,
            engine_version=None,
            variables=variables,
        )
        return run.id

    def pinned(self, admin: Principal, run_id: str) -> Any:
        """The run's variables artifact, decrypted."""
        snapshot = self.runs.review(admin, run_id)
        body = self.tier.run_reader.parts(run_id)["input"].body
        artifact = self.artifacts.read(admin.organization_id, str(body["variables_artifact_id"]))
        return json.loads(artifact), snapshot["input"]["variables"]


@pytest.fixture
def world(tier: Tier) -> World:
    keys = LocalDataKeys()
    store = InMemoryVariableSets()
    sets = VariableSets(tier.clock, tier.ids, tier.workspaces, keys, store)
    workspace_store = InMemoryVariables()
    variables = WorkspaceVariables(tier.clock, tier.ids, tier.workspaces, keys, workspace_store)
    records = InMemoryArtifactRecords()
    artifacts = ArtifactStore(tier.clock, tier.ids, InMemoryObjects(), keys, records=records)
    runs = Runs(
        tier.clock,
        tier.ids,
        run_lifecycle(tier.clock, tier.ids),
        tier.workspaces,
        artifacts,
        tier.workflow,
        definition_version="def-1",
        build_sha="build-1",
        launch_controls=LaunchControls(
            tier.clock, InMemoryLaunchControls(), region="us-east-1", policy_runtime="rego-1"
        ),
        runner_release="runner-1",
        units=tier.new_unit,
        creations=InMemoryRunCreations(tier.run_reader, tier.schedule_store, tier.claims),
        configurations=tier.configurations,
        review_reads=ReviewReads(
            runs=tier.run_reader,
            claims=tier.claims,
            state_versions=InMemoryStateVersions(),
            sources=InMemorySourceRecords(),
            artifacts=records,
        ),
        workspace_variables=variables,
        variable_sets=sets,
    )
    return World(tier, store, sets, workspace_store, variables, artifacts, runs)


def member(admin: Principal, role: str) -> Principal:
    return Principal(
        kind=admin.kind,
        id=role,
        organization_id=admin.organization_id,
        permissions=ROLES[role],
        display=role,
    )


def written(world: World) -> object:
    """Everything a set's write may change, to prove a refused one changed none of it."""
    store = world.store
    return copy.deepcopy((store.sets, store.names, store.applied, store.variables_of, store.audit))


def test_a_set_is_created_given_variables_applied_and_read_without_sensitive_values(
    world: World,
) -> None:
    # Given an organization with a workspace
    admin, [ws] = world.org("acme", "network")

    # When an admin creates a set, sets a plain and a sensitive variable, and applies it
    created = world.sets.create(admin, "aws", description="the AWS account")
    _, fresh = world.sets.set_variable(admin, created.id, ENV, "AWS_REGION", "eu-west-3")
    world.sets.set_variable(admin, created.id, ENV, "AWS_SECRET_ACCESS_KEY", SECRET, sensitive=True)
    applied = world.sets.apply(admin, created.id, ws.id)

    # Then the set lists with where it applies, and shows no sensitive value
    assert fresh is True
    assert applied.workspace_ids == (ws.id,)
    assert [s.name for s in world.sets.list(admin)] == ["aws"]
    shown = world.sets.show(admin, created.id)
    assert shown.variable_set.variables == 2
    assert [(v.category, v.name, v.value) for v in shown.variables] == [
        (ENV, "AWS_REGION", "eu-west-3"),
        (ENV, "AWS_SECRET_ACCESS_KEY", None),
    ]
    assert SECRET not in repr(world.store)
    assert SECRET not in json.dumps([v.view() for v in shown.variables])
    # And every change was audited, naming no value
    assert [a.type for a in world.store.audit] == [
        "variable_set.created",
        "variable_set.variable_set",
        "variable_set.variable_set",
        "variable_set.applied",
    ]
    assert world.store.audit[2].details == {
        "variable_set_id": created.id,
        "name": "aws",
        "variable": "AWS_SECRET_ACCESS_KEY",
        "category": "env",
        "sensitive": "true",
    }
    # And applying it again changes nothing
    assert world.sets.apply(admin, created.id, ws.id) == applied
    assert len(world.store.audit) == 4


def test_another_organizations_set_and_workspace_are_not_found(world: World) -> None:
    # Given a set of organization A applied to its workspace, and organization B
    admin_a, [ws_a] = world.org("acme", "network")
    admin_b, [ws_b] = world.org("globex", "network")
    set_a = world.sets.create(admin_a, "aws", global_=True)
    world.sets.set_variable(admin_a, set_a.id, ENV, "AWS_REGION", "eu-west-3")
    world.sets.apply(admin_a, set_a.id, ws_a.id)
    before = written(world)

    # When B's admin reads, changes, applies or removes it, and A's admin applies it to
    # B's workspace
    attempts: list[Callable[[], object]] = [
        lambda: world.sets.get(admin_b, set_a.id),
        lambda: world.sets.show(admin_b, set_a.id),
        lambda: world.sets.update(admin_b, set_a.id, name="mine"),
        lambda: world.sets.delete(admin_b, set_a.id),
        lambda: world.sets.set_variable(admin_b, set_a.id, ENV, "X", "y"),
        lambda: world.sets.delete_variable(admin_b, set_a.id, ENV, "AWS_REGION"),
        lambda: world.sets.apply(admin_b, set_a.id, ws_b.id),
        lambda: world.sets.unapply(admin_b, set_a.id, ws_a.id),
        lambda: world.sets.apply(admin_a, set_a.id, ws_b.id),
    ]
    # Then each is not found (never forbidden), and nothing was written
    for attempt in attempts:
        with pytest.raises(NotFound):
            attempt()
    assert written(world) == before
    assert world.sets.list(admin_b) == []
    # And B's runs never get A's global set
    _, listed = world.pinned(admin_b, world.run(admin_b, ws_b, region="x"))
    assert [v["name"] for v in listed] == ["region"]
    pinned_a, _ = world.pinned(admin_a, world.run(admin_a, ws_a))
    assert pinned_a == {"terraform": {}, "env": {"AWS_REGION": "eu-west-3"}, "sensitive_env": []}


def test_reading_needs_organization_read_and_changing_needs_variable_sets_manage(
    world: World,
) -> None:
    # Given a set, and a reader and a developer of the organization
    admin, [ws] = world.org("acme", "network")
    made = world.sets.create(admin, "aws")
    world.sets.set_variable(admin, made.id, TF, "region", "eu-west-3")
    reader, developer = member(admin, "reader"), member(admin, "developer")
    assert Permission.VARIABLE_SETS_MANAGE in ROLES["admin"]
    assert all(Permission.VARIABLE_SETS_MANAGE not in ROLES[r] for r in ("operator", "developer"))
    before = written(world)

    # Then both may read it
    for who in (reader, developer):
        assert [s.id for s in world.sets.list(who)] == [made.id]
        assert world.sets.show(who, made.id).variables[0].value == "eu-west-3"
    # And neither may change it: each write is forbidden and writes nothing
    for who in (reader, developer):
        for attempt in (
            lambda w=who: world.sets.create(w, "mine"),
            lambda w=who: world.sets.update(w, made.id, global_=True),
            lambda w=who: world.sets.delete(w, made.id),
            lambda w=who: world.sets.set_variable(w, made.id, TF, "region", "x"),
            lambda w=who: world.sets.delete_variable(w, made.id, TF, "region"),
            lambda w=who: world.sets.apply(w, made.id, ws.id),
            lambda w=who: world.sets.unapply(w, made.id, ws.id),
        ):
            with pytest.raises(Forbidden):
                attempt()
    assert written(world) == before
    # And a principal without organization:read cannot even list
    scheduled = Principal(
        kind=admin.kind,
        id="robot",
        organization_id=admin.organization_id,
        permissions=frozenset({Permission.WORKSPACE_READ, Permission.RUN_CREATE}),
        display="robot",
    )
    with pytest.raises(Forbidden):
        world.sets.list(scheduled)


def test_bad_names_reserved_names_and_taken_names_are_refused_writing_nothing(
    world: World,
) -> None:
    admin, _ = world.org("acme")
    made = world.sets.create(admin, "aws")
    before = written(world)

    with pytest.raises(InvalidInput):
        world.sets.create(admin, "not a name")
    with pytest.raises(AlreadyExists):
        world.sets.create(admin, "aws")
    with pytest.raises(ReservedVariableName) as reserved:
        world.sets.set_variable(admin, made.id, ENV, "TF_CLI_ARGS_plan", "-var-file=/x")
    assert "reserved" in reserved.value.message
    with pytest.raises(InvalidInput):
        world.sets.set_variable(admin, made.id, TF, "count", "1")
    with pytest.raises(InvalidInput):
        world.sets.set_variable(admin, made.id, ENV, "A", "line\rbreak")
    with pytest.raises(NotFound):
        world.sets.delete_variable(admin, made.id, ENV, "NOPE")
    assert written(world) == before


def test_a_sensitive_set_variable_is_sealed_and_not_replaced_in_the_clear(world: World) -> None:
    admin, _ = world.org("acme")
    made = world.sets.create(admin, "aws")
    world.sets.set_variable(admin, made.id, ENV, "TOKEN", SECRET, sensitive=True)
    stored = world.store.find_variable(made.id, ENV, "TOKEN")
    assert stored is not None
    assert stored.variable.value is None
    assert SECRET.encode() not in (stored.sealed or b"")
    before = written(world)

    with pytest.raises(InvalidInput) as refused:
        world.sets.set_variable(admin, made.id, ENV, "TOKEN", "plain")
    assert refused.value.pointer == "/sensitive"
    assert written(world) == before


def test_a_workspace_takes_at_most_its_limit_of_sets_and_deleted_ones_free_their_place(
    world: World,
) -> None:
    # Given a workspace with sets applied up to its limit
    admin, [ws] = world.org("acme", "network")
    made = [world.sets.create(admin, f"set-{n:02d}") for n in range(MAX_SETS_PER_WORKSPACE + 1)]
    for each in made[:-1]:
        world.sets.apply(admin, each.id, ws.id)
    before = written(world)

    # When one more is applied, it is refused and nothing is written
    with pytest.raises(VariableSetLimit):
        world.sets.apply(admin, made[-1].id, ws.id)
    assert written(world) == before

    # When an applied set is deleted, its place is free again
    world.sets.delete(admin, made[0].id)
    applied = world.sets.apply(admin, made[-1].id, ws.id)
    assert applied.workspace_ids == (ws.id,)
    record = world.store.workspace_sets(admin.organization_id, ws.id)
    assert made[0].id not in record.set_ids
    assert len(record.set_ids) == MAX_SETS_PER_WORKSPACE
    # And removing one that is not applied by name is not found
    with pytest.raises(NotFound):
        world.sets.unapply(admin, made[0].id, ws.id)


def test_an_update_renames_and_makes_a_set_global(world: World) -> None:
    admin, [ws] = world.org("acme", "network")
    made = world.sets.create(admin, "aws", description="old")
    world.sets.create(admin, "taken")

    updated = world.sets.update(admin, made.id, name="aws-prod", global_=True)
    assert (updated.name, updated.global_, updated.description) == ("aws-prod", True, "old")
    cleared = world.sets.update(admin, made.id, description=None)
    assert cleared.description is None
    assert world.store.find_id(admin.organization_id, "aws") is None
    before = written(world)
    with pytest.raises(AlreadyExists):
        world.sets.update(admin, made.id, name="taken")
    assert written(world) == before
    # A global set applies to every workspace of the organization
    assert world.sets.get(admin, made.id).applies_to(ws.id)


def test_a_run_resolves_run_over_workspace_over_sets_and_pins_them_at_creation(
    world: World,
) -> None:
    # Given a global set and a set applied to the workspace by name, both defining
    # region and TOKEN; the workspace defining region too; and the run its own region
    admin, [ws] = world.org("acme", "network")
    base = world.sets.create(admin, "aaa-base", global_=True)
    prod = world.sets.create(admin, "prod")
    world.sets.apply(admin, prod.id, ws.id)
    for each, value in ((base, "base"), (prod, "prod")):
        world.sets.set_variable(admin, each.id, TF, "region", f"{value}-region")
        world.sets.set_variable(admin, each.id, TF, f"only_{value}", value)
        world.sets.set_variable(admin, each.id, ENV, "TOKEN", f"{value}-{SECRET}", sensitive=True)
    world.variables.set(admin, ws.id, "region", "workspace-region")
    world.variables.set(admin, ws.id, "TF_VAR_zone", "b", category=ENV)

    # When a run is created with its own region
    run_id = world.run(admin, ws, region="run-region")

    # Then its artifact holds each variable from the highest source defining it
    pinned, review = world.pinned(admin, run_id)
    assert pinned == {
        "terraform": {"only_base": "base", "only_prod": "prod", "region": "run-region"},
        "env": {"TF_VAR_zone": "b", "TOKEN": f"prod-{SECRET}"},
        "sensitive_env": ["TOKEN"],
    }
    # And the review names each one's category and source, never a value
    assert review == [
        {
            "name": "only_base",
            "category": "terraform",
            "source": "variable_set",
            "sensitive": False,
            "variable_set": {"id": base.id, "name": "aaa-base"},
        },
        {
            "name": "only_prod",
            "category": "terraform",
            "source": "variable_set",
            "sensitive": False,
            "variable_set": {"id": prod.id, "name": "prod"},
        },
        {
            "name": "region",
            "category": "terraform",
            "source": "run",
            "sensitive": False,
            "variable_set": None,
        },
        {
            "name": "TF_VAR_zone",
            "category": "env",
            "source": "workspace",
            "sensitive": False,
            "variable_set": None,
        },
        {
            "name": "TOKEN",
            "category": "env",
            "source": "variable_set",
            "sensitive": True,
            "variable_set": {"id": prod.id, "name": "prod"},
        },
    ]
    assert SECRET not in json.dumps(world.runs.review(admin, run_id))

    # When the sets change afterwards
    world.sets.set_variable(admin, prod.id, TF, "only_prod", "changed")
    world.sets.unapply(admin, prod.id, ws.id)
    world.sets.delete(admin, base.id)
    # Then the run keeps what it pinned, and only a new run sees the change
    assert world.pinned(admin, run_id)[0] == pinned
    later, _ = world.pinned(admin, world.run(admin, ws))
    assert later == {
        "terraform": {"region": "workspace-region"},
        "env": {"TF_VAR_zone": "b"},
        "sensitive_env": [],
    }
