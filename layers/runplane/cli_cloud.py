"""``runplane workspace cloud WORKSPACE [show|set|clear]``: a workspace's cloud settings
(docs/credentials.md).

``set`` changes only the settings its flags name: it reads the settings, replaces
those, and writes them back whole at the version read (a change made meanwhile is a
409, nothing written). An empty value (``--aws-region ''``) unsets a setting. The
external ID is read from stdin only (never a flag: it would show in ``ps`` and the
shell's history), and kept as it is unless ``--aws-external-id-stdin`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from runplane.cli_input import InputError, duration
from runplane.client import Client

Connect = Callable[[argparse.Namespace], Client]
Add = Callable[..., argparse.ArgumentParser]

# Each flag of `set` and the setting it replaces.
FLAGS: dict[str, str] = {
    "aws_plan_role": "aws_plan_role_arn",
    "aws_apply_role": "aws_apply_role_arn",
    "aws_session_duration": "aws_session_duration",
    "aws_region": "aws_region",
    "gcp_audience": "gcp_audience",
    "azure_audience": "azure_audience",
    "azure_client_id": "azure_client_id",
    "azure_tenant_id": "azure_tenant_id",
}
SETTINGS = (
    "aws_plan_role_arn",
    "aws_apply_role_arn",
    "aws_session_duration",
    "aws_region",
    "gcp_audience",
    "azure_audience",
    "azure_client_id",
    "azure_tenant_id",
)


def _external_id() -> str | None:
    """The external ID from stdin: one trailing newline is the shell's; nothing unsets it."""
    if sys.stdin.isatty():
        raise InputError("--aws-external-id-stdin: pipe the external ID on stdin")
    text = sys.stdin.read()
    text = text[:-1] if text.endswith("\n") else text
    return text or None


def _seconds(text: str) -> int | None:
    return None if text == "" else duration(text)


def changed_body(current: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The whole settings to write: ``current``'s with the flags given over them, at
    the version read."""
    body: dict[str, Any] = {name: current.get(name) for name in SETTINGS}
    given = False
    for flag, name in FLAGS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        given = True
        if name == "aws_session_duration":
            body[name] = _seconds(value)
        else:
            body[name] = value or None
    if args.aws_external_id_stdin:
        body["aws_external_id"] = _external_id()
        given = True
    else:
        body["keep_aws_external_id"] = bool(current.get("aws_external_id_set"))
    if not given:
        raise InputError(
            "nothing to set: pass --aws-plan-role, --aws-apply-role, --aws-external-id-stdin, "
            "--aws-session-duration, --aws-region, --gcp-audience or --azure-*"
        )
    body["version"] = current.get("version", 0)
    return body


def render(settings: dict[str, Any]) -> str:
    """The settings as a person reads them (never the external ID: only whether set)."""
    lines = [f"{settings['workspace_id']}  cloud settings  version {settings['version']}"]
    if settings.get("aws_plan_role_arn"):
        lines.append(f"  aws plan role     {settings['aws_plan_role_arn']}")
        apply_role = settings.get("aws_apply_role_arn") or "none (applies get no AWS credentials)"
        lines.append(f"  aws apply role    {apply_role}")
        lines.append(
            f"  aws external ID   {'set' if settings.get('aws_external_id_set') else 'none'}"
        )
        lines.append(f"  aws session       {settings['aws_session_duration']} s")
        lines.append(f"  aws region        {settings.get('aws_region') or 'deployment region'}")
    else:
        lines.append("  aws               none")
    lines.append(f"  gcp audience      {settings.get('gcp_audience') or 'none'}")
    if settings.get("azure_client_id"):
        lines.append(f"  azure audience    {settings['azure_audience']}")
        lines.append(f"  azure client ID   {settings['azure_client_id']}")
        lines.append(f"  azure tenant ID   {settings['azure_tenant_id']}")
    else:
        lines.append("  azure             none")
    if settings.get("updated_by"):
        lines.append(f"  updated           {settings['updated_at']} by {settings['updated_by']}")
    return "\n".join(lines)


def add_parser(workspace_commands: Any, add: Add, connect: Connect) -> None:
    def cloud(args: argparse.Namespace) -> int:
        action = args.action or "show"
        given = [flag for flag in FLAGS if getattr(args, flag) is not None]
        if args.aws_external_id_stdin:
            given.append("aws_external_id_stdin")
        if action != "set" and given:
            flag = "--" + given[0].replace("_", "-")
            raise InputError(f"{flag} is for `runplane workspace cloud WORKSPACE set`")
        client = connect(args)
        workspace_id = client.workspace_id(args.workspace)
        if action == "show":
            settings = client.cloud_settings(workspace_id)
        elif action == "clear":
            settings = client.clear_cloud_settings(workspace_id)
        else:
            body = changed_body(client.cloud_settings(workspace_id), args)
            settings = client.put_cloud_settings(workspace_id, body)
        print(json.dumps(settings, indent=2, sort_keys=True) if args.json else render(settings))
        return 0

    command = add(
        workspace_commands,
        "cloud",
        "show, set or clear the workspace's cloud settings: the AWS roles, region and "
        "external ID, and the GCP and Azure audiences its runs use (docs/credentials.md)",
        cloud,
    )
    command.add_argument("workspace", help="workspace name or ws- ID")
    command.add_argument(
        "action",
        nargs="?",
        choices=("show", "set", "clear"),
        help="show (the default); set: change the settings the flags name; clear: remove "
        "every setting (needs credentials:manage to change)",
    )
    command.add_argument(
        "--aws-plan-role", metavar="ARN", help="set: the IAM role plans and speculative runs assume"
    )
    command.add_argument("--aws-apply-role", metavar="ARN", help="set: the IAM role applies assume")
    command.add_argument(
        "--aws-external-id-stdin",
        action="store_true",
        help="set: read the external ID the roles are assumed with from stdin (empty: none)",
    )
    command.add_argument(
        "--aws-session-duration",
        metavar="DURATION",
        help="set: the role sessions' duration: seconds or 15m to 12h (default 1h)",
    )
    command.add_argument(
        "--aws-region", metavar="REGION", help="set: the AWS region (default: the deployment's)"
    )
    command.add_argument(
        "--gcp-audience",
        metavar="AUDIENCE",
        help="set: the GCP workload identity pool provider's audience",
    )
    command.add_argument(
        "--azure-audience",
        metavar="AUDIENCE",
        help="set: the Azure federated credential's audience (default api://AzureADTokenExchange)",
    )
    command.add_argument(
        "--azure-client-id", metavar="GUID", help="set: the Azure application (client) ID"
    )
    command.add_argument("--azure-tenant-id", metavar="GUID", help="set: the Azure tenant ID")
