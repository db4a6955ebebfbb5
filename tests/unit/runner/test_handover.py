"""A runner's launch handles reach it on its standard input, never in a process
environment: ``/proc/<pid>/environ`` (which the environment a process was started
with stays in) holds none, however the runner was launched."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.adapters.launchers import LaunchRequest, LocalProcessLauncher

BOOTSTRAP = "rpb_handle-that-must-stay-private"
APPLY_START = "rpc_apply-start-that-must-stay-private"


@pytest.fixture
def silent_control_plane() -> Iterator[str]:
    """A control plane that accepts connections and never answers: a runner asking it
    for its session waits, alive, while the test looks at it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _environments_over(pid: int, seconds: float) -> list[bytes]:
    """Runner ``pid``'s environment, read again and again for ``seconds``."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(_environ(pid))
        time.sleep(0.02)
    return seen


def test_a_runner_launched_by_the_embedded_stack_holds_no_handle_in_its_environment(
    tmp_path: Path, silent_control_plane: str
) -> None:
    # Given a launcher, cold (no runner on standby yet)
    launcher = LocalProcessLauncher(work_root=tmp_path)
    request = LaunchRequest(
        run_id="run-1",
        attempt_id="att-1",
        phase="apply",
        sandbox_id="sbx-handover",
        control_plane_url=silent_control_plane,
        bootstrap=BOOTSTRAP,
        apply_start=APPLY_START,
    )
    try:
        # When it launches a sandbox, whose runner then waits for its session
        reference = launcher.launch(request)
        pid = int(reference.removeprefix("pid:"))
        seen = _environments_over(pid, 2.0)
        # Then at no moment was either handle in the runner's process environment
        assert next(p for p in launcher.processes if p.pid == pid).poll() is None
        for environ in seen:
            assert BOOTSTRAP.encode() not in environ
            assert APPLY_START.encode() not in environ
    finally:
        launcher.stop_all()


def test_a_runner_started_with_its_handles_in_the_environment_moves_them_to_a_pipe(
    tmp_path: Path, silent_control_plane: str
) -> None:
    # Given a runner started as a Fargate task starts it: everything in its environment
    environment = {
        "PATH": os.environ.get("PATH", os.defpath),
        "RUNPLANE_RUN_ID": "run-1",
        "RUNPLANE_ATTEMPT_ID": "att-1",
        "RUNPLANE_PHASE": "plan",
        "RUNPLANE_SANDBOX_ID": "sbx-task",
        "RUNPLANE_CONTROL_PLANE_URL": silent_control_plane,
        "RUNPLANE_BOOTSTRAP": BOOTSTRAP,
        "RUNPLANE_APPLY_START": APPLY_START,
    }
    runner = subprocess.Popen(
        [sys.executable, "-m", "runplane.runner"],
        cwd=tmp_path,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # When it has started its phase (it asks for its session)
        # (an environment read while the process executes itself anew reads empty)
        deadline = time.monotonic() + 30
        environ = _environ(runner.pid)
        while (b"RUNPLANE_BOOTSTRAP" in environ or not environ) and time.monotonic() < deadline:
            time.sleep(0.05)
            environ = _environ(runner.pid)
        # Then it is the same process, re-executed: its environment keeps the run's
        # public names but neither handle
        assert runner.poll() is None
        assert b"RUNPLANE_RUN_ID=run-1" in environ
        assert BOOTSTRAP.encode() not in environ
        assert APPLY_START.encode() not in environ
    finally:
        runner.kill()
        runner.wait(timeout=10)
