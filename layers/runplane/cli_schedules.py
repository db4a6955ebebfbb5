"""``runplane workspace schedule ...``: create, list, show, pause, resume, delete; and
``runplane workspace drift show|remediate``: the drift schedules find, and its remedy."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]


def _print(schedule: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(schedule, indent=2, sort_keys=True))
        return
    print(f"{schedule['id']}  {schedule['expression']}  {schedule['kind']}  {schedule['state']}")
    print(f"  next fire     {schedule.get('next_fire_at') or '-'}")
    last = f"{schedule.get('last_fire_at') or '-'} ({schedule.get('last_outcome') or '-'})"
    print(f"  last fire     {last}")
    print(f"  active run    {schedule.get('active_run_id') or '-'}")
    for fire in schedule.get("fires", []):
        what = fire["run_id"] or fire["reason"]
        print(f"  {fire['scheduled_at']}  {fire['outcome']:8}  {what}")


def drift_line(drift: dict[str, Any] | None) -> str:
    """How ``workspace show`` reports drift."""
    if drift is None:
        return "not checked (no scheduled plan yet)"
    if not drift["drifted"]:
        return f"none (checked by {drift['run_id']})"
    counts = drift.get("summary") or {}
    changes = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("adds", "changes", "destroys"))
    return f"DRIFTED since {drift['detected_at']} ({changes}; run {drift['run_id']})"


def add_parser(workspace_commands: Any, add: Add, connect: Connect) -> None:
    schedule = workspace_commands.add_parser("schedule", help="a workspace's schedules")
    commands = schedule.add_subparsers(dest="schedule_command", required=True)

    def create(args: argparse.Namespace) -> int:
        made = connect(args).create_schedule(args.workspace, args.expression, args.kind)
        _print(made, args.json)
        return 0

    def listing(args: argparse.Namespace) -> int:
        found = connect(args).list_schedules(args.workspace)
        if args.json:
            print(json.dumps(found, indent=2, sort_keys=True))
        for one in [] if args.json else found:
            _print(one, False)
        return 0

    def show(args: argparse.Namespace) -> int:
        _print(connect(args).schedule(args.schedule), args.json)
        return 0

    def pause(args: argparse.Namespace) -> int:
        _print(connect(args).pause_schedule(args.schedule, not args.resume), args.json)
        return 0

    def delete(args: argparse.Namespace) -> int:
        deleted = connect(args).delete_schedule(args.schedule)
        print(json.dumps(deleted) if args.json else f"{deleted['id']} deleted")
        return 0

    made = add(commands, "create", "schedule plan-only runs of a workspace", create)
    made.add_argument("workspace", help="workspace name or ws- ID")
    made.add_argument(
        "expression",
        help="cron in UTC ('0 3 * * 1-5') or rate(N minutes|hours|days); at most every 15 min",
    )
    made.add_argument(
        "--kind",
        default="plan_only",
        choices=["plan_only", "refresh_only"],
        help="plan_only (default): a full plan; refresh_only: plan -refresh-only",
    )
    listed = add(commands, "list", "a workspace's schedules", listing)
    listed.add_argument("workspace", help="workspace name or ws- ID")
    shown = add(commands, "show", "a schedule and its latest fires", show)
    shown.add_argument("schedule", help="the schedule ID (sch-...)")
    paused = add(commands, "pause", "stop a schedule firing (--resume: start again)", pause)
    paused.add_argument("schedule", help="the schedule ID (sch-...)")
    paused.add_argument("--resume", action="store_true", help="resume a paused schedule")
    gone = add(commands, "delete", "delete a schedule", delete)
    gone.add_argument("schedule", help="the schedule ID (sch-...)")
    _add_drift_parser(workspace_commands, add, connect)


def _add_drift_parser(workspace_commands: Any, add: Add, connect: Connect) -> None:
    drift = workspace_commands.add_parser("drift", help="a workspace's drift and its remedy")
    commands = drift.add_subparsers(dest="drift_command", required=True)

    def show(args: argparse.Namespace) -> int:
        client = connect(args)
        found = client.workspace(client.workspace_id(args.workspace)).get("drift")
        print(json.dumps(found, indent=2, sort_keys=True) if args.json else drift_line(found))
        return 0

    def remediate(args: argparse.Namespace) -> int:
        review = connect(args).remediate_drift(args.workspace, args.remedy)
        print(json.dumps(review, indent=2, sort_keys=True) if args.json else review["id"])
        return 0

    shown = add(commands, "show", "what the last scheduled check found", show)
    shown.add_argument("workspace", help="workspace name or ws- ID")
    fixed = add(
        commands, "remediate", "start a run that resolves the drift (with approval)", remediate
    )
    fixed.add_argument("workspace", help="workspace name or ws- ID")
    fixed.add_argument(
        "--remedy",
        required=True,
        choices=["reconcile", "accept"],
        help="reconcile: plan and apply the configuration over the drift; accept: apply a "
        "refresh-only plan that takes the real world into the state",
    )
