"""``runplane workspace auto-destroy WORKSPACE [show|set|postpone|clear]``: an ephemeral
workspace's destroy at a time or after inactivity (docs/auto-destroy.md).

``set`` arms it with exactly what its flags say (``--at``, ``--after-inactivity``,
``--auto-apply``); ``postpone`` moves it later (``--until TIME`` or ``--by LENGTH``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from runplane.cli_input import InputError
from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]
_SET_FLAGS = ("at", "after_inactivity", "auto_apply")
_POSTPONE_FLAGS = ("until", "by")


def line(view: dict[str, Any]) -> str:
    """The auto-destroy in one line (``workspace show``)."""
    if not view.get("armed"):
        return "not set"
    if view.get("active_run_id"):
        return f"under way: destroy run {view['active_run_id']}"
    if not view.get("due_at"):
        return f"destroyed at {view.get('destroyed_at')}"
    how = "applies by itself" if view.get("auto_apply") else "a person approves"
    return f"due {view['due_at']} ({how})"


def render(view: dict[str, Any]) -> str:
    """The auto-destroy as a person reads it."""
    if not view.get("armed"):
        return f"{view['workspace_id']}  auto-destroy  not set"
    lines = [f"{view['workspace_id']}  auto-destroy  version {view['version']}"]
    if view.get("destroy_at"):
        lines.append(f"  destroy at        {view['destroy_at']}")
    if view.get("destroy_after_inactivity"):
        lines.append(
            f"  after inactivity  {view['destroy_after_inactivity']} without a state change"
        )
    approval = "none: it applies by itself" if view.get("auto_apply") else "a person approves"
    lines.append(f"  approval          {approval}")
    lines.append(f"  due               {view.get('due_at') or 'nothing due (destroyed)'}")
    if view.get("postponed_until"):
        lines.append(f"  postponed to      {view['postponed_until']} by {view['postponed_by']}")
    if view.get("active_run_id"):
        lines.append(f"  destroy run       {view['active_run_id']} (under way)")
    if view.get("last_outcome"):
        outcome = f"{view['last_outcome']} ({view.get('last_run_id') or 'no run'})"
        lines.append(f"  last outcome      {outcome}")
    if view.get("last_reason"):
        lines.append(f"  reason            {view['last_reason']}")
    if view.get("next_attempt_at"):
        lines.append(f"  next attempt      {view['next_attempt_at']}")
    lines.append(f"  set               {view['set_at']} by {view['set_by']}")
    return "\n".join(lines)


def _refuse_stray(action: str, args: argparse.Namespace) -> None:
    allowed = {"set": _SET_FLAGS, "postpone": _POSTPONE_FLAGS}.get(action, ())
    for flag in (*_SET_FLAGS, *_POSTPONE_FLAGS):
        if getattr(args, flag) is not None and flag not in allowed:
            owner = "set" if flag in _SET_FLAGS else "postpone"
            name = "--" + flag.replace("_", "-")
            raise InputError(f"{name} is for `runplane workspace auto-destroy WORKSPACE {owner}`")


def add_parser(workspace_commands: Any, add: Add, connect: Connect) -> None:
    def auto_destroy(args: argparse.Namespace) -> int:
        action = args.action or "show"
        _refuse_stray(action, args)
        if action == "set" and args.at is None and args.after_inactivity is None:
            raise InputError("set: pass --at TIME, --after-inactivity LENGTH or both")
        if action == "postpone" and (args.until is None) == (args.by is None):
            raise InputError("postpone: pass --until TIME or --by LENGTH")
        client = connect(args)
        workspace_id = client.workspace_id(args.workspace)
        if action == "show":
            view = client.auto_destroy(workspace_id)
        elif action == "clear":
            view = client.clear_auto_destroy(workspace_id)
        elif action == "postpone":
            body = {"until": args.until} if args.until is not None else {"by": args.by}
            view = client.postpone_auto_destroy(workspace_id, body)
        else:
            view = client.set_auto_destroy(
                workspace_id,
                {
                    "destroy_at": args.at,
                    "destroy_after_inactivity": args.after_inactivity,
                    "auto_apply": args.auto_apply == "yes",
                },
            )
        print(json.dumps(view, indent=2, sort_keys=True) if args.json else render(view))
        return 0

    command = add(
        workspace_commands,
        "auto-destroy",
        "show, set, postpone or clear the workspace's auto-destroy: a destroy run at a "
        "time or after inactivity, notified 24 h and 1 h before (docs/auto-destroy.md)",
        auto_destroy,
    )
    command.add_argument("workspace", help="workspace name or ws- ID")
    command.add_argument(
        "action",
        nargs="?",
        choices=("show", "set", "postpone", "clear"),
        help="show (the default); set: arm it as the flags say; postpone: move it later; "
        "clear: disarm it",
    )
    command.add_argument(
        "--at", metavar="TIME", help="set: destroy at this time (ISO 8601, as 2026-12-24T18:00Z)"
    )
    command.add_argument(
        "--after-inactivity",
        metavar="LENGTH",
        help="set: destroy after this long without a state change (90m, 36h, 7d; 1h to 365d)",
    )
    command.add_argument(
        "--auto-apply",
        choices=("yes", "no"),
        help="set: yes: the destroy run applies without a person's approval (default no)",
    )
    command.add_argument("--until", metavar="TIME", help="postpone: to this time (ISO 8601)")
    command.add_argument(
        "--by", metavar="LENGTH", help="postpone: this long after it is due now (90m, 36h, 7d)"
    )
