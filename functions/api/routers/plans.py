"""A run's plan as a person reads it: resource changes grouped by action with their
attribute diffs, output changes and drift (docs/runs.md, "The plan view"); the
dashboard's plan view, from the same service."""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from functions.isolation import current_event
from runplane.domain.errors import InvalidInput
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]

ROUTE = "/api/v1/runs/<run_id>/plan"


class RunPlanView(oas.Doc):
    """One page of a run's plan view, or why there is none."""

    run_id: str
    state: Literal["shown", "not_yet", "none", "unavailable"]
    message: str | None = Field(default=None, description="Why there is no view, in words")
    view: dict[str, Any] | None = Field(
        default=None,
        description=(
            "counts by action, page (number, pages, size), resource_changes of this page "
            "(address, action, attribute diff: path, before, after; unknown values "
            '"known after apply", sensitive ones "(sensitive)"), output_changes and '
            "resource_drift"
        ),
    )


@router.get(
    ROUTE,
    responses=oas.responses(200, RunPlanView, *oas.READ, 422),
    security=oas.PEOPLE,
)
def get_run_plan(run_id: str) -> Reply:
    plan = services().plan_views.of(principal(), run_id, _page())
    return json_reply(
        200,
        RunPlanView(
            run_id=plan.run_id,
            state=plan.state.value,
            message=plan.message,
            view=plan.view.to_body() if plan.view is not None else None,
        ),
    )


def _page() -> int:
    """The ``page`` query parameter: a whole number from 1 (1 when absent)."""
    raw = current_event().get_query_string_value("page")
    if raw is None:
        return 1
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9 or int(raw) < 1:
        raise InvalidInput("page must be a whole number from 1", "/page")
    return int(raw)
