"""``runplane workspace delete WORKSPACE [--force --reason TEXT] [--yes]``: delete a
workspace (docs/runs.md, "Deleting a workspace").

Refused while a run or a lock uses the workspace, and while its current state still
manages resources unless ``--force`` with a ``--reason`` (audited). Unless ``--yes``,
the workspace's name must be typed to confirm.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from runplane.cli_input import InputError
from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]


def _confirmed(name: str) -> bool:
    """Whether the person typed the workspace's name (the prompt goes to stderr)."""
    print(f"type the workspace's name ({name}) to delete it: ", end="", file=sys.stderr)
    sys.stderr.flush()
    typed = sys.stdin.readline().strip()
    if not sys.stdin.isatty():
        print(file=sys.stderr)  # a terminal echoed the typed line's end; a pipe did not
    return typed == name


def add_parser(workspace_commands: Any, add: Add, connect: Connect) -> None:
    def delete(args: argparse.Namespace) -> int:
        if args.force and not args.reason:
            raise InputError("--force needs --reason TEXT: a forced deletion is audited")
        client = connect(args)
        workspace_id = client.workspace_id(args.workspace)
        if not args.yes:
            name = str(client.workspace(workspace_id)["name"])
            if not _confirmed(name):
                raise InputError(f"not deleted: the name typed was not {name!r} (or pass --yes)")
        body: dict[str, Any] = {"force": bool(args.force)}
        if args.reason is not None:
            body["reason"] = args.reason
        deleted = client.delete_workspace(workspace_id, body)
        if args.json:
            print(json.dumps(deleted, indent=2, sort_keys=True))
        else:
            left = (
                f", {deleted['resources']} resource(s) left unmanaged" if deleted["forced"] else ""
            )
            print(f"{deleted['id']}  {deleted['name']}  deleted{left}")
        return 0

    command = add(
        workspace_commands,
        "delete",
        "delete a workspace: refused while a run or a lock uses it, or while its state "
        "manages resources (destroy them first, or --force --reason); its name is freed, "
        "its runs, state versions and audit are kept",
        delete,
    )
    command.add_argument("workspace", help="workspace name or ws- ID")
    command.add_argument(
        "--force",
        action="store_true",
        help="delete even though its current state manages resources (left unmanaged); "
        "never while a run or a lock uses it",
    )
    command.add_argument("--reason", metavar="TEXT", help="why (needed with --force; audited)")
    command.add_argument(
        "--yes", action="store_true", help="do not ask for the workspace's name to confirm"
    )
