"""An engine killed mid-apply leaves its run apply_interrupted, holding the workspace."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from runplane.client import ApiError
from runplane.store import run_parts
from tests.e2e.conftest import Local
from tests.e2e.test_cancellation import SLOW_APPLY, wait_for
from tests.e2e.test_managed_runs import config, new_workspace, writer_of

_ENGINES = {"terraform", "tofu"}


def _processes() -> Iterator[tuple[int, int, list[str]]]:
    """(pid, parent pid, argv) of every process this machine shows."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:  # it ended meanwhile
            continue
        parent = next(line for line in status.splitlines() if line.startswith("PPid:"))
        yield int(entry.name), int(parent.split()[1]), [a.decode(errors="replace") for a in argv]


def _engine_applying_under(sandbox_pid: int) -> int | None:
    """The engine process running ``apply`` that descends from the sandbox's runner
    (through bubblewrap when sandboxes are confined): only this run's engine."""
    seen = list(_processes())
    parents = {pid: parent for pid, parent, _ in seen}

    def descends(pid: int) -> bool:
        for _ in range(64):
            if pid == sandbox_pid:
                return True
            pid = parents.get(pid, 0)
            if pid <= 1:
                return False
        return False

    for pid, _, argv in seen:
        if os.path.basename(argv[0]) in _ENGINES and "apply" in argv and descends(pid):
            return pid
    return None


def _wait_for_log(local: Local, run_id: str, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if text in local.client.log(run_id, "apply"):
                return
        except ApiError as error:  # 404 until the apply phase's log starts
            if error.status != 404:
                raise
        assert time.monotonic() < deadline, f"the apply log never showed {text!r}"
        time.sleep(0.2)


def test_an_engine_killed_mid_apply_interrupts_the_run_and_keeps_the_workspace(
    local: Local, tmp_path: Path
) -> None:
    # Given a run applying a slow resource, its engine creating it
    ws = new_workspace(local, "killed")
    run = local.client.create_run(ws, config(tmp_path, SLOW_APPLY))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    local.client.decide(run["id"], "approve")
    wait_for(local, run["id"], "applying")
    _wait_for_log(local, run["id"], "Creating...")
    sandbox_ref = str(run_parts.require(run["id"], "attempt#apply").body["sandbox_ref"])
    engine = _engine_applying_under(int(sandbox_ref.removeprefix("pid:")))
    assert engine is not None, "no engine applying under the run's sandbox"

    # When the engine is killed
    os.kill(engine, signal.SIGKILL)

    # Then the run ends apply_interrupted, naming the signal
    ended = local.client.watch(run["id"], timeout=60)
    assert ended["status"] == "apply_interrupted"
    assert "signal 9 (SIGKILL)" in ended["status_reason"]
    # And the runner wrote it to the apply log
    log = local.client.log(run["id"], "apply")
    assert "killed by signal 9 (SIGKILL) during apply" in log
    assert "Apply complete!" not in log
    # And the workspace is still held for recovery
    writer, lock = writer_of(ws)
    assert writer == run["id"]
    assert lock is not None
