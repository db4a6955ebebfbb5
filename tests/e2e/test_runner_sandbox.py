"""Sandbox directories hold plaintext (configuration, plan, var file, session secret):
the embedded launcher removes each one when its runner ends."""

from __future__ import annotations

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
