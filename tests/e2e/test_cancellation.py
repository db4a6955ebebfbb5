"""Cancellation is a durable signal decided by one conditional write, in every status."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runplane.client import ApiError
from runplane.store import run_parts
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, config, new_workspace, stages, writer_of

SLOW_APPLY = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
resource "test_thing" "slow" {
  name          = "slow"
  sleep_seconds = 30
}
"""


def wait_for(local: Local, run_id: str, status: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while local.client.review(run_id)["status"] != status:
        assert time.monotonic() < deadline, f"run {run_id} never reached {status}"
        time.sleep(0.1)


def test_canceling_a_run_awaiting_approval_ends_it_and_hands_the_workspace_on(
    local: Local,
) -> None:
    # Given a run awaiting approval, and another waiting behind it
    ws = new_workspace(local, "cancel")
    first = local.client.create_run(ws, HELLO)
    local.client.watch(first["id"], until=["awaiting_approval"], timeout=120)
    second = local.client.create_run(ws, HELLO, variables={"greeting": "next"})
    wait_for(local, second["id"], "queued")

    # When the first is canceled
    canceled = local.client.cancel(first["id"])

    # Then it ended canceled, with its approval closed and apply skipped
    assert canceled["status"] == "canceled"
    assert stages(canceled)["approval"] == "failed"
    assert stages(canceled)["apply"] == "skipped"
    assert run_parts.require(first["id"], "signal#cancel").state == "accepted"
    # And the next run took the workspace at once
    waiting = local.client.watch(second["id"], until=["awaiting_approval"], timeout=120)
    assert waiting["status"] == "awaiting_approval"
    assert writer_of(ws)[0] == second["id"]
    local.client.cancel(second["id"])
    assert writer_of(ws) == (None, None)


def test_a_run_that_already_ended_cannot_be_canceled(local: Local) -> None:
    ws = new_workspace(local, "ended")
    run = local.client.create_run(ws, HELLO, kind="plan_only")
    local.client.watch(run["id"], timeout=120)

    with pytest.raises(ApiError) as refused:
        local.client.cancel(run["id"])

    assert refused.value.status == 409
    assert "succeeded" in str(refused.value)
    assert local.client.review(run["id"])["status"] == "succeeded"


def test_a_cancellation_during_apply_interrupts_it_and_keeps_writer_authority(
    local: Local, tmp_path: Path
) -> None:
    # Given a run applying a slow change
    ws = new_workspace(local, "interrupt")
    run = local.client.create_run(ws, config(tmp_path, SLOW_APPLY))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    local.client.decide(run["id"], "approve")
    wait_for(local, run["id"], "applying")

    # When it is canceled before the apply result arrives
    interrupted = local.client.cancel(run["id"])

    # Then the cancellation won: the sandbox is stopped and the fence stays held
    assert interrupted["status"] == "apply_interrupted"
    assert stages(interrupted)["apply"] == "failed"
    writer, lock = writer_of(ws)
    assert writer == run["id"]
    assert lock is not None
    assert local.stack.launcher is not None
    attempt = run_parts.require(run["id"], "attempt#apply").body
    pid = int(str(attempt["sandbox_ref"]).removeprefix("pid:"))
    process = next(p for p in local.stack.launcher.processes if p.pid == pid)
    assert process.poll() is not None
    # And the run never later claims success
    time.sleep(1)
    assert local.client.review(run["id"])["status"] == "apply_interrupted"


SLOW_PLAN = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
resource "test_thing" "slow" {
  name               = "slow-plan"
  plan_sleep_seconds = 30
}
"""


def test_canceling_a_planning_run_stops_its_sandbox(local: Local, tmp_path: Path) -> None:
    # Given a run whose plan is running in a sandbox
    ws = new_workspace(local, "cancelplan")
    run = local.client.create_run(ws, config(tmp_path, SLOW_PLAN))
    wait_for(local, run["id"], "planning")
    deadline = time.monotonic() + 30
    while run_parts.require(run["id"], "attempt#plan").state != "started":
        assert time.monotonic() < deadline
        time.sleep(0.1)

    # When it is canceled
    canceled = local.client.cancel(run["id"])

    # Then the run ended canceled, the sandbox was stopped, and the workspace is free
    assert canceled["status"] == "canceled"
    assert stages(canceled)["plan"] == "failed"
    attempt = run_parts.require(run["id"], "attempt#plan").body
    pid = int(str(attempt["sandbox_ref"]).removeprefix("pid:"))
    assert local.stack.launcher is not None
    process = next(p for p in local.stack.launcher.processes if p.pid == pid)
    assert process.poll() is not None
    assert writer_of(ws) == (None, None)
