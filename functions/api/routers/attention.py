"""The attention inbox: what waits for a person across the caller's workspaces
(docs/runs.md, "Attention")."""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]

ROUTE = "/api/v1/attention"


class AttentionItem(oas.Doc):
    """A run (or, for drift, a workspace) that waits for a person."""

    category: Literal["awaiting_approval", "needs_recovery", "failed", "drift"]
    workspace_id: str
    workspace_name: str
    run_id: str | None = None
    kind: str | None = None
    status: str | None = None
    created_by: str | None = None
    created_at: str | None = None
    since: str | None = Field(default=None, description="When the run entered its status")
    deadline: str | None = Field(default=None, description="Awaiting approval: the deadline")
    time_left: str | None = Field(default=None, description="Awaiting approval: 2d 4h left")
    expiring_soon: bool | None = Field(
        default=None, description="Awaiting approval: the deadline is within 24 hours"
    )
    plan_summary: dict[str, Any] | None = Field(
        default=None, description="Awaiting approval: the plan's counts"
    )


class AttentionView(oas.Doc):
    count: int = Field(description="Every item listed")
    as_of: str
    awaiting_approval: list[AttentionItem] = Field(description="Soonest deadline first")
    needs_recovery: list[AttentionItem]
    failed: list[AttentionItem] = Field(
        description="Each workspace's latest failure of the last 7 days, newest first"
    )
    drift: list[AttentionItem]


@router.get(
    ROUTE,
    responses=oas.responses(200, AttentionView, *oas.AUTHENTICATED),
    security=oas.PEOPLE,
)
def get_attention() -> Reply:
    view = services().attention.view(principal())
    return json_reply(200, AttentionView.model_validate(view))
