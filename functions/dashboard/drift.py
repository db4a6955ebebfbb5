"""The workspace page's drift remediation forms (docs/schedules.md, "Remediating drift").

The handler only reads the form and calls the same service as the run API, with the
signed-in principal; the service holds every rule (``run:create``, a recorded drift,
the remedy's name) and refuses before it writes anything.
"""

from __future__ import annotations

from functions.dashboard.pages import Session
from functions.dashboard.web import Page, Request, redirect
from runplane.wiring import services


def remediate(request: Request, session: Session, workspace_id: str) -> Page:
    """Start the run the form's ``remedy`` names, and show its page."""
    form = request.form()
    session.check_post(request, form)
    run = services().schedules.remediate(session.principal, workspace_id, form.get("remedy", ""))
    return redirect(f"/ui/runs/{run.id}")
