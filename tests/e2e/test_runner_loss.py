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
from runplane.store import run_parts
from tests.e2e.conftest import HEARTBEAT_WINDOW_SECONDS, Local
from tests.e2e.test_cancellation import SLOW_APPLY, wait_for
from tests.e2e.test_managed_runs import config, new_workspace, writer_of

# The window, plus time for the workflow to run its failure step.
DETECTION_SECONDS = HEARTBEAT_WINDOW_SECONDS + 60
TIMED_OUT = {"apply: States.HeartbeatTimeout", "apply: States.Timeout"}


def test_a_runner_silent_after_its_apply_started_leaves_the_run_needing_recovery(
    local: Local, tmp_path: Path
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
    # And the frozen sandbox was stopped
    assert local.stack.launcher is not None
    process = next(p for p in local.stack.launcher.processes if p.pid == pid)
    assert process.poll() is not None


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
