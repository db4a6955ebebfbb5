"""Run API routes for workspace schedules (docs/schedules.md). Handlers parse, call
one service, map the result."""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.services.schedules import view
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class ScheduleCreate(BaseModel):
    expression: str = Field(
        min_length=1,
        max_length=200,
        description="Five-field cron in UTC (minute hour day-of-month month day-of-week) "
        "or rate(N minutes|hours|days); at most one fire every 15 minutes",
    )
    kind: Literal["plan_only", "refresh_only"] = "plan_only"


class SchedulePause(BaseModel):
    paused: bool


class DriftRemedy(BaseModel):
    remedy: Literal["reconcile", "accept"] = Field(
        description="reconcile: plan and apply the configuration; accept: apply a "
        "refresh-only plan, taking the real world into the state"
    )


class ScheduleView(oas.Doc):
    id: str
    workspace_id: str
    expression: str
    aws_expression: str
    kind: str
    state: Literal["active", "paused"]
    created_at: str
    created_by: str
    next_fire_at: str | None
    active_run_id: str | None
    last_fire_at: str | None
    last_outcome: Literal["created", "skipped"] | None


class FireView(oas.Doc):
    scheduled_at: str
    outcome: Literal["created", "skipped"]
    run_id: str | None
    reason: str | None


class ScheduleDetail(ScheduleView):
    fires: list[FireView] = Field(description="The latest fires, newest first")


class ScheduleList(oas.Doc):
    schedules: list[ScheduleView]


class ScheduleDeleted(oas.Doc):
    id: str
    deleted: bool


@router.post(
    "/api/v1/workspaces/<workspace_id>/drift/actions/remediate",
    responses=oas.responses(201, oas.Review, *oas.WRITE),
    security=oas.PEOPLE,
)
def remediate_drift(workspace_id: str, body: DriftRemedy) -> Reply:
    """A run that resolves the drift the workspace's last check found (docs/schedules.md)."""
    s = services()
    run = s.schedules.remediate(principal(), workspace_id, body.remedy)
    return json_reply(201, oas.Review.model_validate(s.runs.review_of(run)))


@router.post(
    "/api/v1/workspaces/<workspace_id>/schedules",
    responses=oas.responses(201, ScheduleView, *oas.WRITE),
    security=oas.PEOPLE,
)
def create_schedule(workspace_id: str, body: ScheduleCreate) -> Reply:
    s = services()
    created = s.schedules.create(principal(), workspace_id, body.expression, body.kind)
    return json_reply(201, ScheduleView.model_validate(view(created, s.clock.now())))


@router.get(
    "/api/v1/workspaces/<workspace_id>/schedules",
    responses=oas.responses(200, ScheduleList, *oas.READ),
    security=oas.PEOPLE,
)
def list_schedules(workspace_id: str) -> Reply:
    s = services()
    found = s.schedules.of_workspace(principal(), workspace_id)
    listed = {"schedules": [view(one, s.clock.now()) for one in found]}
    return json_reply(200, ScheduleList.model_validate(listed))


@router.get(
    "/api/v1/schedules/<schedule_id>",
    responses=oas.responses(200, ScheduleDetail, *oas.READ),
    security=oas.PEOPLE,
)
def get_schedule(schedule_id: str) -> Reply:
    s = services()
    who = principal()
    schedule = s.schedules.get(who, schedule_id)
    fires = [
        {
            "scheduled_at": fire.scheduled_at.isoformat(),
            "outcome": fire.outcome,
            "run_id": fire.run_id,
            "reason": fire.reason,
        }
        for fire in s.schedules.fires(who, schedule_id)
    ]
    detail = {**view(schedule, s.clock.now()), "fires": fires}
    return json_reply(200, ScheduleDetail.model_validate(detail))


@router.post(
    "/api/v1/schedules/<schedule_id>/actions/pause",
    responses=oas.responses(200, ScheduleView, *oas.WRITE),
    security=oas.PEOPLE,
)
def pause_schedule(schedule_id: str, body: SchedulePause) -> Reply:
    s = services()
    changed = s.schedules.set_paused(principal(), schedule_id, body.paused)
    return json_reply(200, ScheduleView.model_validate(view(changed, s.clock.now())))


@router.delete(
    "/api/v1/schedules/<schedule_id>",
    responses=oas.responses(200, ScheduleDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_schedule(schedule_id: str) -> Reply:
    services().schedules.delete(principal(), schedule_id)
    return json_reply(200, ScheduleDeleted(id=schedule_id, deleted=True))
