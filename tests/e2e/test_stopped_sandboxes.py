"""A sandbox that stops is noticed as it stops, on the real workflow and engine.

These tests give their runs a heartbeat window far longer than they wait (300 s
against at most 60 s), so a run that ends within the wait was ended by the launcher
seeing its sandbox's process exit, not by the heartbeat backstop (the status reason
says which, too).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from runplane.store import run_parts
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local
from tests.e2e.test_cancellation import SLOW_APPLY, SLOW_PLAN, wait_for
from tests.e2e.test_cloud_api_http import call
from tests.e2e.test_forged_reports_http import execution_status
from tests.e2e.test_managed_runs import HELLO, config, events, new_workspace, writer_of
from tests.e2e.test_terraform_remote_backend import backend, configuration

HEARTBEAT_WINDOW = timedelta(seconds=300)
# Generous, and still far inside the heartbeat window.
NOTICED_WITHIN_SECONDS = 60
NATIVE = 'output "native" { value = "ok" }\n'


@pytest.fixture
def long_heartbeat(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs started meanwhile wait 300 s for a heartbeat (the workflow takes the window
    from its first step, so only this test's runs get it)."""
    assert local.stack.services is not None
    steps = local.stack.services.orchestration.steps
    timing = steps._timing  # the window the Queue step hands each new execution
    monkeypatch.setattr(steps, "_timing", replace(timing, runner_heartbeat=HEARTBEAT_WINDOW))


def _started_sandbox(local: Local, run_id: str, phase: str) -> int:
    """The process ID of the run's ``phase`` sandbox, once its launch is recorded."""
    deadline = time.monotonic() + 60
    while True:
        attempt = run_parts.get(run_id, f"attempt#{phase}", reads=IdentityMap())
        if attempt is not None and attempt.state == "started":
            return int(str(attempt.body["sandbox_ref"]).removeprefix("pid:"))
        assert time.monotonic() < deadline, f"the {phase} sandbox of {run_id} never started"
        time.sleep(0.1)


def _kill_whole_sandbox(local: Local, pid: int) -> None:
    """SIGKILL the runner's process group; the engine's own processes (another user)
    are killed by the launcher once the runner is gone, as a lost task's would be."""
    os.killpg(pid, signal.SIGKILL)
    assert local.stack.launcher is not None
    process = next(p for p in local.stack.launcher.processes if p.pid == pid)
    process.wait(timeout=30)


@pytest.mark.usefixtures("long_heartbeat")
def test_a_sandbox_killed_mid_apply_needs_recovery_at_once_and_native_clients_are_told(
    local: Local, tmp_path: Path
) -> None:
    # Given a run whose engine is applying a slow change
    ws = new_workspace(local, "killed-apply")
    run = local.client.create_run(ws, config(tmp_path, SLOW_APPLY))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    local.client.decide(run["id"], "approve")
    wait_for(local, run["id"], "applying")
    pid = _started_sandbox(local, run["id"], "apply")

    # When the whole sandbox is killed mid-apply
    _kill_whole_sandbox(local, pid)

    # Then the run needs recovery well before any heartbeat window could end, and says
    # its sandbox stopped (not that a heartbeat timed out)
    wait_for(local, run["id"], "needs_recovery", timeout=NOTICED_WITHIN_SECONDS)
    review = local.client.review(run["id"])
    assert review["status_reason"] == (
        "apply: SandboxStopped (the runner process was killed by signal 9 (SIGKILL))"
    )
    assert review["apply"]["status"] == "uncertain"
    assert run_parts.require(run["id"], "attempt#apply").state == "lost"
    # And the workspace and its fenced lock stay with the run, for recovery
    writer, lock = writer_of(ws)
    assert (writer, lock is not None) == (run["id"], True)
    # And the workflow's wait ended too: the execution took its failure path
    assert execution_status(local, run["id"], timeout=NOTICED_WITHIN_SECONDS) == "FAILED"

    # And a native client sees why from that moment: the workspace is locked by that run,
    name = local.client.workspace(ws)["name"]
    document = call(local, "GET", f"/api/v2/workspaces/{ws}").json()["data"]
    assert document["attributes"]["locked"] is True
    assert document["relationships"]["locked-by"]["data"] == {"id": run["id"], "type": "runs"}
    # whose TFE run reads errored, naming the uncertainty and the sandbox's stop,
    attributes = call(local, "GET", f"/api/v2/runs/{run['id']}").json()["data"]["attributes"]
    assert attributes["status"] == "errored"
    assert attributes["runplane-status"] == "needs_recovery"
    assert attributes["status-reason"] == review["status_reason"]
    # and its plan is refused with the recovery to complete, not "already locked"
    native = configuration(tmp_path, "native", backend(local, name) + NATIVE, local)
    native.run("init", "-input=false")
    refused = native.run("plan", "-input=false", "-no-color", check=False)
    said = " ".join(refused.stderr.split())
    assert refused.returncode != 0
    assert f"held by run {run['id']} (status needs_recovery)" in said, refused.stderr
    assert "complete that run's recovery (runplane run recover)" in said, refused.stderr
    assert f"runplane run show {run['id']} shows that run" in said, refused.stderr


@pytest.mark.usefixtures("long_heartbeat")
def test_a_sandbox_killed_mid_plan_fails_the_plan_and_frees_the_workspace_at_once(
    local: Local, tmp_path: Path
) -> None:
    # Given a run whose engine is planning slowly, holding the workspace
    ws = new_workspace(local, "killed-plan")
    run = local.client.create_run(ws, config(tmp_path, SLOW_PLAN))
    pid = _started_sandbox(local, run["id"], "plan")
    assert writer_of(ws)[0] == run["id"]

    # When the whole sandbox is killed
    _kill_whole_sandbox(local, pid)

    # Then the plan failed, saying its sandbox stopped, and the workspace is free
    wait_for(local, run["id"], "plan_failed", timeout=NOTICED_WITHIN_SECONDS)
    review = local.client.review(run["id"])
    assert review["status_reason"] == (
        "plan: SandboxStopped (the runner process was killed by signal 9 (SIGKILL))"
    )
    assert writer_of(ws) == (None, None)
    assert execution_status(local, run["id"], timeout=NOTICED_WITHIN_SECONDS) == "FAILED"


@pytest.mark.usefixtures("long_heartbeat")
def test_sandboxes_that_exit_after_their_results_change_nothing(
    local: Local, tmp_path: Path
) -> None:
    # Given a run planned and applied to success, each runner exiting after its result
    ws = new_workspace(local, "exits-normally")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "succeeded", done["status_reason"]
    trail = events(local, run["id"])

    # When both sandboxes have ended and the launcher has told of each end (it does so
    # before it removes the sandbox's directory)
    launcher = local.stack.launcher
    assert launcher is not None
    for phase in ("plan", "apply"):
        reference = str(run_parts.require(run["id"], f"attempt#{phase}").body["sandbox_ref"])
        deadline = time.monotonic() + NOTICED_WITHIN_SECONDS
        while launcher.sandboxes[reference].exists():
            assert time.monotonic() < deadline, f"the {phase} sandbox never ended"
            time.sleep(0.1)

    # Then the run is exactly as its results left it
    after = local.client.review(run["id"])
    assert (after["status"], after["status_reason"]) == ("succeeded", None)
    assert events(local, run["id"]) == trail
    for phase in ("plan", "apply"):
        assert run_parts.require(run["id"], f"attempt#{phase}").state == "succeeded"
    assert writer_of(ws) == (None, None)
    assert execution_status(local, run["id"]) == "SUCCEEDED"
