"""``runplane run plan RUN``: the run's plan as a person reads it (the dashboard's plan
view, from ``GET /api/v1/runs/{id}/plan``): the counts, each resource change with its
attribute diff, the output changes and the drift the plan found."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]

SYMBOLS = {
    "create": "+",
    "update": "~",
    "replace": "-/+",
    "destroy": "-",
    "read": "<=",
    "other": "?",
}
COUNTED = ("create", "update", "replace", "destroy", "read", "other")


def _side(shown: dict[str, str] | None) -> str:
    return "(none)" if shown is None else shown["text"]


def _change_lines(change: dict[str, Any]) -> list[str]:
    action = change["action"]
    head = f"{SYMBOLS.get(action, '?'):>3} {action} {change['address']}"
    if change.get("deposed"):
        head += f" (deposed {change['deposed']})"
    if change.get("reason"):
        head += f": {change['reason']}"
    lines = [head]
    for row in change["attributes"]:
        before, after = row["before"], row["after"]
        if before is not None and after is not None:
            value = f"{_side(before)} -> {_side(after)}"
        else:
            value = _side(after if after is not None else before)
        forced = "  # forces replacement" if row["forces_replacement"] else ""
        lines.append(f"      {row['path']} = {value}{forced}")
    if change["attributes_more"]:
        lines.append(f"      … {change['attributes_more']} more attribute(s)")
    return lines


def plan_text(body: dict[str, Any]) -> str:
    """The reply of ``GET /runs/{id}/plan`` as lines of text."""
    if body["state"] != "shown":
        return str(body.get("message") or body["state"])
    view = body["view"]
    counts = view["counts"]
    tally = ", ".join(
        f"{SYMBOLS[action]}{counts[action]} to {action}" for action in COUNTED if counts.get(action)
    )
    page = view["page"]
    lines = [
        f"Plan of {body['run_id']}: {tally or 'no changes'}"
        f" ({counts.get('no-op', 0)} unchanged; page {page['number']} of {page['pages']})"
    ]
    for change in view["resource_changes"]:
        lines += _change_lines(change)
    if view["output_changes"]:
        lines.append("Outputs:")
        for output in view["output_changes"]:
            lines += _change_lines({**output, "address": output["name"], "reason": None})
    if view["resource_drift"]:
        lines.append("Changed outside Runplane (drift found while planning):")
        for change in view["resource_drift"]:
            lines += _change_lines(change)
    if page["number"] < page["pages"]:
        lines.append(f"More: --page {page['number'] + 1}")
    return "\n".join(lines)


def add_parser(run_commands: Any, add: Add, connect: Connect) -> None:
    def plan(args: argparse.Namespace) -> int:
        body = connect(args).run_plan(args.run, args.page)
        print(json.dumps(body, indent=2, sort_keys=True) if args.json else plan_text(body))
        return 0

    command = add(run_commands, "plan", "the run's plan: each change and its diff", plan)
    command.add_argument("run", help="the run ID (run-...)")
    command.add_argument(
        "--page", type=int, default=1, help="100 resource changes a page (%(default)s)"
    )
