"""The workspace page's state, lock and settings: what they show, the state download,
and the lock, unlock and settings forms.

Handlers only read the form and call the same services as the APIs, with the signed-in
principal; the services hold every rule (``state:read`` to see and download state,
``workspace:lock`` and ``workspace:force-unlock``, ``workspace:update`` and the
settings' own checks, a stale form's 409). Sensitive output values never reach a page:
the state service withholds them.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from functions.dashboard.pages import Session
from functions.dashboard.web import Page, Request, redirect, reply
from runplane.domain.entities import MAX_APPROVAL_WINDOW
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.identity import Forbidden, Permission
from runplane.domain.paging import Page as Listing
from runplane.domain.second_approval import MAX_DESTROYS_OVER, SecondApprovalRule
from runplane.domain.state import Output, simple_type
from runplane.domain.tfe_runs import ExecutionMode
from runplane.wiring import services

if TYPE_CHECKING:
    from runplane.domain.entities import Workspace

HISTORY_PAGE_SIZE = 20
RUNS_PAGE_SIZE = 20
# The Cloud API keeps this much of a lock's reason.
MAX_LOCK_REASON = 500
# A non-sensitive output's value is shown up to this many characters.
MAX_SHOWN_VALUE = 300
# Digits only (ASCII): nine are more than any version, window or count here.
_WHOLE = re.compile(r"[0-9]{1,9}", re.ASCII)


def page_number(request: Request, name: str) -> int:
    """The page of a listing a link asked for (1 unless it names a whole number)."""
    raw = request.query.get(name, "1")
    return int(raw) if _WHOLE.fullmatch(raw) and int(raw) >= 1 else 1


def shown_value(output: Output) -> str:
    """A non-sensitive output's value as compact JSON, cut to ``MAX_SHOWN_VALUE``."""
    text = json.dumps(output.value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 1] + "…"


def context(session: Session, request: Request, workspace: Workspace) -> dict[str, Any]:
    """What ``workspace.html`` shows of the workspace's state, lock and settings."""
    s = services()
    permissions = session.principal.permissions_in(workspace.id)
    may_read_state = Permission.STATE_READ in permissions
    summary = history = None
    if may_read_state:
        try:
            summary = s.state.summary(session.principal, workspace.id)
            versions = list(reversed(s.state.history(session.principal, workspace.id)))
            history = Listing.of(versions, page_number(request, "history"), HISTORY_PAGE_SIZE)
        except Forbidden:
            may_read_state = False
    runs = latest_run = None
    if Permission.RUN_READ in permissions:
        # Newest first: the first is the latest run, whichever page is shown. Only the
        # runs up to the page shown and one more are read (that one tells a next page).
        shown = page_number(request, "runs")
        newest = s.runs.list(session.principal, workspace.id, shown * RUNS_PAGE_SIZE + 1)
        runs = Listing.of(newest, shown, RUNS_PAGE_SIZE)
        latest_run = newest[0] if newest else None
    return {
        "state": summary,
        "history": history,
        "runs": runs,
        "latest_run": latest_run,
        "may_read_state": may_read_state,
        "shown_value": shown_value,
        "output_type": simple_type,
        "may_lock": Permission.WORKSPACE_LOCK in permissions,
        "may_force_unlock": Permission.WORKSPACE_FORCE_UNLOCK in permissions,
        "may_update": Permission.WORKSPACE_UPDATE in permissions,
        "execution_modes": [mode.value for mode in ExecutionMode],
        "max_lock_reason": MAX_LOCK_REASON,
        "max_approval_window": MAX_APPROVAL_WINDOW,
        "max_destroys_over": MAX_DESTROYS_OVER,
    }


# -- the state download -----------------------------------------------------------------


def download_state(
    request: Request, session: Session, workspace_id: str, state_version_id: str
) -> Page:
    """A state version's state file, as the Cloud API's download serves it, saved by the
    browser under the workspace's name and the version's serial."""
    s = services()
    workspace = s.workspaces.by_id(session.principal, workspace_id)
    version = s.state.get(session.principal, state_version_id)
    if version.workspace_id != workspace.id:
        raise NotFound("state version", state_version_id)
    raw = s.state.download(session.principal, version.id)
    name = f"{workspace.name}-{version.serial}.tfstate"
    return reply(
        200,
        raw.decode("utf-8"),
        content_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


# -- the lock ---------------------------------------------------------------------------


def _lock_section(workspace_id: str) -> str:
    return f"/ui/workspaces/{workspace_id}#lock"


def lock(request: Request, session: Session, workspace_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    reason = form.get("reason", "").strip()[:MAX_LOCK_REASON] or None
    services().workspaces.lock(session.principal, workspace_id, reason)
    return redirect(_lock_section(workspace_id))


def unlock(request: Request, session: Session, workspace_id: str) -> Page:
    session.check_post(request, request.form())
    services().workspaces.unlock(session.principal, workspace_id)
    return redirect(_lock_section(workspace_id))


def force_unlock(request: Request, session: Session, workspace_id: str) -> Page:
    session.check_post(request, request.form())
    services().workspaces.force_unlock(session.principal, workspace_id)
    return redirect(_lock_section(workspace_id))


# -- the settings -----------------------------------------------------------------------


def _whole(form: dict[str, str], name: str, message: str) -> int | None:
    raw = form.get(name, "").strip()
    if not raw:
        return None
    if not _WHOLE.fullmatch(raw):
        raise InvalidInput(message, f"/{name}")
    return int(raw)


def settings_change(form: dict[str, str]) -> dict[str, Any]:
    """The settings form as the service's arguments: every setting the form shows, as
    it was sent (the service checks each)."""
    mode = form.get("execution_mode", "")
    try:
        execution_mode = ExecutionMode(mode)
    except ValueError:
        raise InvalidInput(
            "the execution mode is 'local' (the client runs the engine) or 'remote' (plan "
            "and apply create managed runs here)",
            "/execution_mode",
        ) from None
    window = _whole(
        form,
        "approval_window_seconds",
        f"the approval window is a whole number of seconds, 1 to {MAX_APPROVAL_WINDOW}",
    )
    over = _whole(
        form,
        "destroys_over",
        f"destroys_over is a whole number from 0 to {MAX_DESTROYS_OVER}, or empty",
    )
    tags = tuple(t.strip() for t in form.get("tags", "").split(",") if t.strip())
    return {
        "description": form.get("description", "").strip(),
        "terraform_version": form.get("terraform_version", "").strip(),
        "execution_mode": execution_mode,
        "approval_window_seconds": window,
        "tags": tags,
        "second_approval": SecondApprovalRule(
            destroy_runs=form.get("destroy_runs") == "yes",
            destroys_over=over,
            separation_of_duties=form.get("separation_of_duties") == "yes",
        ),
    }


def update_settings(request: Request, session: Session, workspace_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    expected = _whole(
        form,
        "expected_settings_version",
        "the form does not say which version of the settings it shows: reload the page",
    )
    if expected is None:
        raise InvalidInput(
            "the form does not say which version of the settings it shows: reload the page",
            "/expected_settings_version",
        )
    change = settings_change(form)
    s = services()
    s.workspaces.update(
        session.principal,
        s.workspaces.by_id(session.principal, workspace_id),
        expected_settings_version=expected,
        **change,
    )
    return redirect(f"/ui/workspaces/{workspace_id}#settings")
