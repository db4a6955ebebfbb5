"""The plan view: the run page's plan section and the full plan page
(``GET /ui/runs/<id>/plan?page=N``).

Both read the view from ``plan_views.of``, the service the run API's
``GET /api/v1/runs/{id}/plan`` reads: its permission rule is the run review's, and it
builds the view from the plan document the control plane holds, never from a log.
"""

from __future__ import annotations

from typing import Any

from functions.dashboard.pages import Session, render
from functions.dashboard.web import Page, Request
from runplane.domain.errors import InvalidInput
from runplane.domain.identity import Principal
from runplane.wiring import services

_PAGE_NUMBER_DIGITS = 6


def context(principal: Principal, review: dict[str, Any]) -> dict[str, Any]:
    """What ``run_plan.html`` shows on the run page: the counts and the first page."""
    if review.get("plan") is None:
        return {"run_plan": None}
    return {"run_plan": services().plan_views.of(principal, review["id"])}


def page(request: Request, session: Session, run_id: str) -> Page:
    run_plan = services().plan_views.of(session.principal, run_id, _page_number(request))
    return render(
        200,
        "plan.html",
        session=session,
        run_id=run_id,
        run_plan=run_plan,
    )


def _page_number(request: Request) -> int:
    raw = request.query.get("page", "1")
    if not raw.isascii() or not raw.isdigit() or len(raw) > _PAGE_NUMBER_DIGITS:
        raise InvalidInput("the page number must be a whole number from 1", "/page")
    return int(raw)
