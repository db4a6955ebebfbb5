"""``runplane github ...``: the GitHub App installations the organization holds.

Connecting one is a browser flow (the dashboard's GitHub page): GitHub must see an
owner of the installation's account sign in, which no command line can prove.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]


def _line(held: dict[str, Any]) -> str:
    return (
        f"{held['installation_id']}  {held['account']} ({held['account_type']})  "
        f"confirmed by {held['verified_github_user']}  {held['bindings']} binding(s)"
    )


def _ingestion_line(found: dict[str, Any]) -> str:
    what = (
        found["event"]
        if found["pull_request"] is None
        else f"pull request #{found['pull_request']}"
    )
    return (
        f"{found['id']}  {found['status']}  {what} {found['repository']}@"
        f"{found['commit_sha'][:12]} ({found['branch']})"
    )


def _decision_line(decided: dict[str, Any]) -> str:
    fallback = f", fallback {decided['fallback']}" if decided.get("fallback") else ""
    return (
        f"  {decided['workspace_id']}  {decided['decision']}: {decided['reason']} "
        f"({decided['files_matched']} of {decided['files_considered']} files{fallback})"
    )


def add_parser(commands: Any, add: Add, connect: Connect) -> None:
    github = commands.add_parser(
        "github", help="GitHub App installations (connect them on the dashboard's GitHub page)"
    )
    github_commands = github.add_subparsers(dest="github_command", required=True)

    def listing(args: argparse.Namespace) -> int:
        found = connect(args).github_installations()
        if args.json:
            print(json.dumps(found, indent=2, sort_keys=True))
        elif not found:
            print(
                "no GitHub App installation is connected: an admin connects one on the "
                "dashboard's GitHub page (/ui/github)"
            )
        for held in [] if args.json else found:
            print(_line(held))
        return 0

    def release(args: argparse.Namespace) -> int:
        released = connect(args).release_github_installation(args.installation_id)
        print(json.dumps(released) if args.json else f"{args.installation_id} released")
        return 0

    def ingestion(args: argparse.Namespace) -> int:
        found = connect(args).github_ingestion(args.source_id)
        if args.json:
            print(json.dumps(found, indent=2, sort_keys=True))
            return 0
        print(_ingestion_line(found))
        if found.get("reason"):
            print(f"  {found['reason']}")
        for target in found["targets"]:
            made = target["run_id"] or f"no run ({target['error']})"
            print(f"  {target['workspace_id']}  {made}")
        for decided in found["path_filters"]:
            print(_decision_line(decided))
        return 0

    shown = add(
        github_commands,
        "ingestion",
        "what a delivery's source ingestion did: runs, and path filters' decisions",
        ingestion,
    )
    shown.add_argument("source_id", help="the ingestion's ID (src-...), as the webhook answered")
    add(github_commands, "installations", "the installations this organization holds", listing)
    gone = add(
        github_commands, "release", "release an installation no workspace is bound with", release
    )
    gone.add_argument("installation_id", type=int, help="the installation's number")
