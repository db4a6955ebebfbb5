"""Deleting a workspace over the in-memory store: the guard (resources left in its
current state, a run or a lock using it), a forced deletion's reason and audit event,
who may, another organization, the freed name, what a deleted workspace answers, and
what is removed with it (schedules, notification destinations) or kept (runs, state
versions). Every refusal writes nothing."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from runplane.adapters.keys import DataKeys
from runplane.domain.artifacts import ArtifactKind
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    InvalidInput,
    NotFound,
    WorkspaceBusy,
    WorkspaceNotEmpty,
)
from runplane.domain.identity import ROLES, Forbidden, Permission, Principal
from runplane.domain.ids import IdKind
from runplane.domain.notifications import Destination
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.state import FINALIZED, StateVersion
from runplane.domain.workspace_deletion import DELETED_EVENT, managed_resources
from runplane.services.notifications import Notifications
from runplane.services.workspace_deletion import WorkspaceCleanup, WorkspaceDeletion
from tests.fakes import InMemoryArtifacts, InMemoryNotifications, InMemoryStateVersions
from tests.service.conftest import Tier

TEN = datetime(2026, 1, 1, 10, tzinfo=UTC)


def _state(*resources: dict[str, Any]) -> bytes:
    return json.dumps(
        {"version": 4, "serial": 3, "lineage": "l-1", "outputs": {}, "resources": list(resources)}
    ).encode()


def _managed(name: str, instances: int = 1) -> dict[str, Any]:
    return {
        "mode": "managed",
        "type": "test_thing",
        "name": name,
        "instances": [{"attributes": {"id": f"{name}-{i}"}} for i in range(instances)],
    }


DATA = {"mode": "data", "type": "test_source", "name": "d", "instances": [{"attributes": {}}]}


@dataclass
class Scene:
    tier: Tier
    admin: Principal
    workspace: Workspace
    deletion: WorkspaceDeletion
    state_versions: InMemoryStateVersions
    artifacts: InMemoryArtifacts
    destinations: InMemoryNotifications
    cleanups: list[WorkspaceCleanup]

    def with_state(self, raw: bytes) -> Workspace:
        """The workspace with ``raw`` as its current state (as a publication leaves it)."""
        ws = self.tier.directory.get_workspace(self.workspace.id)
        artifact = self.artifacts.put(ws.organization_id, ArtifactKind.STATE, [raw])
        version = StateVersion(
            id=self.tier.ids.new(IdKind.STATE_VERSION),
            workspace_id=ws.id,
            organization_id=ws.organization_id,
            serial=(ws.current_serial or 0) + 1,
            lineage="l-1",
            md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
            status=FINALIZED,
            created_at=self.tier.clock.now(),
            created_by="user:ada",
            predecessor_id=ws.current_state_version_id,
            artifact_id=artifact.id,
        )
        self.state_versions.add(version)
        changed = replace(
            ws,
            current_state_version_id=version.id,
            current_serial=version.serial,
            current_lineage="l-1",
            fence=ws.fence + 1,
        )
        self.tier.directory.workspaces[ws.id] = changed
        return changed

    def run(self, kind: RunKind = RunKind.PLAN_AND_APPLY) -> Run:
        ws = self.workspace
        cv_id = f"cv-{ws.id}-{len(self.tier.run_reader.runs_of_workspace(ws.id))}"
        self.tier.configurations.add_uploaded(cv_id, ws.organization_id, ws.id, TEN)
        return self.tier.runs.create(
            self.admin,
            ws.id,
            kind=kind,
            configuration_version_id=cv_id,
            engine_version=None,
            variables={},
        )

    def written(self) -> tuple[Any, ...]:
        """Everything a deletion could write, to compare before and after."""
        directory = self.tier.directory
        return copy.deepcopy(
            (
                directory.workspaces,
                directory.deleted,
                directory.audit,
                dict(directory._workspace_names),
                self.tier.schedule_store.schedules,
                self.tier.registry.registered,
                self.destinations.destinations(self.workspace.id),
            )
        )


@pytest.fixture
def scene(tier: Tier) -> Scene:
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    workspace = tier.workspaces.create(admin, "acme", "network")
    state_versions, artifacts = InMemoryStateVersions(), InMemoryArtifacts(tier.ids, tier.clock)
    destinations = InMemoryNotifications()
    notifications = Notifications(
        tier.clock,
        tier.ids,
        tier.workspaces,
        # Never called here (the tier's guard fails a test that reaches KMS).
        DataKeys(boto3.client("kms", region_name="us-east-1"), "alias/notifications"),
        _NoQueue(),
        allow_http=False,
        retry_base_seconds=60,
        control_plane_url="https://runplane.example",
        destinations=destinations,
        directory=tier.directory,
    )
    cleanups: list[WorkspaceCleanup] = [tier.schedules, notifications]
    deletion = WorkspaceDeletion(
        tier.clock,
        tier.ids,
        tier.workspaces,
        tier.directory,
        runs=tier.run_reader,
        state_versions=state_versions,
        content=lambda: artifacts,
        cleanups=lambda: cleanups,
    )
    return Scene(
        tier, admin, workspace, deletion, state_versions, artifacts, destinations, cleanups
    )


class _NoQueue:
    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        raise AssertionError("a deletion sent an event")


def _destination(scene: Scene) -> Destination:
    destination = Destination(
        id=scene.tier.ids.new(IdKind.NOTIFICATION_DESTINATION),
        organization_id=scene.workspace.organization_id,
        workspace_id=scene.workspace.id,
        name="hook",
        kind="webhook",
        events=("applied",),
        display_url="https://hooks.example",
        wrapped_key=b"opaque wrapped key",
        sealed=b"opaque sealed url and secret",
        created_at=scene.tier.clock.now(),
        created_by="user:ada",
    )
    scene.destinations.put_destination(destination)
    return destination


def _as(principal: Principal, role: str, name: str = "bob") -> Principal:
    return replace(principal, id=name, display=name, permissions=ROLES[role])


# -- deleting ---------------------------------------------------------------------------------


def test_an_empty_workspace_is_deleted_its_name_freed_and_the_deletion_audited(
    scene: Scene,
) -> None:
    # Given a workspace that never had state, with a schedule and a notification destination
    tier, admin, ws = scene.tier, scene.admin, scene.workspace
    schedule = tier.schedules.create(admin, ws.id, "rate(1 hour)", "plan_only")
    _destination(scene)
    # When its admin deletes it, without force
    deleted = scene.deletion.delete(admin, ws.id, force=False, reason=None)
    # Then it is deleted, with nothing left managed
    assert (deleted.id, deleted.name, deleted.forced, deleted.resources) == (
        ws.id,
        "network",
        False,
        0,
    )
    assert deleted.deleted_by == admin.ref
    # And it answers 404 by ID and by name, and no list shows it
    with pytest.raises(NotFound):
        tier.workspaces.by_id(admin, ws.id)
    with pytest.raises(NotFound):
        tier.workspaces.by_name(admin, "acme", "network")
    assert tier.workspaces.list_own(admin) == []
    assert tier.workspaces.search(admin, "acme").items == []
    # And one audit event names the actor, no force and no resources
    [event] = tier.directory.audit
    assert (event.type, event.actor, event.subject_id) == (DELETED_EVENT, admin.ref, ws.id)
    assert event.details == {"name": "network", "force": "false", "resources": "0"}
    # And its schedule was unregistered and deleted, its destination deleted
    assert schedule.id not in tier.registry.registered
    assert tier.schedule_store.list_for_workspace(ws.id) == []
    assert scene.destinations.destinations(ws.id) == []
    # And its item is kept, marked deleted by the admin (its history stays)
    kept, by, at = tier.directory.deleted[ws.id]
    assert (kept.id, by, at) == (ws.id, admin.ref, deleted.deleted_at)


def test_the_name_of_a_deleted_workspace_can_be_taken_again(scene: Scene) -> None:
    # Given a workspace named "network", found by name once (and so remembered)
    tier, admin, ws = scene.tier, scene.admin, scene.workspace
    assert tier.workspaces.by_name(admin, "acme", "network").id == ws.id
    # When it is deleted and a new workspace is created with its name
    scene.deletion.delete(admin, ws.id, force=False, reason=None)
    again = tier.workspaces.create(admin, "acme", "network")
    # Then the name names the new workspace, and only it is listed
    assert again.id != ws.id
    assert tier.workspaces.by_name(admin, "acme", "network").id == again.id
    assert [w.id for w in tier.workspaces.list_own(admin)] == [again.id]


def test_a_workspace_a_destroy_emptied_is_deleted_without_force(scene: Scene) -> None:
    # Given a workspace whose current state (after a destroy) holds only a data source
    scene.with_state(_state(_managed("a", 2)))
    emptied = scene.with_state(_state(DATA))
    # When it is deleted without force
    deleted = scene.deletion.delete(scene.admin, emptied.id, force=False, reason=None)
    # Then it is deleted, nothing left managed, and its state versions are kept
    assert (deleted.forced, deleted.resources) == (False, 0)
    assert [v.serial for v in scene.state_versions.list_for_workspace(emptied.id)] == [1, 2]


def test_a_workspace_that_manages_resources_is_refused_and_nothing_is_written(
    scene: Scene,
) -> None:
    # Given a workspace whose state manages three instances, a data source and outputs
    ws = scene.with_state(_state(_managed("a", 2), _managed("b"), DATA))
    scene.tier.schedules.create(scene.admin, ws.id, "rate(1 hour)", "plan_only")
    _destination(scene)
    before = scene.written()
    # When it is deleted without force
    with pytest.raises(WorkspaceNotEmpty) as refused:
        scene.deletion.delete(scene.admin, ws.id, force=False, reason=None)
    # Then it is a 409 naming the count and both ways out, and nothing was written
    error = refused.value
    assert (error.http_status, error.code, error.resources) == (409, "WORKSPACE_NOT_EMPTY", 3)
    assert "still manages 3 resources" in error.message
    assert "runplane run create --workspace network --dir DIR --destroy" in error.message
    assert "--force --reason TEXT" in error.message
    assert scene.written() == before
    assert scene.tier.workspaces.by_name(scene.admin, "acme", "network").id == ws.id


def test_a_forced_deletion_needs_a_reason_and_writes_nothing_without_one(scene: Scene) -> None:
    # Given a workspace that manages a resource
    ws = scene.with_state(_state(_managed("a")))
    before = scene.written()
    # When it is deleted with force but no reason, an empty one, one too long or one
    # with a control character
    for reason in (None, "", " ", "x" * 501, "line\nbreak", "bell\x07"):
        with pytest.raises(InvalidInput) as refused:
            scene.deletion.delete(scene.admin, ws.id, force=True, reason=reason)
        # Then each is a 422 pointing at the reason, and nothing was written
        assert (refused.value.http_status, refused.value.pointer) == (422, "/reason")
    assert scene.written() == before


def test_a_forced_deletion_with_a_reason_deletes_and_audits_it(scene: Scene) -> None:
    # Given a workspace that manages two resources
    ws = scene.with_state(_state(_managed("a"), _managed("b")))
    # When it is deleted with force and a reason
    reason = "the account was closed; resources are gone"
    deleted = scene.deletion.delete(scene.admin, ws.id, force=True, reason=reason)
    # Then it is deleted, and the audit event says it was forced, why, and what it left
    assert (deleted.forced, deleted.reason, deleted.resources) == (True, reason, 2)
    [event] = scene.tier.directory.audit
    assert event.details == {
        "name": "network",
        "force": "true",
        "resources": "2",
        "reason": reason,
    }
    with pytest.raises(NotFound):
        scene.tier.workspaces.by_id(scene.admin, ws.id)


# -- in use ---------------------------------------------------------------------------------


def test_a_workspace_with_a_run_not_ended_is_busy_even_forced(scene: Scene) -> None:
    # Given a workspace with a plan-and-apply run not yet ended
    run = scene.run()
    before = scene.written()
    # When it is deleted, even with force and a reason
    for force, reason in ((False, None), (True, "cleanup")):
        with pytest.raises(WorkspaceBusy) as refused:
            scene.deletion.delete(scene.admin, scene.workspace.id, force=force, reason=reason)
        # Then it is a 409 naming the run, and nothing was written
        assert (refused.value.http_status, refused.value.code) == (409, "WORKSPACE_BUSY")
        assert run.id in refused.value.message
    assert scene.written() == before
    # And once the run ended, it is deleted
    ended = replace(scene.tier.run_reader.get_run(run.id), status=RunStatus.CANCELED)
    scene.tier.run_reader.runs[run.id] = ended
    scene.deletion.delete(scene.admin, scene.workspace.id, force=False, reason=None)


@pytest.mark.parametrize(
    "held",
    [
        {"writer_run_id": "run-writer"},
        {"queue_length": 2},
        {"lock_id": "lock-1", "lock_holder": "user:bob", "lock_holder_display": "bob"},
    ],
    ids=["writer", "queue", "lock"],
)
def test_a_held_workspace_is_busy_even_forced(scene: Scene, held: dict[str, Any]) -> None:
    # Given a workspace whose writer reservation is held, waited for, or which is locked
    ws = scene.tier.directory.workspaces[scene.workspace.id]
    scene.tier.directory.workspaces[ws.id] = replace(ws, **held)
    before = scene.written()
    # When it is deleted with force and a reason
    with pytest.raises(WorkspaceBusy):
        scene.deletion.delete(scene.admin, ws.id, force=True, reason="cleanup")
    # Then nothing was written
    assert scene.written() == before


def test_a_change_after_the_read_refuses_the_deletion_writing_nothing(scene: Scene) -> None:
    # Given a workspace that a lock is taken on right after the deletion read it
    ws = scene.workspace
    directory = scene.tier.directory
    read = directory.get_workspace

    def read_then_lock(workspace_id: str) -> Workspace:
        found = read(workspace_id)
        directory.workspaces[workspace_id] = replace(found, lock_id="lock-1", fence=found.fence)
        return found

    directory.get_workspace = read_then_lock  # type: ignore[method-assign]
    with pytest.raises(ConcurrentChange):
        scene.deletion.delete(scene.admin, ws.id, force=False, reason=None)
    del directory.get_workspace
    # Then the workspace is still there, its name claimed, and nothing audited
    assert directory.find_workspace_id(ws.organization_id, "network") == ws.id
    assert directory.audit == []


# -- who may ----------------------------------------------------------------------------------


def test_only_an_admin_may_delete(scene: Scene) -> None:
    before = scene.written()
    for role in ("reader", "developer", "operator"):
        with pytest.raises(Forbidden) as refused:
            scene.deletion.delete(
                _as(scene.admin, role), scene.workspace.id, force=False, reason=None
            )
        assert refused.value.permission is Permission.WORKSPACE_DELETE
    assert Permission.WORKSPACE_DELETE in ROLES["admin"]
    assert scene.written() == before


def test_another_organizations_admin_finds_no_workspace(scene: Scene) -> None:
    # Given another organization's admin
    other = scene.tier.tenancy.create_organization("other")
    before = scene.written()
    # When they delete acme's workspace
    with pytest.raises(NotFound):
        scene.deletion.delete(
            scene.tier.admin(other), scene.workspace.id, force=True, reason="mine"
        )
    # Then it is not found, and nothing was written
    assert scene.written() == before


def test_a_deleted_workspace_is_not_found_a_second_time(scene: Scene) -> None:
    scene.deletion.delete(scene.admin, scene.workspace.id, force=False, reason=None)
    with pytest.raises(NotFound):
        scene.deletion.delete(scene.admin, scene.workspace.id, force=False, reason=None)
    assert len(scene.tier.directory.audit) == 1


# -- what is left --------------------------------------------------------------------------------


def test_a_fire_of_a_schedule_left_behind_skips_harmlessly(scene: Scene) -> None:
    # Given a workspace with a configuration and a schedule, deleted while the removal of
    # its schedules fails
    tier, ws = scene.tier, scene.workspace
    schedule = tier.schedules.create(scene.admin, ws.id, "rate(1 hour)", "plan_only")
    tier.schedule_store.add_configuration(ws.id, "cv-1")
    tier.configurations.add_uploaded("cv-1", ws.organization_id, ws.id, TEN)

    class Failing:
        def forget_workspace(self, workspace: Workspace, actor: str) -> None:
            raise RuntimeError("scheduler unavailable")

    scene.cleanups[:] = [Failing()]
    scene.deletion.delete(scene.admin, ws.id, force=False, reason=None)
    # When the schedule fires
    outcome = tier.schedules.fire(schedule.id, TEN)
    # Then it is gone, and no run or fire record was written
    assert outcome == {"outcome": "gone"}
    assert tier.run_reader.runs_of_workspace(ws.id) == []
    assert tier.schedule_store.fire_records == {}


def test_its_runs_are_kept(scene: Scene) -> None:
    run = scene.run(RunKind.PLAN_ONLY)
    scene.tier.run_reader.runs[run.id] = replace(run, status=RunStatus.SUCCEEDED)
    scene.deletion.delete(scene.admin, scene.workspace.id, force=False, reason=None)
    assert [r.id for r in scene.tier.run_reader.runs_of_workspace(scene.workspace.id)] == [run.id]


# -- counting resources ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "count"),
    [
        (_state(), 0),
        (_state(DATA), 0),
        (_state(_managed("a", 0)), 0),
        (_state(_managed("a", 3), DATA), 3),
        (_state({"type": "test_thing", "name": "legacy", "instances": [{}]}), 1),
        (json.dumps({"version": 4, "serial": 1, "lineage": "l", "outputs": {"x": {}}}).encode(), 0),
    ],
    ids=["none", "data", "no-instances", "managed", "no-mode", "outputs"],
)
def test_managed_resources_count_instances_of_managed_resources(state: bytes, count: int) -> None:
    assert managed_resources(state) == count
