"""The workspace page's cloud settings forms: replace the settings whole, or clear them
(docs/credentials.md, "From the dashboard").

Handlers only read the form and call the same service as the run API, with the
signed-in principal; the service holds every rule (``credentials:manage``, the
version the page showed, the settings' own checks). The external ID is write-only:
the page never shows it, an empty field keeps the one stored, and no refusal here
repeats it.
"""

from __future__ import annotations

import re

from functions.dashboard.pages import Session
from functions.dashboard.web import Page, Request, redirect
from runplane.domain.cloud_settings import (
    MAX_SESSION_SECONDS,
    MIN_SESSION_SECONDS,
    CloudSettingsChange,
)
from runplane.domain.errors import InvalidInput
from runplane.wiring import services

# The form's text fields, each named as the setting it sets; empty unsets it.
TEXT_SETTINGS = (
    "aws_plan_role_arn",
    "aws_apply_role_arn",
    "aws_region",
    "gcp_audience",
    "azure_audience",
    "azure_client_id",
    "azure_tenant_id",
)
# Digits only (ASCII: int() would take other scripts' digits too). Nine are more than
# any version or session duration has, and int() of them is cheap.
_WHOLE = re.compile(r"[0-9]{1,9}", re.ASCII)


def cloud_settings_change(form: dict[str, str]) -> CloudSettingsChange:
    """The form as the service's change: the whole settings, an empty field unset,
    the external ID kept unless a new one is typed or its removal is ticked."""
    external_id = form.get("aws_external_id", "")
    remove = form.get("remove_aws_external_id") == "yes"
    if external_id and remove:
        raise InvalidInput(
            "type a new aws_external_id or remove the stored one, not both", "/aws_external_id"
        )
    duration = form.get("aws_session_duration", "").strip()
    if duration and not _WHOLE.fullmatch(duration):
        raise InvalidInput(
            f"aws_session_duration must be a whole number of seconds, {MIN_SESSION_SECONDS} "
            f"to {MAX_SESSION_SECONDS}",
            "/aws_session_duration",
        )
    settings = {name: form.get(name, "").strip() or None for name in TEXT_SETTINGS}
    return CloudSettingsChange(
        **settings,
        aws_external_id=external_id or None,
        keep_aws_external_id=not external_id and not remove,
        aws_session_duration=int(duration) if duration else None,
    )


def expected_version(form: dict[str, str]) -> int:
    """The settings' version the page showed: a change made since is refused (409)."""
    version = form.get("expected_version", "")
    if not _WHOLE.fullmatch(version):
        raise InvalidInput(
            "the form does not say which version of the cloud settings it shows: reload the page",
            "/expected_version",
        )
    return int(version)


def _settings_section(workspace_id: str) -> str:
    return f"/ui/workspaces/{workspace_id}#cloud-credentials"


def put(request: Request, session: Session, workspace_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    change = cloud_settings_change(form)
    services().cloud_settings.put(
        session.principal, workspace_id, change, expected_version=expected_version(form)
    )
    return redirect(_settings_section(workspace_id))


def clear(request: Request, session: Session, workspace_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    services().cloud_settings.clear(
        session.principal, workspace_id, expected_version=expected_version(form)
    )
    return redirect(_settings_section(workspace_id))
