"""``runplane team ...``: teams, their members, tokens and workspace access
(docs/teams.md). Teams are given by name or ``team-…`` ID, workspaces by name or
``ws-…`` ID."""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from typing import Any

from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]

LEVELS = ("read", "plan", "write", "admin")
CAPABILITIES = ("approve", "override-policy", "recover", "manage-variables", "manage-credentials")
ORGANIZATION_ACCESS = (
    "manage-workspaces",
    "manage-policies",
    "manage-variable-sets",
    "manage-vcs",
    "read-workspaces",
)


def _line(team: dict[str, Any]) -> str:
    members = len(team.get("members") or [])
    groups = ", ".join(team.get("groups") or []) or "-"
    access = ", ".join(team.get("organization_access") or [])
    role = "owners" if team.get("owners") else (access or "workspace access only")
    return f"{team['name']}  {team['id']}  {members} member(s)  groups: {groups}  {role}"


def access_line(access: dict[str, Any], name: str) -> str:
    level = access.get("level") or "-"
    capabilities = ", ".join(access.get("capabilities") or []) or "-"
    return f"{name}  level {level}  capabilities {capabilities}"


def _print(found: Any, as_json: bool, text: str) -> None:
    print(json.dumps(found, indent=2, sort_keys=True) if as_json else text)


def add_parser(commands: Any, add: Add, connect: Connect) -> None:
    team = commands.add_parser("team", help="teams: members, tokens and workspace access")
    team_commands = team.add_subparsers(dest="team_command", required=True)

    def creating(args: argparse.Namespace) -> int:
        created = connect(args).create_team(
            args.name,
            members=args.member or [],
            groups=args.group or [],
            organization_access=args.org_access or [],
            owners=args.owners,
        )
        _print(created, args.json, _line(created))
        return 0

    def listing(args: argparse.Namespace) -> int:
        found = connect(args).list_teams()
        if args.json:
            _print(found, True, "")
        elif not found:
            print("no team")
        for each in [] if args.json else found:
            print(_line(each))
        return 0

    def deleting(args: argparse.Namespace) -> int:
        client = connect(args)
        deleted = client.delete_team(client.team_id(args.team))
        _print(deleted, args.json, f"{args.team} deleted")
        return 0

    def membership(args: argparse.Namespace) -> int:
        client = connect(args)
        adding = args.team_command == "add-member"
        changed = client.team_member(client.team_id(args.team), args.user, add=adding)
        verb = "added to" if adding else "removed from"
        _print(changed, args.json, f"{args.user} {verb} {changed['name']}")
        return 0

    def tokening(args: argparse.Namespace) -> int:
        client = connect(args)
        created = client.create_team_token(client.team_id(args.team), args.name)
        if args.json:
            _print(created, True, "")
        else:
            print(f"team token {created['id']} ({created['name']}), shown once:")
            print(created["token"])
        return 0

    made = add(team_commands, "create", "create a team", creating)
    made.add_argument("name", help="lowercase letters, digits, '-' and '_'")
    _membership_options(made)
    made.add_argument("--owners", action="store_true", help="organization owners (admin role)")
    add(team_commands, "list", "the organization's teams", listing)
    shown = add(
        team_commands,
        "show",
        "a team, its members and workspace access",
        functools.partial(_showing, connect),
    )
    shown.add_argument("team", help="the team's name or team- ID")
    changed = add(team_commands, "update", "change a team", functools.partial(_updating, connect))
    changed.add_argument("team", help="the team's name or team- ID")
    changed.add_argument("--rename", metavar="NAME", help="a new name")
    _membership_options(changed, members=False)
    changed.add_argument("--clear-groups", action="store_true", help="map no group")
    changed.add_argument("--clear-org-access", action="store_true", help="no organization access")
    changed.add_argument("--owners", choices=["yes", "no"], help="organization owners or not")
    gone = add(team_commands, "delete", "delete a team and its access", deleting)
    gone.add_argument("team", help="the team's name or team- ID")
    for name, what in (("add-member", "add a person"), ("remove-member", "remove a person")):
        command = add(team_commands, name, what, membership)
        command.add_argument("team", help="the team's name or team- ID")
        command.add_argument("user", help="the person's user name (as they sign in)")
    token = add(team_commands, "token", "issue a token that acts as the team", tokening)
    token.add_argument("team", help="the team's name or team- ID")
    token.add_argument("--name", required=True, help="what the token is for")
    _access_parsers(team_commands, add, connect)


def _showing(connect: Connect, args: argparse.Namespace) -> int:
    client = connect(args)
    team_id = client.team_id(args.team)
    found = client.team(team_id)
    access = client.team_access(team_id)
    if args.json:
        _print({**found, "access": access}, True, "")
        return 0
    print(_line(found))
    for member in found.get("members") or []:
        print(f"  member {member}")
    for each in access:
        print(f"  {access_line(each, each['workspace_id'])}")
    return 0


def _updating(connect: Connect, args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {}
    if args.rename:
        changes["name"] = args.rename
    if args.group is not None or args.clear_groups:
        changes["groups"] = args.group or []
    if args.org_access is not None or args.clear_org_access:
        changes["organization_access"] = args.org_access or []
    if args.owners is not None:
        changes["owners"] = args.owners == "yes"
    if not changes:
        print("nothing to change: pass --rename, --group, --org-access or --owners")
        return 2
    client = connect(args)
    changed = client.update_team(client.team_id(args.team), changes)
    _print(changed, args.json, _line(changed))
    return 0


def _membership_options(parser: argparse.ArgumentParser, *, members: bool = True) -> None:
    if members:
        parser.add_argument(
            "--member", action="append", metavar="USER", help="a person, by user name (repeat)"
        )
    parser.add_argument(
        "--group",
        action="append",
        metavar="GROUP",
        help="an identity-provider group whose members belong (repeat)",
    )
    parser.add_argument(
        "--org-access",
        action="append",
        choices=ORGANIZATION_ACCESS,
        help="organization-wide access (repeat)",
    )


def _access_parsers(team_commands: Any, add: Add, connect: Connect) -> None:
    def granting(args: argparse.Namespace) -> int:
        client = connect(args)
        workspace_id = client.workspace_id(args.workspace)
        granted = client.set_team_access(
            workspace_id, client.team_id(args.team), args.level, args.capability or []
        )
        _print(granted, args.json, access_line(granted, f"{args.team} on {args.workspace}:"))
        return 0

    def revoking(args: argparse.Namespace) -> int:
        client = connect(args)
        removed = client.remove_team_access(
            client.workspace_id(args.workspace), client.team_id(args.team)
        )
        _print(removed, args.json, f"{args.team} has no access to {args.workspace} now")
        return 0

    def showing(args: argparse.Namespace) -> int:
        client = connect(args)
        found = client.workspace_team_access(client.workspace_id(args.workspace))
        if args.json:
            _print(found, True, "")
            return 0
        names = {t["id"]: t["name"] for t in client.list_teams()}
        if not found:
            print("no team has access (organization roles still apply)")
        for each in found:
            print(access_line(each, names.get(each["team_id"], each["team_id"])))
        return 0

    grant = add(team_commands, "grant", "set a team's access to a workspace", granting)
    grant.add_argument("team", help="the team's name or team- ID")
    grant.add_argument("--workspace", required=True, help="workspace name or ws- ID")
    grant.add_argument("--level", choices=LEVELS, help="read, plan, write or admin")
    grant.add_argument(
        "--capability", action="append", choices=CAPABILITIES, help="a capability (repeat)"
    )
    revoke = add(team_commands, "revoke", "remove a team's access to a workspace", revoking)
    revoke.add_argument("team", help="the team's name or team- ID")
    revoke.add_argument("--workspace", required=True, help="workspace name or ws- ID")
    access = add(team_commands, "access", "the teams with access to a workspace", showing)
    access.add_argument("--workspace", required=True, help="workspace name or ws- ID")
