"""A run whose sandbox is killed mid-apply, then recovered, each handler under its role."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from runplane.store import run_parts
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import unique
from tests.e2e.test_cancellation import SLOW_APPLY
from tests.e2e.test_managed_runs import config
from tests.iam.conftest import Enforced
from tests.iam.observed import Scenario, as_harness, refusals, watch


def started_sandbox(enforced: Enforced, run_id: str, phase: str) -> int:
    """The process ID of the run's ``phase`` sandbox, once its launch is recorded."""
    deadline = time.monotonic() + 60
    while True:
        attempt = as_harness(run_parts.get, run_id, f"attempt#{phase}", reads=IdentityMap())
        if attempt is not None and attempt.state == "started":
            return int(str(attempt.body["sandbox_ref"]).removeprefix("pid:"))
        assert time.monotonic() < deadline, f"no {phase} sandbox started; {refusals(enforced)}"
        time.sleep(0.2)


def test_a_sandbox_lost_mid_apply_and_its_recovery_need_nothing_their_roles_do_not_allow(
    enforced: Enforced, tmp_path: Path
) -> None:
    client = enforced.local.client
    launcher = enforced.local.stack.launcher
    assert launcher is not None
    # Given a run whose engine is applying a slow change
    workspace = str(client.create_workspace(unique("iam-recovery"))["id"])
    run = client.create_run(workspace, config(tmp_path, SLOW_APPLY))
    watch(enforced, run["id"], until=["awaiting_approval"])
    client.decide(run["id"], "approve")
    pid = started_sandbox(enforced, run["id"], "apply")
    # (its apply start proven: killed before it, the run's start would be uncertain)
    watch(enforced, run["id"], until=["applying"])
    scenario = Scenario(enforced)

    # When its whole sandbox is killed mid-apply
    os.killpg(pid, signal.SIGKILL)
    next(p for p in launcher.processes if p.pid == pid).wait(timeout=30)

    # Then the sandbox's end is noticed and the run needs recovery
    lost = watch(enforced, run["id"], until=["needs_recovery"])
    assert lost["status"] == "needs_recovery", (lost, refusals(enforced))
    panel = client.review(run["id"])["recovery"]
    assert panel["status"] == "required"

    # When an operator recovers it
    recovered = client.recover(
        run["id"],
        {
            "resolution": "current_state_verified",
            "reason": "the provider shows nothing was created",
            "confirm_authority_revocation": True,
            "current_state_version_id": panel["current_state_version_id"],
        },
    )

    # Then the recovery completes and the workspace takes a run again
    assert recovered["resolution"] == "current_state_verified", recovered
    assert client.review(run["id"])["recovery"]["status"] == "completed"
    # And nothing any handler called was refused or unattributed
    scenario.assert_clean()
    # And the sandbox's end, the run's failure step and the recovery were each made
    # under their own function's role
    assert scenario.signed(
        "functions.sandboxes.handler.stopped",
        "functions.tasks.handlers.fail_run",
        "functions.api.app.handler",
    ) == dict.fromkeys(
        (
            "functions.sandboxes.handler.stopped",
            "functions.tasks.handlers.fail_run",
            "functions.api.app.handler",
        ),
        True,
    )
