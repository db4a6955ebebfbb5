"""``runplane audit list``: the organization's security audit trail, oldest first, every
page followed (docs/audit.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]


def _line(record: dict[str, Any]) -> str:
    where = record.get("source_address") or "-"
    target = f"{record['object']['kind']}:{record['object']['id']}"
    return (
        f"{record['at']}  {record['action']}  {record['outcome']}  {record['actor']}"
        f"  from {where}  on {target}"
    )


def add_parser(commands: Any, add: Add, connect: Connect) -> None:
    audit = commands.add_parser("audit", help="the organization's security audit trail")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)

    def list_records(args: argparse.Namespace) -> int:
        client = connect(args)
        records: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = client.audit(
                since=args.since, until=args.until, action=args.action, cursor=cursor
            )
            records.extend(page["records"])
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if args.json:
            print(json.dumps(records, indent=2, sort_keys=True))
            return 0
        if not records:
            print("no audit records in that range")
        for record in records:
            print(_line(record))
        return 0

    listing = add(audit_commands, "list", "list audit records, oldest first", list_records)
    listing.add_argument("--since", help="from this ISO 8601 time (inclusive)")
    listing.add_argument("--until", help="up to this ISO 8601 time (exclusive)")
    listing.add_argument("--action", help="only this action (e.g. token.created)")
