"""Test builders: durable records made the shortest honest way, for tests that are about
what happens to them next (transitions, the writer queue), not about how runs are launched
(``Runs.create`` is that path, with its checks, snapshot and workflow start)."""

from __future__ import annotations

from datetime import datetime

from runplane.domain.clock import Clock
from runplane.domain.entities import Run
from runplane.domain.errors import NotFound
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.run import RunKind, RunStatus
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from runplane.store.runs import FIRST_VERSION, RunRepository


def bare_run(
    clock: Clock,
    ids: IdGenerator,
    runs: RunRepository,
    organization_id: str,
    workspace_id: str,
    kind: RunKind,
    *,
    actor: str,
) -> Run:
    """A ``dispatch_pending`` run with no input snapshot and no workflow."""
    workspace = workspace_store.get_workspace(workspace_id, reads=IdentityMap())
    if workspace.organization_id != organization_id:
        raise NotFound("workspace", workspace_id)
    now = clock.now()
    run = Run(
        id=ids.new(IdKind.RUN),
        organization_id=organization_id,
        workspace_id=workspace_id,
        kind=kind,
        status=RunStatus.DISPATCH_PENDING,
        version=FIRST_VERSION,
        created_at=now,
        updated_at=now,
    )
    runs.create(run, actor=actor)
    return run


def run_record(
    run_id: str,
    workspace_id: str,
    organization_id: str,
    kind: RunKind,
    at: datetime,
    *,
    created_by: str = "user:ada",
) -> Run:
    """A ``dispatch_pending`` run as a store holds it, made at ``at`` (no store touched)."""
    return Run(
        id=run_id,
        organization_id=organization_id,
        workspace_id=workspace_id,
        kind=kind,
        status=RunStatus.DISPATCH_PENDING,
        version=FIRST_VERSION,
        created_at=at,
        updated_at=at,
        definition_version="def-1",
        build_sha="abc",
        created_by=created_by,
        runner_release="r1",
    )
