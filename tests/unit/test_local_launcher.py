"""The embedded stack's launcher: each sandbox a runner process, one kept on standby."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runplane.adapters.launchers import LaunchRequest, LocalProcessLauncher

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
