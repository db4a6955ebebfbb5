"""The engine's confinement as each isolation gives it: as whom it runs, what it can
read, what outlives a command, and how the runner reads what it wrote."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.adapters.launchers import ENGINE_UID_BASE, ENGINE_UID_COUNT, hold_engine_uid
from runplane.runner.confinement import (
    Confinement,
    ConfinementError,
    EngineUser,
    Isolation,
    _reap_within,
    read_engine_file,
)

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="separating users needs root")
with_bubblewrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs root and bubblewrap"
)
# Each test's engine user is claimed as the embedded stacks claim theirs (a lock file a
# UID, machine-wide): two tests, or a test and a stack, never share one, so one's
# end-of-command kill of its user's processes cannot reach the other's.
_TEST_UIDS = range(ENGINE_UID_BASE + ENGINE_UID_COUNT - 512, ENGINE_UID_BASE + ENGINE_UID_COUNT)


@pytest.fixture
def user() -> Iterator[EngineUser]:
    for uid in _TEST_UIDS:
        held = hold_engine_uid(uid)
        if held is not None:
            try:
                yield EngineUser(uid, uid)
            finally:
                os.close(held)
            return
    pytest.fail("no engine user is free for the test")


SHELL_PATH = {"PATH": "/usr/bin:/bin"}


def _sandbox(tmp_path: Path, confinement: Confinement) -> tuple[Path, Path]:
    """A sandbox directory holding the runner's private directory (with a secret) and
    the engine's."""
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir(mode=0o700)
    private = sandbox / "runner"
    private.mkdir(mode=0o700)
    (private / "session").write_text("rps_secret")
    home = confinement.engine_directory(sandbox / "engine")
    return private, home


def _run(confinement: Confinement, home: Path, script: str) -> str:
    process = confinement.spawn(
        ["sh", "-c", script],
        cwd=home,
        env={**SHELL_PATH, "HOME": str(home)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output, _ = process.communicate(timeout=60)
    confinement.sweep()
    return output.decode()


def _alive(marker: str) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


@pytest.mark.parametrize(
    "isolation",
    [
        pytest.param(Isolation.USER, marks=as_root),
        pytest.param(Isolation.NAMESPACES, marks=with_bubblewrap),
    ],
)
def test_the_engine_runs_as_its_own_user_reads_nothing_of_the_runners_and_leaves_nothing(
    tmp_path: Path, isolation: Isolation, user: EngineUser
) -> None:
    # Given a confinement of the launch's choosing
    confinement = Confinement.from_environ(
        {
            "RUNPLANE_ENGINE_ISOLATION": isolation.value,
            "RUNPLANE_ENGINE_USER": f"{user.uid}:{user.gid}",
        }
    )
    private, home = _sandbox(tmp_path, confinement)
    marker = f"{os.getpid() % 800 + 100}.{time.monotonic_ns() % 1000}"
    try:
        # When an engine command reads the runner's secret and starts a process of its
        # own in a session of its own
        output = _run(
            confinement,
            home,
            f"id -u; cat {private}/session 2>&1; ls {private} 2>&1; "
            f"setsid sleep {marker} >/dev/null 2>&1 < /dev/null & echo started",
        )
    finally:
        confinement.close()
    # Then it ran as the engine's user, read nothing of the runner's, and what it started
    # did not outlive it
    assert output.splitlines()[0] == str(user.uid)
    assert "rps_secret" not in output
    assert "started" in output
    deadline = time.monotonic() + 10
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(marker)


def test_a_launch_asking_for_more_than_this_process_can_give_is_refused() -> None:
    with pytest.raises(ConfinementError):
        Confinement.from_environ({"RUNPLANE_ENGINE_ISOLATION": "jail"})
    with pytest.raises(ConfinementError):
        Confinement.from_environ(
            {"RUNPLANE_ENGINE_ISOLATION": "user", "RUNPLANE_ENGINE_USER": "0:0"}
        )
    assert Confinement.from_environ({}).isolation is Isolation.NONE


@as_root
def test_the_runner_reads_what_the_engine_wrote_only_as_a_regular_file_within_bounds(
    tmp_path: Path, user: EngineUser
) -> None:
    # Given an engine that put a link, a FIFO and an oversized file where the runner reads
    secret = tmp_path / "secret"
    secret.write_text("the runner's own")
    (tmp_path / "linked").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "large").write_bytes(b"x" * 2048)
    (tmp_path / "plan").write_bytes(b"PK")
    # When the runner reads each, Then only the regular file within bounds is read
    for name in ("linked", "fifo", "large", "missing"):
        with pytest.raises(ConfinementError):
            read_engine_file(tmp_path / name, limit=1024)
    assert read_engine_file(tmp_path / "plan", limit=1024) == b"PK"
    # And a file the engine's user does not own (a hard link to the runner's) is refused
    os.chown(tmp_path / "plan", user.uid, user.gid)
    assert read_engine_file(tmp_path / "plan", limit=1024, owner=user.uid) == b"PK"
    with pytest.raises(ConfinementError, match="not the engine's own"):
        read_engine_file(secret, limit=1024, owner=user.uid)


@with_bubblewrap
@pytest.mark.parametrize(("network", "reachable"), [("", False), ("host", True)])
def test_with_namespaces_the_engine_reaches_this_machines_network_only_when_given_it(
    tmp_path: Path, network: str, reachable: bool, user: EngineUser
) -> None:
    # Given a server on this machine's loopback, and a confinement with namespaces
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        confinement = Confinement.from_environ(
            {
                "RUNPLANE_ENGINE_ISOLATION": "namespaces",
                "RUNPLANE_ENGINE_USER": f"{user.uid}:{user.gid}",
                "RUNPLANE_ENGINE_NETWORK": network,
            }
        )
        _, home = _sandbox(tmp_path, confinement)
        try:
            # When an engine command connects to it
            output = _run(
                confinement,
                home,
                f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null"
                " && echo open || echo closed",
            )
        finally:
            confinement.close()
    # Then it reached it only when the launch gave it this machine's network
    assert output.strip() == ("open" if reachable else "closed")


def test_a_sweep_stopped_by_the_engine_users_processes_is_killed_and_reported() -> None:
    # Given a sweeping child that the engine user's processes stopped (they may signal it)
    child = subprocess.Popen(["sleep", "300"])  # noqa: S607 - a test process
    os.kill(child.pid, signal.SIGSTOP)
    # When the runner waits for it past a time limit
    with pytest.raises(subprocess.TimeoutExpired):
        _reap_within(child.pid, 0.2)
    # Then the child is gone (killed and reaped), not left for the run to hang on
    assert not Path(f"/proc/{child.pid}").exists()
