"""The embedded stack's launcher: each sandbox a runner process, one kept on standby."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from runplane.adapters.launchers import LaunchRequest, LocalProcessLauncher
from runplane.domain.capabilities import Phase
from runplane.domain.sandbox_exits import SandboxExit

# Nothing listens on the discard port: a runner asks once, fails and says why.
UNREACHABLE = "http://127.0.0.1:9"


def _request(sandbox_id: str) -> LaunchRequest:
    return LaunchRequest(
        run_id="run-standby",
        attempt_id="att-standby",
        phase="plan",
        sandbox_id=sandbox_id,
        control_plane_url=UNREACHABLE,
        bootstrap="rpb_not-a-real-handle",
    )


def _process(launcher: LocalProcessLauncher, reference: str) -> subprocess.Popen[bytes]:
    pid = int(reference.removeprefix("pid:"))
    return next(p for p in launcher.processes if p.pid == pid)


def _standby_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith("standby-") and p.is_dir())


def _log_of(workdir: Path) -> str:
    return workdir.with_name(f"{workdir.name}.log").read_text()


@pytest.fixture
def launcher(tmp_path: Path) -> LocalProcessLauncher:
    return LocalProcessLauncher(work_root=tmp_path)


def test_a_launch_after_the_first_hands_the_run_to_the_runner_on_standby(
    launcher: LocalProcessLauncher, tmp_path: Path
) -> None:
    # Given a launcher that has launched one sandbox (cold) and so keeps one on standby
    first = launcher.launch(_request("sbx-first"))
    _process(launcher, first).wait(timeout=30)
    [standby_dir] = _standby_dirs(tmp_path)
    waiting = launcher._standby
    assert waiting is not None
    assert waiting.process.poll() is None

    # When the next sandbox is launched
    second = launcher.launch(_request("sbx-second"))
    process = _process(launcher, second)
    process.wait(timeout=30)
    launcher.stop_all()

    # Then it is the process that waited on standby, in a directory named for the sandbox
    assert process.pid == waiting.process.pid
    workdir = launcher.sandboxes[second]
    assert workdir.name.startswith("sbx-second-")
    assert workdir.name.removeprefix("sbx-second-") == standby_dir.name.removeprefix("standby-")
    # And it ran the handed-over run: it tried the run's control plane (an environment
    # without the run would have failed on a missing variable instead)
    assert "no result could be reported (URLError)" in _log_of(workdir)
    assert process.returncode == 2
    # And each sandbox's directory is gone once its runner ended, and so is the standby
    # that was never used, with its log
    assert not workdir.exists()
    assert not launcher.sandboxes[first].exists()
    assert _standby_dirs(tmp_path) == []
    assert not any(p.name.startswith("standby-") for p in tmp_path.iterdir())


def test_a_standby_that_died_is_replaced_by_a_cold_start(
    launcher: LocalProcessLauncher, tmp_path: Path
) -> None:
    # Given a standby that was killed while it waited
    launcher.launch(_request("sbx-first"))
    waiting = launcher._standby
    assert waiting is not None
    os.killpg(waiting.process.pid, signal.SIGKILL)
    waiting.process.wait(timeout=30)

    # When the next sandbox is launched
    second = launcher.launch(_request("sbx-second"))
    process = _process(launcher, second)
    process.wait(timeout=30)
    launcher.stop_all()

    # Then a fresh runner ran it, and nothing of the dead standby is left
    assert process.pid != waiting.process.pid
    assert "no result could be reported (URLError)" in _log_of(launcher.sandboxes[second])
    assert _standby_dirs(tmp_path) == []
    assert not any(p.name.startswith("standby-") for p in tmp_path.iterdir())


def test_a_stopped_launcher_keeps_no_standby(launcher: LocalProcessLauncher) -> None:
    # Given a launcher that was stopped
    launcher.launch(_request("sbx-first"))
    launcher.stop_all()

    # When something launches through it afterwards (a late task)
    late = launcher.launch(_request("sbx-late"))
    _process(launcher, late).wait(timeout=30)
    launcher.stop_all()

    # Then that sandbox ran cold and no new standby was started
    assert launcher._standby is None


@pytest.mark.parametrize(
    ("handed", "code", "said"),
    [
        (b"", 0, ""),
        (b"not json\n", 2, "the launch handed over no environment"),
        (b'{"RUNPLANE_RUN_ID": 7}\n', 2, "the launch handed over no environment"),
    ],
)
def test_a_runner_on_standby_runs_nothing_without_a_run_handed_over(
    tmp_path: Path, handed: bytes, code: int, said: str
) -> None:
    # Given a runner on standby, when its input ends or holds no environment
    finished = subprocess.run(
        [sys.executable, "-m", "runplane.runner", "--standby"],
        input=handed,
        capture_output=True,
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", os.defpath)},
        timeout=60,
        check=False,
    )

    # Then it exits without reaching for any control plane, saying why if it was handed junk
    assert finished.returncode == code
    assert finished.stdout.decode().strip() == (f"runner: {said}" if said else "")
    assert b"Traceback" not in finished.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="engine users are given only as root")
def test_two_launchers_on_one_machine_never_give_two_sandboxes_one_engine_user(
    tmp_path: Path,
) -> None:
    # Given two launchers, as two embedded stacks on one machine have
    first = LocalProcessLauncher(work_root=tmp_path, isolation="user")
    second = LocalProcessLauncher(work_root=tmp_path, isolation="user")
    # When each claims engine users for its sandboxes
    claimed = [first._engine_uid(), second._engine_uid(), first._engine_uid()]
    # Then no user is claimed twice
    assert len(set(claimed)) == 3
    for launcher, uid in zip((first, second, first), claimed, strict=True):
        launcher._free_uid(uid)


# -- a sandbox that ends is told at once ----------------------------------------------


class Told:
    """The launcher's ``on_exit``: each sandbox end it is told of."""

    def __init__(self, *, failing: bool = False) -> None:
        self.exits: list[SandboxExit] = []
        self.arrived = threading.Event()
        self._failing = failing

    def __call__(self, notice: SandboxExit) -> None:
        self.exits.append(notice)
        self.arrived.set()
        if self._failing:
            raise RuntimeError("the control plane is unreachable")


@pytest.fixture
def silent_control_plane() -> Iterator[str]:
    """A control plane that takes connections and never answers: a runner asking it
    waits, as one does while its engine works."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_a_sandbox_killed_as_a_whole_is_told_by_what_it_was_launched_for(
    tmp_path: Path, silent_control_plane: str
) -> None:
    # Given a launched sandbox whose runner is busy (waiting on its control plane)
    told = Told()
    launcher = LocalProcessLauncher(work_root=tmp_path, on_exit=told)
    request = replace(_request("sbx-killed"), control_plane_url=silent_control_plane)
    reference = launcher.launch(request)
    process = _process(launcher, reference)

    # When its whole process group is killed
    os.killpg(process.pid, signal.SIGKILL)

    # Then the launcher tells which sandbox ended, and how, as soon as it ended
    assert told.arrived.wait(timeout=60)
    launcher.stop_all()
    [notice] = told.exits
    assert notice == SandboxExit(
        run_id="run-standby",
        phase=Phase.PLAN,
        attempt_id="att-standby",
        sandbox_id="sbx-killed",
        reference=reference,
        detail="the runner process was killed by signal 9 (SIGKILL)",
    )
    # And the sandbox's directory is gone
    assert not launcher.sandboxes[reference].exists()


def test_a_runner_that_exits_by_itself_is_told_with_its_exit_code(
    launcher: LocalProcessLauncher,
) -> None:
    # Given a launcher told of every sandbox's end
    told = Told()
    launcher.on_exit = told

    # When a sandbox's runner ends by itself (it cannot reach its control plane)
    reference = launcher.launch(_request("sbx-exits"))

    # Then its end is told with its exit code (whether it matters is the control
    # plane's to decide: a runner that reported first finds its attempt closed)
    assert told.arrived.wait(timeout=60)
    launcher.stop_all()
    assert [(n.reference, n.detail) for n in told.exits] == [
        (reference, "the runner process exited with code 2")
    ]


def test_a_stopping_launcher_tells_nothing_of_the_sandboxes_it_stops(
    tmp_path: Path, silent_control_plane: str
) -> None:
    # Given a busy sandbox
    told = Told()
    launcher = LocalProcessLauncher(work_root=tmp_path, on_exit=told)
    reference = launcher.launch(
        replace(_request("sbx-shutdown"), control_plane_url=silent_control_plane)
    )

    # When the launcher stops (the stack is going away), which kills it
    launcher.stop_all()

    # Then its runner ended, and nothing was told of it
    assert _process(launcher, reference).poll() is not None
    assert told.exits == []


def test_a_notice_that_fails_still_leaves_nothing_of_the_sandbox(
    tmp_path: Path, silent_control_plane: str
) -> None:
    # Given a launcher whose notices fail (its control plane is down)
    told = Told(failing=True)
    launcher = LocalProcessLauncher(work_root=tmp_path, on_exit=told)
    reference = launcher.launch(
        replace(_request("sbx-unheard"), control_plane_url=silent_control_plane)
    )
    workdir = launcher.sandboxes[reference]

    # When the sandbox is killed
    os.killpg(_process(launcher, reference).pid, signal.SIGKILL)

    # Then the notice was tried, and the sandbox's directory is removed all the same
    assert told.arrived.wait(timeout=60)
    launcher.stop_all()
    assert not workdir.exists()


def _pool_variables(control_plane: str, wait_seconds: int) -> dict[str, str]:
    return {
        "RUNPLANE_STANDBY_TICKET": "rsb_sby-local.ticket-secret-value",
        "RUNPLANE_CONTROL_PLANE_URL": control_plane,
        "RUNPLANE_STANDBY_SECONDS": str(wait_seconds),
        "RUNPLANE_STANDBY_POLL_SECONDS": "1",
    }


def test_a_pool_standby_never_assigned_ends_with_its_wait_and_tells_nothing(
    tmp_path: Path,
) -> None:
    # Given a pool standby whose control plane never answers, waiting one second
    told = Told()
    launcher = LocalProcessLauncher(work_root=tmp_path, on_exit=told)
    reference = launcher.start_standby("sby-local", _pool_variables(UNREACHABLE, 1))
    assert launcher.pool_standbys == [reference]

    # When its wait ends
    assert _process(launcher, reference).wait(timeout=60) == 0

    # Then the launcher reports it ended (as it does a reference it never had)
    assert launcher.ended([reference, "pid:999999999"]) == {reference, "pid:999999999"}
    launcher.stop_all()
    # And nothing was told of a standby that ran no phase
    assert told.exits == []
    # And its directory is gone; its log says it ended unassigned, without its ticket
    workdir = launcher.sandboxes[reference]
    assert not workdir.exists()
    log = _log_of(workdir)
    assert "standby ended with no run assigned" in log
    assert "ticket-secret-value" not in log


def test_a_pool_standby_killed_after_its_assignment_is_told_as_that_sandbox(
    tmp_path: Path, silent_control_plane: str
) -> None:
    # Given a pool standby, polling, that the pool assigned to an attempt
    told = Told()
    launcher = LocalProcessLauncher(work_root=tmp_path, on_exit=told)
    reference = launcher.start_standby("sby-local", _pool_variables(silent_control_plane, 300))
    assert launcher.ended([reference]) == set()
    launcher.assigned(reference, _request("sbx-pooled"))

    # When its whole process group is killed
    os.killpg(_process(launcher, reference).pid, signal.SIGKILL)

    # Then its end is told by what the pool assigned it
    assert told.arrived.wait(timeout=60)
    launcher.stop_all()
    [notice] = told.exits
    assert (notice.sandbox_id, notice.attempt_id, notice.reference) == (
        "sbx-pooled",
        "att-standby",
        reference,
    )
