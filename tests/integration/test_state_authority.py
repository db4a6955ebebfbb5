"""Who may move a workspace's state: the lock holder, and never past a run's writer authority."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable

import pytest

from runplane.domain.entities import Organization, Run, Workspace
from runplane.domain.errors import WorkspaceHeldByRun
from runplane.domain.identity import Permission, Principal
from runplane.domain.run import RunKind, RunStatus
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
    run = stack.new_run(org.id, ws.id, RunKind.PLAN_AND_APPLY, actor="user:ada")
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

    attempts: tuple[Callable[[], object], ...] = (
        lambda: stack.workspaces.lock(operator, workspace.id, None),
        lambda: stack.workspaces.force_unlock(operator, workspace.id),
    )
    for attempt in attempts:
        with pytest.raises(WorkspaceHeldByRun) as held:
            attempt()
        assert f"held by run {run.id} (status needs_recovery)" in held.value.message
        assert "complete that run's recovery (runplane run recover)" in held.value.message
        # A 423, not a 409: native clients print the sentence only for other statuses
        assert (held.value.http_status, held.value.code) == (423, "WORKSPACE_RECOVERY_PENDING")


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
