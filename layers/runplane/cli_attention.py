"""``runplane attention``: what waits for a person across the organization's workspaces
(the dashboard's Attention page, as text)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]

# Each category, as the API names it and as the listing titles it.
SECTIONS = (
    ("awaiting_approval", "Awaiting approval (soonest deadline first)"),
    ("needs_recovery", "Needing recovery"),
    ("failed", "Failed (each workspace's latest, last 7 days)"),
    ("drift", "Drift"),
)


def _line(item: dict[str, Any]) -> str:
    if item.get("run_id") is None:
        return f"  {item['workspace_name']}  last drift check found drift"
    line = f"  {item['run_id']}  {item['workspace_name']}  {item['status']}"
    if item.get("deadline"):
        line += f"  deadline {item['deadline']} ({item['time_left']})"
    summary = item.get("plan_summary")
    if summary:
        line += (
            f"  +{summary.get('adds', 0)} ~{summary.get('changes', 0)}"
            f" -{summary.get('destroys', 0)}"
        )
    return line


def add_parser(commands: Any, add: Add, connect: Connect) -> None:
    def attention(args: argparse.Namespace) -> int:
        inbox = connect(args).attention()
        if args.json:
            print(json.dumps(inbox, indent=2, sort_keys=True))
            return 0
        if not inbox["count"]:
            print("nothing needs a person")
            return 0
        print(f"{inbox['count']} item(s) need a person")
        for key, title in SECTIONS:
            if inbox[key]:
                print(f"{title}:")
                for item in inbox[key]:
                    print(_line(item))
        return 0

    add(
        commands,
        "attention",
        "runs awaiting approval, needing recovery or failed, and drifted workspaces",
        attention,
    )
