"""An ephemeral workspace end to end over real HTTP on the embedded stack: its
auto-destroy is set, postponed and re-set with the CLI; once due, the deployment's own
sweep schedule (delivered to the fire-schedule handler as EventBridge Scheduler would)
creates a destroy run, approves it because the workspace opted into auto-apply, and the
real engine destroys what it manages; the workspace then deletes without force."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runplane.domain.notifications import SIGNATURE_HEADER, verify
from runplane.store import auto_destroy as stored_auto_destroy
from tests.e2e.conftest import Local
from tests.e2e.test_cli import Capture, cli, cli_json, connect, workspace
from tests.e2e.test_github import eventually
from tests.e2e.test_run_options import applied, configuration, managed
from tests.unit.adapters.servers import Receiver

pytestmark = pytest.mark.e2e


def _sweep(local: Local) -> Any:
    """One delivery of the registered auto-destroy sweep, with its registered input."""
    from functions.scheduler.handler import fire

    services = local.stack.services
    assert services is not None
    [sweep] = [
        held
        for held in services.schedule_registry.registered()
        if held["Name"] == "auto-destroy-sweep"
    ]
    assert sweep["ScheduleExpression"] == "rate(5 minutes)"
    return fire(json.loads(sweep["Target"]["Input"]), None)


def _show(local: Local, capsys: Capture, name: str) -> dict[str, Any]:
    return dict(cli_json(capsys, "workspace", "auto-destroy", name, *connect(local)))


def test_an_ephemeral_workspace_destroys_itself_when_due(
    local: Local, capsys: Capture, tmp_path: Path
) -> None:
    # Given a workspace whose applied run created test_thing.a
    ws_id, name = workspace(local, capsys, "ephemeral")
    applied(local, capsys, ws_id, configuration(tmp_path, "a"))
    assert managed(local, ws_id) == ["test_thing.a"]

    # When its auto-destroy is set for tomorrow and postponed by a day with the CLI
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    set_view = cli_json(
        capsys, "workspace", "auto-destroy", name, "set", "--at", tomorrow.isoformat(),
        *connect(local),
    )  # fmt: skip
    moved = cli_json(
        capsys, "workspace", "auto-destroy", name, "postpone", "--by", "24h", *connect(local)
    )

    # Then it is due a day later, and a sweep now does nothing to it
    assert set_view["due_at"] == tomorrow.isoformat()
    assert moved["due_at"] == (tomorrow + timedelta(days=1)).isoformat()
    code, text, _ = cli(capsys, "workspace", "auto-destroy", name, *connect(local))
    assert code == 0
    assert f"postponed to      {moved['due_at']}" in text
    _sweep(local)
    assert _show(local, capsys, name)["active_run_id"] is None
    code, shown, _ = cli(capsys, "workspace", "show", name, *connect(local))
    assert f"  auto-destroy     due {moved['due_at']} (a person approves)\n" in shown

    # When a webhook subscribes to the notices and it is set due in 30 minutes
    receiver = Receiver()
    try:
        created = cli_json(
            capsys, "workspace", "notify", name, "create", "--destination-url",
            receiver.url(), "--events", "auto_destroy_scheduled", *connect(local),
        )  # fmt: skip
        half_hour = (datetime.now(UTC) + timedelta(minutes=30)).replace(microsecond=0)
        cli_json(
            capsys, "workspace", "auto-destroy", name, "set", "--at", half_hour.isoformat(),
            *connect(local),
        )  # fmt: skip
        _sweep(local)

        # Then one signed 1 h notice of no run reaches it, saying when and how to postpone
        eventually(lambda: receiver.requests, what="the auto-destroy notice")
        [(_, headers, body)] = receiver.requests
        assert verify(created["signing_secret"].encode(), body, headers[SIGNATURE_HEADER])
        notice = json.loads(body)
        assert (notice["event"], notice["run"], notice["workspace"]["id"]) == (
            "auto_destroy_scheduled",
            None,
            ws_id,
        )
        assert notice["details"]["destroy_at"] == half_hour.isoformat()
        assert notice["details"]["notice"] == "1h"
        assert notice["details"]["postpone"] == (
            f"runplane workspace auto-destroy {name} postpone --by 24h"
        )
    finally:
        receiver.close()

    # When it is set again, due in two seconds, with auto-apply, and the sweep runs
    soon = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    cli_json(
        capsys, "workspace", "auto-destroy", name, "set", "--at", soon.isoformat(),
        "--auto-apply", "yes", *connect(local),
    )  # fmt: skip
    time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 0.5)
    _sweep(local)

    # Then a destroy run exists, made by the auto-destroy
    run_id = _show(local, capsys, name)["active_run_id"]
    assert run_id is not None
    run = cli_json(capsys, "run", "show", run_id, *connect(local))
    assert run["input"]["options"]["destroy"] is True
    assert run["created_by"] == f"system:auto-destroy:{ws_id}"
    assert run["auto_destroy"] == {
        "due_at": soon.isoformat(),
        "attempt": 1,
        "auto_apply": True,
        "set_by": run["auto_destroy"]["set_by"],
    }

    code, text, _ = cli(capsys, "run", "show", run_id, *connect(local))
    assert "  DESTROY    this run destroys every resource it plans for" in text
    assert f"  auto-destroy  due {soon.isoformat()}, attempt 1, applies by itself" in text

    # When its plan waits for approval and the sweep runs again
    waiting = cli_json(
        capsys, "run", "watch", run_id, "--until", "awaiting_approval", *connect(local)
    )
    assert waiting["status"] == "awaiting_approval", waiting
    _sweep(local)

    # Then the auto-destroy approved it and the real engine destroyed the resource
    cli(capsys, "run", "watch", run_id, "--timeout", "180", *connect(local))
    ended = cli_json(capsys, "run", "show", run_id, *connect(local))
    assert ended["status"] == "succeeded", (ended["status"], ended.get("status_reason"))
    assert ended["approval"]["decided_by"] == f"system:auto-destroy:{ws_id}"
    assert managed(local, ws_id) == []

    # When the sweep runs once more, then the auto-destroy records it as done
    _sweep(local)
    view = _show(local, capsys, name)
    assert (view["last_outcome"], view["last_run_id"], view["due_at"]) == (
        "destroyed",
        run_id,
        None,
    )

    # And the emptied workspace deletes without force, its auto-destroy with it
    deleted = cli_json(capsys, "workspace", "delete", name, "--yes", *connect(local))
    assert (deleted["id"], deleted["forced"], deleted["resources"]) == (ws_id, False, 0)
    assert stored_auto_destroy.get(ws_id) is None
