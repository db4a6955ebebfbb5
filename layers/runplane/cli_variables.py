"""``runplane workspace vars ...``: list, set and delete a workspace's variables
(Terraform variables, or environment variables of the engine with ``--category env``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from runplane.cli_input import InputError
from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
CATEGORIES = ("terraform", "env")
Add = Callable[..., argparse.ArgumentParser]


def read_value(args: argparse.Namespace) -> str:
    """--value, else stdin (so a secret stays out of the shell's history and `ps`)."""
    if args.value is not None:
        return str(args.value)
    if sys.stdin.isatty():
        raise InputError("pass --value, or the value on stdin (for secrets)")
    # One trailing newline is the shell's (echo, a here-string), not the value's.
    text = sys.stdin.read()
    return text[:-1] if text.endswith("\n") else text


def variable_line(variable: dict[str, Any]) -> str:
    """``name = "value"``, ``(sensitive)`` in place of a sensitive value; an environment
    variable's line starts with ``env``."""
    shown = "(sensitive)" if variable["sensitive"] else json.dumps(variable["value"])
    about = f"  # {variable['description']}" if variable.get("description") else ""
    kind = "env " if variable.get("category") == "env" else ""
    return f"{kind}{variable['name']} = {shown}{about}"


def add_category(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--category",
        choices=CATEGORIES,
        default="terraform",
        help="terraform: a Terraform variable (default); env: an environment variable of "
        "the engine's process",
    )


def add_parser(workspace_commands: Any, add: Add, connect: Connect) -> None:
    vars_parser = workspace_commands.add_parser(
        "vars",
        help="a workspace's variables: Terraform and environment variables (every run gets them)",
    )
    commands = vars_parser.add_subparsers(dest="vars_command", required=True)

    def listing(args: argparse.Namespace) -> int:
        client = connect(args)
        found = client.list_variables(client.workspace_id(args.workspace))
        if args.json:
            print(json.dumps(found, indent=2, sort_keys=True))
        for variable in [] if args.json else found:
            print(variable_line(variable))
        return 0

    def setting(args: argparse.Namespace) -> int:
        client = connect(args)
        value = read_value(args)
        stored = client.set_variable(
            client.workspace_id(args.workspace),
            args.name,
            value,
            sensitive=args.sensitive,
            description=args.description,
            category=args.category,
        )
        print(json.dumps(stored, indent=2, sort_keys=True) if args.json else variable_line(stored))
        return 0

    def deleting(args: argparse.Namespace) -> int:
        client = connect(args)
        deleted = client.delete_variable(
            client.workspace_id(args.workspace), args.name, args.category
        )
        print(json.dumps(deleted) if args.json else f"{args.name} deleted")
        return 0

    listed = add(commands, "list", "the workspace's variables (never sensitive values)", listing)
    listed.add_argument("workspace", help="workspace name or ws- ID")
    made = add(commands, "set", "create or replace a variable", setting)
    made.add_argument("workspace", help="workspace name or ws- ID")
    made.add_argument(
        "name",
        help="the variable's name (as in the configuration; an environment variable's "
        "as the engine's process sees it)",
    )
    add_category(made)
    made.add_argument("--value", help="the value (default: read from stdin)")
    made.add_argument(
        "--sensitive",
        action="store_true",
        help="write-only: stored sealed, never shown again",
    )
    made.add_argument("--description", help="what the variable is for")
    gone = add(commands, "delete", "delete a variable", deleting)
    gone.add_argument("workspace", help="workspace name or ws- ID")
    gone.add_argument("name", help="the variable's name")
    add_category(gone)
