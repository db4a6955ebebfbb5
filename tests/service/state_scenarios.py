"""Starting points the service tier's state tests share: the state service over the
in-memory publication, workspace locks, runs and artifacts, a run applying under its
apply lock, and the sessions that act on a workspace's state."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from dataclasses import dataclass, replace

from runplane.domain.entities import LockHolder, Organization, Run, Workspace
from runplane.domain.identity import RUNNER_PERMISSIONS, Principal, PrincipalKind
from runplane.domain.parts import AttemptState, RunPart
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.state import StateVersion
from runplane.services.artifacts import ArtifactStore
from runplane.services.state import PendingUpload, StateVersions
from tests.fakes import (
    InMemoryArtifactRecords,
    InMemoryObjects,
    InMemoryStateVersions,
    LocalDataKeys,
)
from tests.fakes_state import InMemoryStatePublication, InMemoryWorkspaceLocks
from tests.service.conftest import Tier

LINEAGE = "9d0c3a4e-0000-4000-8000-000000000001"
RUN_LOCK = "lock-run"


@dataclass
class StateWorld:
    tier: Tier
    versions: InMemoryStateVersions
    publication: InMemoryStatePublication
    locks: InMemoryWorkspaceLocks
    records: InMemoryArtifactRecords
    objects: InMemoryObjects
    state: StateVersions
    org: Organization
    admin: Principal
    workspace: Workspace

    def current(self) -> Workspace:
        return self.tier.directory.get_workspace(self.workspace.id)

    def stored(self) -> object:
        """What a state write may change of the workspace's state: workspaces, versions,
        upload tokens, the audit trail, artifact records and objects."""
        return copy.deepcopy(
            (
                self.tier.directory.workspaces,
                self.versions.versions,
                self.publication.tokens,
                self.publication.events,
                self.records.records,
                self.objects.bodies,
            )
        )

    def written(self) -> object:
        """``stored``, and the runs with their parts."""
        return (self.stored(), copy.deepcopy(self.tier.run_reader.saved()))


def build(tier: Tier) -> StateWorld:
    versions = InMemoryStateVersions()
    publication = InMemoryStatePublication(tier.directory, versions, tier.run_reader)
    records, objects = InMemoryArtifactRecords(), InMemoryObjects()
    artifacts = ArtifactStore(tier.clock, tier.ids, objects, LocalDataKeys(), records=records)
    state = StateVersions(
        tier.clock,
        tier.ids,
        tier.workspaces,
        lambda: artifacts,
        reader=versions,
        publication=publication,
    )
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    workspace = tier.workspaces.create(admin, "acme", "network")
    locks = InMemoryWorkspaceLocks(tier.directory, tier.run_reader)
    return StateWorld(
        tier, versions, publication, locks, records, objects, state, org, admin, workspace
    )


def raw_state(serial: int, lineage: str = LINEAGE) -> bytes:
    return json.dumps(
        {
            "version": 4,
            "terraform_version": "1.0.3",
            "serial": serial,
            "lineage": lineage,
            "outputs": {"x": {"value": "v", "type": "string"}},
            "resources": [],
        }
    ).encode()


def md5(raw: bytes) -> str:
    return hashlib.md5(raw, usedforsecurity=False).hexdigest()


def publish(
    world: StateWorld,
    who: Principal,
    serial: int,
    *,
    lineage: str = LINEAGE,
    force: bool = False,
    workspace_id: str | None = None,
) -> StateVersion | PendingUpload:
    raw = raw_state(serial, lineage)
    return world.state.create(
        who,
        workspace_id or world.workspace.id,
        serial=serial,
        md5=md5(raw),
        lineage=lineage,
        state_b64=base64.b64encode(raw).decode(),
        force=force,
    )


def open_upload(world: StateWorld, who: Principal, serial: int) -> PendingUpload:
    """A version declared for ``raw_state(serial)`` whose bytes are still to come."""
    pending = world.state.create(
        who,
        world.workspace.id,
        serial=serial,
        md5=md5(raw_state(serial)),
        lineage=LINEAGE,
        state_b64=None,
    )
    assert isinstance(pending, PendingUpload)
    return pending


def runner(world: StateWorld, run_id: str = "run-1", phase: str = "apply") -> Principal:
    """The session of ``run_id``'s ``phase`` attempt, in its sandbox."""
    return Principal(
        PrincipalKind.RUNNER,
        f"ses-{phase}",
        world.org.id,
        RUNNER_PERMISSIONS,
        "runner",
        run_id=run_id,
        workspace_id=world.workspace.id,
        attempt_id=f"att-{phase}",
        sandbox_id=f"sbx-{phase}",
        phase=phase,
    )


def holding_run(world: StateWorld, status: RunStatus, run_id: str = "run-1") -> Run:
    """A plan-and-apply run of the workspace in ``status``, holding its writer
    reservation."""
    now = world.tier.clock.now()
    run = Run(
        id=run_id,
        organization_id=world.org.id,
        workspace_id=world.workspace.id,
        kind=RunKind.PLAN_AND_APPLY,
        status=status,
        version=1,
        created_at=now,
        updated_at=now,
    )
    world.tier.run_reader.create(run, actor="user:ada", input={})
    directory = world.tier.directory
    directory.workspaces[world.workspace.id] = replace(
        world.current(), writer_run_id=run.id, queue_length=1
    )
    return world.tier.run_reader.get_run(run.id)


def applying(
    world: StateWorld, attempt: AttemptState = AttemptState.STARTED
) -> tuple[Run, Principal]:
    """Run ``run-1`` applying under its apply lock, its apply attempt (in ``attempt``)
    granted that lock and fence; and its apply session."""
    run = holding_run(world, RunStatus.APPLYING)
    now = world.tier.clock.now()
    world.locks.acquire(
        world.workspace.id,
        LockHolder.for_run(run.id),
        lock_id=RUN_LOCK,
        observed_fence=world.current().fence,
        reason="apply",
        now=now,
    )
    body = {
        "attempt_id": "att-apply",
        "sandbox_id": "sbx-apply",
        "phase": "apply",
        "lock_id": RUN_LOCK,
        "fence": world.current().fence,
    }
    world.tier.run_reader.add_part(
        RunPart(run.id, "attempt#apply", attempt, body, "tok-apply", now, now)
    )
    return run, runner(world, run.id)


def end_attempt(world: StateWorld, run: Run, state: AttemptState = AttemptState.FAILED) -> None:
    """The run's apply attempt closes (a result, a cancellation or a loss committed)."""
    attempt = world.tier.run_reader.parts(run.id)["attempt#apply"]
    world.tier.run_reader.set_part(replace(attempt, state=state))


def move_run(world: StateWorld, run: Run, status: RunStatus) -> None:
    """The run moves on, its attempt left as it was."""
    ledger = world.tier.run_reader
    ledger.runs[run.id] = replace(ledger.get_run(run.id), status=status)


def retake_run_lock(world: StateWorld, run: Run) -> int:
    """The run's apply lock released and taken again (the fence advances); the stale
    fence."""
    stale = world.current().fence
    world.tier.directory.workspaces[world.workspace.id] = replace(
        world.current(), lock_id=None, lock_run_id=None, lock_holder=None
    )
    world.locks.acquire(
        world.workspace.id,
        LockHolder.for_run(run.id),
        lock_id="lock-run-2",
        observed_fence=stale,
        reason="apply",
        now=world.tier.clock.now(),
    )
    return stale
