"""The workspace page's auto-destroy postponement (docs/auto-destroy.md).

The handler only reads the form and calls the same service as the run API, with the
signed-in principal; the service holds every rule (``workspace:update``, an armed
auto-destroy, no destroy run under way) and refuses before it writes anything.
"""

from __future__ import annotations

from datetime import timedelta

from functions.dashboard.pages import Session
from functions.dashboard.web import Page, Request, redirect
from runplane.wiring import services

# What the page's one button postpones by: the notices come a day ahead.
POSTPONE_BY = timedelta(hours=24)


def postpone(request: Request, session: Session, workspace_id: str) -> Page:
    """Postpone the workspace's auto-destroy by a day, and show the workspace again."""
    form = request.form()
    session.check_post(request, form)
    services().auto_destroys.postpone_by(session.principal, workspace_id, POSTPONE_BY)
    return redirect(f"/ui/workspaces/{workspace_id}#auto-destroy")
