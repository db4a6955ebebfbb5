"""``runplane varset ...``: organization variable sets (docs/runs.md, "Variable sets").

Sets are given by name or by ``varset-…`` ID, workspaces by name or ``ws-…`` ID.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from runplane.cli_variables import add_category, read_value, variable_line
from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]


def _applies(found: dict[str, Any]) -> str:
    workspaces = len(found.get("workspace_ids") or [])
    if found.get("global"):
        return "global" + (f" (and {workspaces} by name)" if workspaces else "")
    return f"{workspaces} workspace(s)"


def _line(found: dict[str, Any]) -> str:
    about = f"  # {found['description']}" if found.get("description") else ""
    return (
        f"{found['name']}  {found['id']}  {_applies(found)}  "
        f"{found['variable_count']} variable(s){about}"
    )


def _print(found: Any, as_json: bool, text: str) -> None:
    print(json.dumps(found, indent=2, sort_keys=True) if as_json else text)


def add_parser(commands: Any, add: Add, connect: Connect) -> None:
    varset = commands.add_parser(
        "varset",
        help="organization variable sets: variables applied to chosen workspaces, or all",
    )
    varset_commands = varset.add_subparsers(dest="varset_command", required=True)

    def creating(args: argparse.Namespace) -> int:
        created = connect(args).create_variable_set(
            args.name, description=args.description, global_=args.global_
        )
        _print(created, args.json, _line(created))
        return 0

    def listing(args: argparse.Namespace) -> int:
        found = connect(args).list_variable_sets()
        if args.json:
            _print(found, True, "")
        elif not found:
            print("no variable set")
        for each in [] if args.json else found:
            print(_line(each))
        return 0

    def showing(args: argparse.Namespace) -> int:
        client = connect(args)
        found = client.variable_set(client.variable_set_id(args.set))
        if args.json:
            _print(found, True, "")
            return 0
        print(_line(found))
        for workspace_id in found.get("workspace_ids") or []:
            print(f"  applied to {workspace_id}")
        for variable in found.get("variables") or []:
            print(f"  {variable_line(variable)}")
        return 0

    def deleting(args: argparse.Namespace) -> int:
        client = connect(args)
        deleted = client.delete_variable_set(client.variable_set_id(args.set))
        _print(deleted, args.json, f"{args.set} deleted")
        return 0

    def applying(args: argparse.Namespace) -> int:
        client = connect(args)
        set_id, workspace_id = client.variable_set_id(args.set), client.workspace_id(args.workspace)
        if args.varset_command == "apply":
            changed = client.apply_variable_set(set_id, workspace_id)
            text = f"{changed['name']} applied to {workspace_id}"
        else:
            changed = client.unapply_variable_set(set_id, workspace_id)
            text = f"{changed['name']} no longer applied to {workspace_id}"
        _print(changed, args.json, text)
        return 0

    made = add(varset_commands, "create", "create a variable set", creating)
    made.add_argument("name", help="the set's name, unique in the organization")
    made.add_argument(
        "--global",
        dest="global_",
        action="store_true",
        help="apply it to every workspace of the organization",
    )
    made.add_argument("--description", help="what the set is for")
    add(varset_commands, "list", "the organization's variable sets", listing)
    shown = add(
        varset_commands,
        "show",
        "a set, where it applies, its variables (never sensitive values)",
        showing,
    )
    shown.add_argument("set", help="the set's name or varset- ID")
    gone = add(varset_commands, "delete", "delete a set and its variables", deleting)
    gone.add_argument("set", help="the set's name or varset- ID")
    for name, what in (
        ("apply", "apply the set to a workspace"),
        ("unapply", "stop applying the set to a workspace by name"),
    ):
        command = add(varset_commands, name, what, applying)
        command.add_argument("set", help="the set's name or varset- ID")
        command.add_argument("--workspace", required=True, help="workspace name or ws- ID")
    _vars_parser(varset_commands, add, connect)


def _vars_parser(varset_commands: Any, add: Add, connect: Connect) -> None:
    vars_parser = varset_commands.add_parser("vars", help="a variable set's variables")
    commands = vars_parser.add_subparsers(dest="vars_command", required=True)

    def setting(args: argparse.Namespace) -> int:
        client = connect(args)
        value = read_value(args)
        stored = client.set_set_variable(
            client.variable_set_id(args.set),
            args.category,
            args.name,
            value,
            sensitive=args.sensitive,
            description=args.description,
        )
        _print(stored, args.json, variable_line(stored))
        return 0

    def deleting(args: argparse.Namespace) -> int:
        client = connect(args)
        deleted = client.delete_set_variable(
            client.variable_set_id(args.set), args.category, args.name
        )
        _print(deleted, args.json, f"{args.name} deleted")
        return 0

    made = add(commands, "set", "create or replace a set's variable", setting)
    made.add_argument("set", help="the set's name or varset- ID")
    made.add_argument("name", help="the variable's name")
    add_category(made)
    made.add_argument("--value", help="the value (default: read from stdin)")
    made.add_argument(
        "--sensitive", action="store_true", help="write-only: stored sealed, never shown again"
    )
    made.add_argument("--description", help="what the variable is for")
    gone = add(commands, "delete", "delete a set's variable", deleting)
    gone.add_argument("set", help="the set's name or varset- ID")
    gone.add_argument("name", help="the variable's name")
    add_category(gone)
