"""Schedules end to end: the embedded stack's scheduler fires a registered schedule
through the fire-schedule handler, the real engine plans, and drift shows on the
workspace until an apply clears it."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from runplane.store.run_reader import DynamoRunReader
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cli import Capture, cli, cli_json, connect

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello"


def _changed_hello(tmp_path: Path) -> Path:
    directory = tmp_path / "changed"
    directory.mkdir(parents=True)
    text = (HELLO / "main.tf").read_text(encoding="utf-8")
    (directory / "main.tf").write_text(text.replace('"hello"', '"good morning"'), "utf-8")
    return directory


def _fire(local: Local, at: datetime, workspace_id: str) -> str:
    """Step the scheduler to ``at``; the one run the due fire created in the workspace
    (the stack is shared: other tests' schedules may be due at the same time)."""
    scheduler = local.stack.scheduler
    assert scheduler is not None
    assert local.stack.services is not None
    runs = DynamoRunReader(local.stack.services.run_records)
    fired = scheduler.fire_due(at)
    created = [
        result
        for result in fired
        if result.get("outcome") == "created"
        and runs.get_run(str(result["run_id"])).workspace_id == workspace_id
    ]
    assert len(created) == 1, fired
    return str(created[0]["run_id"])


def test_a_scheduled_plan_records_drift_and_a_remediation_clears_it(
    local: Local, tmp_path: Path, capsys: Capture
) -> None:
    client = local.client
    # Given a workspace whose configuration was applied, and a daily schedule on it
    ws = str(client.create_workspace(unique("sched"))["id"])
    applied = client.create_run(ws, HELLO)
    client.watch(applied["id"], until=["awaiting_approval"], timeout=120)
    client.decide(applied["id"], "approve")
    assert client.watch(applied["id"], timeout=120)["status"] == "succeeded"
    schedule = client.create_schedule(ws, "0 3 * * *")
    assert (schedule["state"], schedule["aws_expression"]) == ("active", "cron(0 3 * * ? *)")
    first_fire = datetime.fromisoformat(schedule["next_fire_at"]) + timedelta(seconds=30)

    # When the schedule fires with nothing changed
    quiet = client.watch(_fire(local, first_fire, ws), timeout=120)

    # Then a plan-only run planned no changes, and the workspace shows no drift
    assert (quiet["kind"], quiet["status"], quiet["plan"]["has_changes"]) == (
        "plan_only",
        "succeeded",
        False,
    )
    assert quiet["created_by"] == f"schedule:{schedule['id']}"
    assert client.workspace(ws)["drift"]["drifted"] is False

    # When the configuration changes behind the last apply and the schedule fires again
    client.upload_configuration(ws, _changed_hello(tmp_path))
    drifted = client.watch(_fire(local, first_fire + timedelta(days=1), ws), timeout=120)

    # Then the real plan has changes, and drift is on the workspace and the run review
    assert (drifted["status"], drifted["plan"]["has_changes"]) == ("succeeded", True)
    assert drifted["drift"] == {"detected": True}
    assert drifted["schedule"]["schedule_id"] == schedule["id"]
    drift = client.workspace(ws)["drift"]
    assert (drift["drifted"], drift["run_id"], drift["schedule_id"]) == (
        True,
        drifted["id"],
        schedule["id"],
    )
    assert drift["summary"] == {"adds": 0, "changes": 1, "destroys": 0, "replaces": 0, "drifted": 0}

    # When the drift is accepted with the CLI: a refresh-only run, whose plan would
    # write the configuration's new output into the state and change no resource
    accepted = cli_json(
        capsys, "workspace", "drift", "remediate", ws, "--remedy", "accept", *connect(local)
    )
    accepting = client.watch(accepted["id"], until=["awaiting_approval"], timeout=120)

    # Then it is an ordinary plan-and-apply run, refresh-only, naming the drift, that
    # waits for approval like any other; rejected, it leaves the drift as it was
    assert (accepting["kind"], accepting["status"]) == ("plan_and_apply", "awaiting_approval")
    assert accepting["input"]["options"]["refresh_only"] is True
    assert accepting["remediation"] == {"remedy": "accept", "drift_run_id": drifted["id"]}
    summary = accepting["plan"]["summary"]
    assert (summary["adds"], summary["changes"], summary["destroys"]) == (0, 0, 0)
    client.decide(accepted["id"], "reject")
    assert client.workspace(ws)["drift"]["drifted"] is True

    # When it is reconciled instead: the changed configuration is planned and, once
    # approved, applied
    fix = cli_json(
        capsys, "workspace", "drift", "remediate", ws, "--remedy", "reconcile", *connect(local)
    )
    waiting = client.watch(fix["id"], until=["awaiting_approval"], timeout=120)
    assert waiting["plan"]["summary"]["changes"] == 1
    assert waiting["input"]["options"]["refresh_only"] is False
    client.decide(fix["id"], "approve")
    assert client.watch(fix["id"], timeout=120)["status"] == "succeeded"

    # Then the drift is cleared by that apply
    cleared = client.workspace(ws)["drift"]
    assert (cleared["drifted"], cleared["run_id"], cleared["cleared_by"]) == (
        False,
        fix["id"],
        "apply",
    )


def test_the_cli_creates_lists_pauses_and_deletes_schedules(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a workspace
    name = unique("sched-cli")
    cli_json(capsys, "workspace", "create", name, *connect(local))

    # When a schedule is created, listed and paused through the CLI
    made = cli_json(
        capsys, "workspace", "schedule", "create", name, "rate(6 hours)", *connect(local)
    )
    listed = cli_json(capsys, "workspace", "schedule", "list", name, *connect(local))
    paused = cli_json(capsys, "workspace", "schedule", "pause", made["id"], *connect(local))

    # Then the API holds it, paused, with no next fire
    assert [s["id"] for s in listed] == [made["id"]]
    assert (paused["state"], paused["next_fire_at"]) == ("paused", None)

    # When a too-frequent schedule is asked for, Then the API refuses it (exit 2)
    code, _, err = cli(
        capsys, "workspace", "schedule", "create", name, "*/5 * * * *", *connect(local)
    )
    assert code == 2
    assert "at most every 15 minutes" in err

    # When it is deleted, Then the workspace has no schedules
    cli_json(capsys, "workspace", "schedule", "delete", made["id"], *connect(local))
    assert cli_json(capsys, "workspace", "schedule", "list", name, *connect(local)) == []


def test_a_refresh_only_schedule_runs_the_engine_with_refresh_only(local: Local) -> None:
    client = local.client
    # Given an applied workspace with a refresh-only schedule
    ws = str(client.create_workspace(unique("sched-refresh"))["id"])
    applied = client.create_run(ws, HELLO)
    client.watch(applied["id"], until=["awaiting_approval"], timeout=120)
    client.decide(applied["id"], "approve")
    assert client.watch(applied["id"], timeout=120)["status"] == "succeeded"
    schedule = client.create_schedule(ws, "rate(1 day)", kind="refresh_only")

    # When it fires
    at = datetime.fromisoformat(schedule["next_fire_at"]) + timedelta(seconds=30)
    done = client.watch(_fire(local, at, ws), timeout=120)

    # Then the real engine planned -refresh-only: the run is refresh_only, the runner
    # reported the drifted count, nothing drifted, and the workspace shows no drift
    assert (done["kind"], done["status"], done["label"]) == (
        "refresh_only",
        "succeeded",
        "Plan completed",
    )
    assert done["plan"]["summary"]["drifted"] == 0
    assert done["plan"]["has_changes"] is False
    assert done["apply"] is None
    drift = client.workspace(ws)["drift"]
    assert (drift["drifted"], drift["run_id"]) == (False, done["id"])
