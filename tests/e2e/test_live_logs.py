"""Live run logs on the embedded stack: the runner streams redacted chunks while the
engine runs, readers follow them by byte offset over real HTTP, and the final log
artifact takes over once uploaded.

The engine here is the pinned binary behind a wrapper script that, on ``plan``, prints a
line and then waits for a gate file before handing over to the real engine: the test
opens the gate, so "a line is seen before the phase ends" needs no timing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from runplane.cli import main
from runplane.local.gateway import Gateway
from runplane.store import log_chunks, run_parts
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cli import connect
from tests.e2e.test_managed_runs import HELLO, config, new_workspace
from tests.engine import engine_path

Capture = pytest.CaptureFixture[str]
WAIT_SECONDS = 120


def gated_engine(directory: Path, before: str, gate: Path) -> Path:
    """The real engine, except that ``plan`` first prints ``before`` and waits for ``gate``."""
    script = directory / "gated-engine"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = plan ]; then\n'
        f"  echo '{before}'\n"
        f"  while [ ! -e '{gate}' ]; do sleep 0.1; done\n"
        "  echo 'the gate opened'\n"
        "fi\n"
        f"exec '{engine_path()}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def gated(local: Local, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sandboxes of this test run the gated engine; returns the gate to open."""
    assert local.stack.launcher is not None
    # The engine runs as a user of its own that sees its binary's directory (read-only):
    # the gate is there, in a directory that user may enter.
    directory = tmp_path / "gated"
    directory.mkdir(mode=0o755)
    gate = directory / "gate"
    engine = gated_engine(directory, "waiting at the gate", gate)
    monkeypatch.setattr(local.stack.launcher, "_engine", str(engine))
    return gate


def eventually(check: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS) -> Any:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def read(local: Local, run_id: str, phase: str = "plan", **query: Any) -> requests.Response:
    return requests.get(
        f"{local.url}/api/v1/runs/{run_id}/logs/{phase}",
        params=query,
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )


def streamed(local: Local, run_id: str, phase: str = "plan") -> bytes:
    """The attempt's stored live chunks, decrypted and joined in order."""
    services = local.stack.services
    assert services is not None
    attempt = run_parts.require(run_id, f"attempt#{phase}").body
    chunks = log_chunks.of_attempt(run_id, attempt["attempt_id"])
    assert [c.sequence for c in chunks] == list(range(len(chunks)))
    org_id = services.workspaces.organization_id_of(local.organization)
    return b"".join(services.artifacts.read(org_id, c.artifact_id) for c in chunks)


def final_log(local: Local, run_id: str, phase: str = "plan") -> bytes:
    services = local.stack.services
    assert services is not None
    attempt = run_parts.require(run_id, f"attempt#{phase}").body
    org_id = services.workspaces.organization_id_of(local.organization)
    return services.artifacts.read(org_id, attempt["log_artifact_id"])


def test_a_plan_is_followed_while_it_runs_and_the_final_log_is_the_stream(
    local: Local, gated: Path, capsys: Capture
) -> None:
    # Given a plan held at the gate after printing a line
    ws = new_workspace(local, "live")
    run_id = local.client.create_run(ws, HELLO, kind="plan_only")["id"]

    # When `runplane run logs RUN --follow` follows it
    exits: list[int] = []
    capsys.readouterr()
    follower = threading.Thread(
        target=lambda: exits.append(main(["run", "logs", run_id, "--follow", *connect(local)]))
    )
    follower.start()
    printed = [""]

    def seen() -> bool:
        printed[0] += capsys.readouterr().out
        return "waiting at the gate" in printed[0]

    # Then the line is printed while the plan still runs (the gate is closed)
    eventually(seen, "the line before the gate")
    assert follower.is_alive()
    assert local.client.review(run_id)["status"] == "planning"
    live = read(local, run_id)
    assert live.status_code == 200
    assert live.headers["Runplane-Log-Complete"] == "false"
    assert live.headers["Runplane-Log-Source"] == "live"
    assert "waiting at the gate" in live.text
    assert not live.text.endswith("\x03")

    # And when the gate opens the follower prints the rest and exits 0 at the end
    gated.touch()
    follower.join(WAIT_SECONDS)
    assert not follower.is_alive()
    assert exits == [0]
    printed[0] += capsys.readouterr().out
    assert "the gate opened" in printed[0]
    assert "Plan: 1 to add" in printed[0]
    review = local.client.watch(run_id, timeout=WAIT_SECONDS)
    assert review["status"] == "succeeded"

    # And the final log starts with exactly the streamed chunks (their undelivered
    # rest is not sent once the final log is stored)
    final = final_log(local, run_id)
    live_part = streamed(local, run_id)
    assert live_part
    assert final.startswith(live_part)
    assert printed[0].rstrip("\n") == final.decode().rstrip("\n")

    # And a finished log reads from the artifact, complete, ending with ETX
    done = read(local, run_id)
    assert done.headers["Runplane-Log-Complete"] == "true"
    assert done.headers["Runplane-Log-Source"] == "final"
    assert done.text == final.decode() + "\x03"


def test_reads_by_offset_and_limit_walk_the_log_and_mark_its_end(local: Local) -> None:
    # Given a finished plan
    ws = new_workspace(local, "offsets")
    run_id = local.client.create_run(ws, HELLO, kind="plan_only")["id"]
    local.client.watch(run_id, timeout=WAIT_SECONDS)
    whole = final_log(local, run_id)

    # When it is read 100 bytes at a time, each read from the last one's next offset
    pieces, offset, ends = [], 0, []
    while True:
        reply = read(local, run_id, offset=offset, limit=100)
        assert reply.status_code == 200
        body = reply.content
        ends.append(body.endswith(b"\x03"))
        pieces.append(body.removesuffix(b"\x03"))
        offset = int(reply.headers["Runplane-Log-Next-Offset"])
        if ends[-1]:
            break

    # Then the pieces are the log, and only the last read carries the end marker
    assert b"".join(pieces) == whole
    assert ends == [False] * (len(ends) - 1) + [True]
    assert offset == len(whole) == int(reply.headers["Runplane-Log-Length"])

    # And a read past the end has no text but the end marker; bad offsets and limits
    # are 422
    past = read(local, run_id, offset=len(whole) + 5)
    assert (past.status_code, past.text, past.headers["Runplane-Log-Complete"]) == (
        200,
        "\x03",
        "true",
    )
    for bad in ({"offset": "-1"}, {"offset": "x"}, {"limit": "0"}, {"limit": "99999999"}):
        refused = read(local, run_id, **bad)
        assert refused.status_code == 422, bad
        assert refused.json()["code"] == "INVALID_INPUT"


def test_another_organizations_live_log_is_404_and_users_cannot_send_chunks(
    local: Local, gated: Path
) -> None:
    # Given a plan held at the gate
    ws = new_workspace(local, "cross-org")
    run_id = local.client.create_run(ws, HELLO, kind="plan_only")["id"]
    eventually(lambda: b"waiting" in read(local, run_id).content, "the live log")

    # When another organization reads its live log, and a person posts a chunk
    _, other_token = local.other_organization(unique("live-other"))
    other = requests.get(
        f"{local.url}/api/v1/runs/{run_id}/logs/plan",
        headers={"Authorization": f"Bearer {other_token}"},
        timeout=30,
    )
    forged = requests.post(
        f"{local.url}/api/v1/runner/log-chunks",
        json={"sequence": 50, "offset": 0, "data": "aGVsbG8="},
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )
    gated.touch()

    # Then the other organization gets a 404 and the person a 403; nothing was stored
    assert (other.status_code, other.json()["code"]) == (404, "NOT_FOUND")
    assert (forged.status_code, forged.json()["code"]) == (403, "FORBIDDEN")
    assert local.client.watch(run_id, timeout=WAIT_SECONDS)["status"] == "succeeded"
    assert final_log(local, run_id).startswith(streamed(local, run_id))


@contextlib.contextmanager
def chunk_outage(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """While open, the gateway answers 503 to every live log chunk (counted)."""
    refused: list[int] = []
    original = Gateway.handle

    def handle(self: Gateway, method: str, target: str, *args: Any) -> dict[str, Any]:
        if target.startswith("/api/v1/runner/log-chunks"):
            refused.append(1)
            return {"statusCode": 503, "headers": {}, "body": '{"message": "unavailable"}'}
        return original(self, method, target, *args)

    monkeypatch.setattr(Gateway, "handle", handle)
    try:
        yield refused
    finally:
        monkeypatch.setattr(Gateway, "handle", original)


def test_an_outage_of_the_log_endpoint_still_yields_a_complete_final_log(
    local: Local, gated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a plan whose runner cannot deliver live chunks for a while
    ws = new_workspace(local, "outage")
    with chunk_outage(monkeypatch) as refused:
        run_id = local.client.create_run(ws, HELLO, kind="plan_only")["id"]
        # (the runner keeps retrying; the engine goes on and waits at the gate)
        eventually(lambda: len(refused) >= 3, "retried chunk sends")
        assert read(local, run_id).content == b""

    # When the endpoint is back and the plan finishes
    eventually(lambda: b"waiting at the gate" in read(local, run_id).content, "catching up")
    gated.touch()
    review = local.client.watch(run_id, timeout=WAIT_SECONDS)

    # Then the plan succeeded and its final log is complete and starts with the stream,
    # which caught up after the outage
    assert review["status"] == "succeeded"
    final = final_log(local, run_id)
    assert b"waiting at the gate" in final
    assert b"Plan: 1 to add" in final
    live_part = streamed(local, run_id)
    assert b"waiting at the gate" in live_part
    assert final.startswith(live_part)


def test_a_failed_plan_names_the_engines_errors_and_watch_streams_the_log(
    local: Local, tmp_path: Path, capsys: Capture
) -> None:
    # Given a configuration that refers to an undeclared variable
    broken = config(tmp_path, 'output "o" { value = var.missing }\n', name="broken")
    ws = new_workspace(local, "failed")
    run_id = local.client.create_run(ws, broken, kind="plan_only")["id"]

    # When it is watched with the CLI to its end
    capsys.readouterr()
    code = main(["run", "watch", run_id, "--timeout", "180", *connect(local)])
    out = capsys.readouterr().out

    # Then the watch streamed the plan's log and exits 1
    assert code == 1
    assert "==> Planning\n" in out
    assert "Error: Reference to undeclared input variable" in out

    # And the review names the engine's error lines, not only "engine plan failed"
    review = local.client.review(run_id)
    assert review["status"] == "plan_failed"
    failure = review["failure"]
    assert failure["phase"] == "plan"
    assert failure["reason"].startswith("engine plan failed:\n")
    assert "Error: Reference to undeclared input variable" in failure["reason"]
    assert 'on main.tf line 1, in output "o":' in failure["reason"]
    assert len(failure["reason"]) <= 2000
    assert "  failure    plan: engine plan failed:" in out
