"""`runplane workspace triggers|notify ...`: run triggers and notification destinations."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def register(
    workspace_commands: Any, add: Callable[..., argparse.ArgumentParser], client: Callable[..., Any]
) -> None:
    def base(path: str, args: argparse.Namespace) -> tuple[Any, str]:
        api = client(args)
        return api, f"/api/v1/workspaces/{api.workspace_id(args.workspace)}/{path}"

    def show(result: Any) -> int:
        print(json.dumps(result, indent=2))
        return 0

    def triggers(args: argparse.Namespace) -> int:
        api, path = base("run-triggers", args)
        if args.add:
            body: dict[str, Any] = {"source_workspace_id": api.workspace_id(args.add)}
            if args.run_kind:
                body["run_kind"] = args.run_kind
            return show(api._call("POST", path, body))
        if args.remove:
            return show(api._call("DELETE", f"{path}/{api.workspace_id(args.remove)}"))
        return show(api._call("GET", path))

    def notify(args: argparse.Namespace) -> int:
        api, path = base("notifications", args)
        if args.action == "create":
            body = {
                "name": args.name,
                "kind": args.kind,
                "url": args.destination_url,
                "events": args.events,
            }
            return show(api._call("POST", path, body))
        if args.action == "delete":
            return show(api._call("DELETE", f"{path}/{args.destination}"))
        if args.action == "test":
            return show(api._call("POST", f"{path}/{args.destination}/actions/test"))
        if args.action == "deliveries":
            return show(api._call("GET", f"{path}/{args.destination}/deliveries"))
        return show(api._call("GET", path))

    command = add(
        workspace_commands, "triggers", "list, add or remove run-trigger sources", triggers
    )
    command.add_argument("workspace", help="the dependent workspace (name or ws- ID)")
    command.add_argument("--add", metavar="SOURCE", help="add a source workspace")
    command.add_argument("--remove", metavar="SOURCE", help="remove a source workspace")
    command.add_argument(
        "--run-kind",
        choices=["plan_only", "plan_and_apply"],
        help="the kind of run a trigger queues here (plan_and_apply by default)",
    )
    command = add(workspace_commands, "notify", "notification destinations", notify)
    command.add_argument("workspace", help="workspace name or ws- ID")
    command.add_argument(
        "action",
        choices=["list", "create", "delete", "test", "deliveries"],
        nargs="?",
        default="list",
        help="what to do (%(default)s)",
    )
    command.add_argument(
        "destination", nargs="?", help="the destination (ntf-...) to delete, test or inspect"
    )
    command.add_argument("--name", default="notifications", help="a new destination's name")
    command.add_argument(
        "--kind",
        choices=["webhook", "slack"],
        default="webhook",
        help="signed JSON webhook or Slack incoming webhook (%(default)s)",
    )
    command.add_argument(
        "--destination-url",
        dest="destination_url",
        help="where a new destination POSTs (https; never shown back in full)",
    )
    command.add_argument(
        "--events",
        nargs="+",
        default=["applied", "errored"],
        help="events a new destination receives (%(default)s)",
    )
