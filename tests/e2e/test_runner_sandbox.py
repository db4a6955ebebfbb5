"""Sandbox directories hold plaintext (configuration, plan, var file, session secret):
the embedded launcher removes each one when its runner ends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from runplane.store import run_parts
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import config, new_workspace
from tests.e2e.test_runner_refusals import wait_removed

SECRET = "s3cr3t-sandbox-5d0e"
ECHO = 'variable "password" {\n  sensitive = true\n}\noutput "n" { value = 1 }\n'


def test_both_sandboxes_of_an_applied_run_are_removed_when_their_runners_end(
    local: Local, tmp_path: Path
) -> None:
    # Given a run with a secret variable, planned and approved
    launcher = local.stack.launcher
    assert launcher is not None
    ws = new_workspace(local, "sandbox-dirs")
    run = local.client.create_run(ws, config(tmp_path, ECHO), variables={"password": SECRET})
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    plan_dir = launcher.sandboxes[run_parts.require(run["id"], "attempt#plan").body["sandbox_ref"]]

    # When it is applied
    local.client.decide(run["id"], "approve")
    assert local.client.watch(run["id"], timeout=120)["status"] == "succeeded"
    apply_dir = launcher.sandboxes[
        run_parts.require(run["id"], "attempt#apply").body["sandbox_ref"]
    ]

    # Then neither sandbox directory remains
    assert plan_dir != apply_dir
    assert wait_removed(plan_dir)
    assert wait_removed(apply_dir)
    # And only the runners' own output is kept beside them, without the secret
    for directory in (plan_dir, apply_dir):
        kept = directory.with_name(f"{directory.name}.log")
        assert kept.is_file()
        assert SECRET not in kept.read_text(errors="replace")


def test_a_runner_that_cannot_report_exits_non_zero_and_leaves_no_work_dir(
    tmp_path: Path,
) -> None:
    # Given a runner whose control plane does not answer
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bootstrap = "rpb_bootstrap-handle-that-must-not-leak"
    env = {
        "PATH": os.defpath,
        "RUNPLANE_CONTROL_PLANE_URL": f"http://127.0.0.1:{port}",
        "RUNPLANE_RUN_ID": "run-x",
        "RUNPLANE_ATTEMPT_ID": "att-x",
        "RUNPLANE_PHASE": "plan",
        "RUNPLANE_SANDBOX_ID": "sbx-x",
        "RUNPLANE_BOOTSTRAP": bootstrap,
    }

    # When it runs
    ended = subprocess.run(
        [sys.executable, "-m", "runplane.runner"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # Then it says it could not report, exits non-zero, and removed its work dir
    assert ended.returncode == 2
    assert "runner: no result could be reported (URLError)" in ended.stdout
    assert bootstrap not in ended.stdout + ended.stderr
    assert not (tmp_path / "runner").exists()
