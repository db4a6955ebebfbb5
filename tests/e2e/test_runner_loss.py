"""A runner that goes silent never turns into success, on the real workflow.

The session stack's heartbeat window is short, so the workflow's own
``States.HeartbeatTimeout`` ends these waits within seconds.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from runplane.adapters.launchers import LaunchRequest
from runplane.domain.identity import Permission
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import HEARTBEAT_WINDOW_SECONDS, Local
from tests.e2e.test_cancellation import SLOW_APPLY, wait_for
from tests.e2e.test_cli import cli, connect
from tests.e2e.test_managed_runs import config, new_workspace, writer_of
from tests.e2e.test_terraform_remote_backend import backend, configuration

# The window, plus time for the workflow to run its failure step.
DETECTION_SECONDS = HEARTBEAT_WINDOW_SECONDS + 60
NATIVE = 'output "native" { value = "ok" }\n'
TIMED_OUT = {"apply: States.HeartbeatTimeout", "apply: States.Timeout"}


def test_a_runner_silent_after_its_apply_started_needs_recovery_then_is_recovered(
    local: Local, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a run applying a slow change
    ws = new_workspace(local, "silent-apply")
    run = local.client.create_run(ws, config(tmp_path, SLOW_APPLY))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    local.client.decide(run["id"], "approve")
    wait_for(local, run["id"], "applying")
    attempt = run_parts.require(run["id"], "attempt#apply").body
    pid = int(str(attempt["sandbox_ref"]).removeprefix("pid:"))

    # When its runner freezes (no heartbeat, no result) while the engine applies
    os.kill(pid, signal.SIGSTOP)

    # Then the heartbeat wait times out and the outcome is unknown, not success
    wait_for(local, run["id"], "needs_recovery", timeout=DETECTION_SECONDS)
    review = local.client.review(run["id"])
    # (AWS names it States.HeartbeatTimeout; moto's interpreter, States.Timeout.)
    assert review["status_reason"] in TIMED_OUT, review["status_reason"]
    assert review["apply"]["status"] == "uncertain"
    # And the workspace and its fenced lock stay with the run for recovery
    writer, lock = writer_of(ws)
    assert writer == run["id"]
    assert lock is not None
    # And the frozen sandbox is stopped (just after the run moved, so wait for it)
    assert local.stack.launcher is not None
    process = next(p for p in local.stack.launcher.processes if p.pid == pid)
    assert process.wait(timeout=30) is not None

    # And a native client is told to complete that run's recovery first
    name = local.client.workspace(ws)["name"]
    native = configuration(tmp_path, "native", backend(local, name) + NATIVE, local)
    native.run("init", "-input=false")
    refused = native.run("apply", "-auto-approve", "-input=false", "-no-color", check=False)
    assert refused.returncode != 0
    assert "complete that run's recovery" in " ".join(refused.stderr.split()), refused.stderr

    # When an operator, freshly signed in, recovers it with the evidence `run show` printed
    panel = review["recovery"]
    assert (panel["status"], panel["state_moved"]) == ("required", False)
    fresh = local.token(Permission, name="oncall")
    code, out, err = cli(
        capsys,
        "run",
        "recover",
        run["id"],
        "--resolution",
        "current_state_verified",
        "--reason",
        "the provider shows nothing was created",
        "--current-state-version",
        panel["current_state_version_id"] or "none",
        "--confirm-revoke-authority",
        *connect(local, fresh),
    )

    # Then the workspace is released and the native client applies again
    assert code == 0, err
    assert f"{run['id']} recovered (current_state_verified)" in out
    assert writer_of(ws) == (None, None)
    native.run("apply", "-auto-approve", "-input=false")
    # And the run stays needs_recovery, with the completed recovery in its review
    after = local.client.review(run["id"])
    assert (after["status"], after["recovery"]["status"]) == ("needs_recovery", "completed")
    # And the next run plans on the state the workspace holds now
    current = workspace_store.get_workspace(ws, reads=IdentityMap()).current_state_version_id
    assert current is not None
    following = local.client.create_run(ws, config(tmp_path, NATIVE, "next"), kind="plan_only")
    planned = local.client.watch(following["id"], timeout=180)
    assert planned["status"] == "succeeded", planned["status_reason"]
    assert planned["input"]["predecessor_state_version_id"] == current


def test_an_apply_sandbox_that_never_starts_leaves_its_start_uncertain(
    local: Local, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an approved run whose apply sandbox is accepted but never runs
    # (a Fargate task stuck in PROVISIONING looks the same from here)
    ws = new_workspace(local, "silent-start")
    run = local.client.create_run(ws, config(tmp_path, SLOW_APPLY))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    launcher = local.stack.launcher
    assert launcher is not None
    lost: list[str] = []

    def never_runs(request: LaunchRequest) -> str:
        lost.append(request.sandbox_id)
        return "pid:999999999"

    monkeypatch.setattr(launcher, "launch", never_runs)

    # When it is approved and the apply start is awaited
    local.client.decide(run["id"], "approve")

    # Then no heartbeat arrives, and the run says its start cannot be proven
    wait_for(local, run["id"], "apply_start_uncertain", timeout=DETECTION_SECONDS)
    assert len(lost) == 1
    review: dict[str, Any] = local.client.review(run["id"])
    assert review["status"] == "apply_start_uncertain"
    assert review["status_reason"] in TIMED_OUT
    assert review["apply"]["status"] == "uncertain"
    assert writer_of(ws)[0] == run["id"]
