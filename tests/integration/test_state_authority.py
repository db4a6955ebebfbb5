"""Who may move a workspace's state: the lock holder, and never past a run's writer authority."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import timedelta

import pytest

from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.entities import Organization, Run, Workspace
from runplane.domain.errors import WorkspaceHeldByRun, WorkspaceLocked
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind, RunStatus
from runplane.services.state import PendingUpload
from runplane.store import workspaces as workspace_store
from tests.integration.conftest import Stack
from tests.integration.drive import walk

LINEAGE = "9d0c3a4e-0000-4000-8000-000000000001"


def raw_state(serial: int, value: str = "v") -> bytes:
    return json.dumps(
        {
            "version": 4,
            "terraform_version": "1.0.3",
            "serial": serial,
            "lineage": LINEAGE,
            "outputs": {"x": {"value": value, "type": "string"}},
            "resources": [],
        }
    ).encode()


def publish(stack: Stack, who: Principal, ws: Workspace, serial: int, value: str = "v") -> object:
    raw = raw_state(serial, value)
    return stack.state.create(
        who,
        ws.id,
        serial=serial,
        md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
        lineage=LINEAGE,
        state_b64=base64.b64encode(raw).decode(),
    )


def user(stack: Stack, org: Organization, name: str = "ada") -> Principal:
    token = stack.identity.issue_token(org.id, name, list(Permission), created_by="tests").token
    return stack.identity.authenticate(f"Bearer {token}")


def holding_run(stack: Stack, org: Organization, ws: Workspace) -> Run:
    run = stack.lifecycle.create(org.id, ws.id, RunKind.PLAN_AND_APPLY, actor="user:ada")
    stack.lifecycle.writer.reserve(run, "token")
    return run


def test_a_run_holding_writer_authority_refuses_native_locks_with_what_to_do(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    run = holding_run(stack, org, workspace)
    ada = user(stack, org)
    before = stack.scan()

    with pytest.raises(WorkspaceHeldByRun) as held:
        stack.workspaces.lock(ada, workspace.id, "terraform apply")

    assert run.id in held.value.message
    assert "wait for that run to finish" in held.value.message
    assert stack.scan() == before


def test_a_run_kept_for_recovery_tells_the_operator_to_recover(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    run = walk(stack.lifecycle, holding_run(stack, org, workspace), RunStatus.APPLYING)
    stack.lifecycle.writer.acquire_apply_lock(run)
    stack.lifecycle.move(run, RunStatus.NEEDS_RECOVERY, actor="workflow")
    operator = user(stack, org)

    for attempt in (
        lambda: stack.workspaces.lock(operator, workspace.id, None),
        lambda: stack.workspaces.force_unlock(operator, workspace.id),
    ):
        with pytest.raises(WorkspaceHeldByRun) as held:
            attempt()
        assert f"held by run {run.id} (status needs_recovery)" in held.value.message
        assert "complete that run's recovery before retrying" in held.value.message


def test_a_user_lock_taken_before_a_run_queued_cannot_publish_past_it(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    ada = user(stack, org)
    stack.workspaces.lock(ada, workspace.id, "manual fix")
    publish(stack, ada, workspace, 1)
    holding_run(stack, org, workspace)

    with pytest.raises(WorkspaceHeldByRun):
        publish(stack, ada, workspace, 2)

    assert workspace_store.get_workspace(workspace.id).current_serial == 1


def runner_for(stack: Stack, org: Organization, run: Run) -> Principal:
    binding = Binding(
        run.id, stack.ids.new(IdKind.ATTEMPT), Phase.APPLY, stack.ids.new(IdKind.SANDBOX)
    )
    minted = stack.capabilities.mint(
        CapabilityKind.BOOTSTRAP, binding, lifetime=timedelta(minutes=5), organization_id=org.id
    )
    return stack.identity.authenticate(
        f"Bearer {stack.sessions.start(minted.handle, binding).token}"
    )


def test_a_runner_publishes_with_full_provenance(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    ada = user(stack, org)
    stack.workspaces.lock(ada, workspace.id, None)
    predecessor = publish(stack, ada, workspace, 1)
    stack.workspaces.unlock(ada, workspace.id)
    run = walk(stack.lifecycle, holding_run(stack, org, workspace), RunStatus.APPLYING)
    lock = stack.lifecycle.writer.acquire_apply_lock(run)
    runner = runner_for(stack, org, run)

    version = publish(stack, runner, workspace, 2)

    assert version.provenance == {  # type: ignore[attr-defined]
        "run_id": run.id,
        "attempt_id": runner.attempt_id,
        "sandbox_id": runner.sandbox_id,
        "session_id": runner.id,
        "predecessor_id": predecessor.id,  # type: ignore[attr-defined]
        "fence": lock.fence,
    }
    assert version.lock_id == lock.lock_id  # type: ignore[attr-defined]
    assert workspace_store.get_workspace(workspace.id).current_state_version_id == version.id  # type: ignore[attr-defined]


def test_an_upload_opened_under_a_stale_fence_never_publishes(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    run = walk(stack.lifecycle, holding_run(stack, org, workspace), RunStatus.APPLYING)
    old = stack.lifecycle.writer.acquire_apply_lock(run)
    runner = runner_for(stack, org, run)
    raw = raw_state(1)
    pending = stack.state.create(
        runner,
        workspace.id,
        serial=1,
        md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
        lineage=LINEAGE,
        state_b64=None,
    )
    assert isinstance(pending, PendingUpload)
    # The lock is revoked and taken again: the fence advances.
    stack.lifecycle.writer.release_apply_lock(old).commit()
    stack.lifecycle.writer.acquire_apply_lock(run)

    with pytest.raises(WorkspaceLocked, match="no longer locked by this writer"):
        stack.state.upload(pending.state_token, raw)

    assert workspace_store.get_workspace(workspace.id).current_state_version_id is None
