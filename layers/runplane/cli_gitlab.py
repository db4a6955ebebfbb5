"""``runplane workspace gitlab NAME ...``: show, bind or unbind a workspace's GitLab project.

The project access token is read from stdin, never from an option, so it stays out of
the shell's history and the process list; the webhook token the binding answers is
printed once (only its digest is kept).
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


def _read_access_token() -> str:
    if sys.stdin.isatty():
        raise InputError("pass the project access token on stdin, e.g. < token-file")
    # One trailing newline is the shell's (echo, a here-string), not the token's.
    text = sys.stdin.read()
    return text[:-1] if text.endswith("\n") else text


def _print_binding(binding: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(binding, indent=2, sort_keys=True))
        return
    print(f"{binding['workspace_id']}  gitlab {binding['base_url']} {binding['project']}")
    print(f"  branch             {binding['branch']}")
    print(f"  working directory  {binding['working_directory'] or '.'}")
    print(f"  push run kind      {binding['push_run_kind']}")
    for pattern in binding.get("trigger_patterns") or []:
        print(f"  trigger pattern    {pattern}")
    for pattern in binding.get("ignore_patterns") or []:
        print(f"  ignore pattern     {pattern}")
    if binding.get("webhook_token"):
        print(f"  webhook token      {binding['webhook_token']}")
        print("  (shown once: set it as the project webhook's secret token now)")


def add_workspace_parser(commands: Any, add: Add, connect: Connect) -> None:
    def handle(args: argparse.Namespace) -> int:
        client = connect(args)
        workspace_id = client.workspace_id(args.workspace)
        if args.unbind:
            result = client.unbind_gitlab(workspace_id)
            print(json.dumps(result) if args.json else f"{workspace_id}  not bound to GitLab")
            return 0
        if args.project is None:
            _print_binding(client.gitlab_binding(workspace_id), args.json)
            return 0
        if args.branch is None:
            raise InputError("binding needs --project and --branch (and the token on stdin)")
        bound = client.bind_gitlab(
            workspace_id,
            {
                "base_url": args.base_url,
                "project": args.project,
                "branch": args.branch,
                "working_directory": args.working_directory,
                "push_run_kind": args.push_run_kind,
                "access_token": _read_access_token(),
                "trigger_patterns": args.trigger_pattern,
                "ignore_patterns": args.ignore_pattern,
            },
        )
        _print_binding(bound, args.json)
        return 0

    gitlab = add(
        commands,
        "gitlab",
        "show, bind or unbind the workspace's GitLab project (docs/gitlab.md)",
        handle,
    )
    gitlab.add_argument("workspace", help="workspace name or ws- ID")
    gitlab.add_argument(
        "--project", metavar="ID|GROUP/PATH", help="bind to this project (numeric ID or path)"
    )
    gitlab.add_argument(
        "--base-url",
        default="https://gitlab.com",
        metavar="URL",
        help="the GitLab instance (%(default)s; a self-managed instance's https URL)",
    )
    gitlab.add_argument(
        "--branch", help="the branch whose pushes run (merge requests against it plan)"
    )
    gitlab.add_argument(
        "--working-directory", default="", metavar="PATH", help="the configuration's directory"
    )
    gitlab.add_argument(
        "--push-run-kind",
        default="plan_and_apply",
        choices=("plan_and_apply", "plan_only"),
        help="what a push runs (%(default)s); merge requests run speculative plans",
    )
    gitlab.add_argument(
        "--trigger-pattern",
        action="append",
        default=[],
        metavar="GLOB",
        help="repeatable: only changes touching a matching file (or the working directory) "
        "run, e.g. 'modules/**/*.tf' (default: every change runs)",
    )
    gitlab.add_argument(
        "--ignore-pattern",
        action="append",
        default=[],
        metavar="GLOB",
        help="repeatable: changed files matching it never start a run, e.g. '**/*.md'",
    )
    gitlab.add_argument("--unbind", action="store_true", help="remove the binding")
