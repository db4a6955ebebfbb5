"""Run API routes for run triggers and notification destinations (thin: parse, call
one service, map the result)."""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.run import RunKind
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class TriggerSourceBody(BaseModel):
    source_workspace_id: str = Field(min_length=1, max_length=64)
    run_kind: Literal["plan_only", "plan_and_apply"] | None = None


class DestinationBody(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    kind: Literal["webhook", "slack"] = "webhook"
    url: str = Field(min_length=1, max_length=2048)
    events: list[str] = Field(min_length=1, max_length=10)


class RunTriggersView(oas.Doc):
    workspace_id: str
    run_kind: str
    sources: list[dict[str, str]]
    dependents: list[dict[str, str]]


class DestinationView(oas.Doc):
    id: str
    workspace_id: str
    name: str
    kind: str
    events: list[str]
    url: str
    created_at: str
    created_by: str


class DestinationCreated(DestinationView):
    signing_secret: str = Field(description="Shown once: receivers verify signatures with it")


class DestinationList(oas.Doc):
    destinations: list[DestinationView]


class DeliveryList(oas.Doc):
    deliveries: list[dict[str, Any]]


class Deleted(oas.Doc):
    deleted: str


class TestResult(oas.Doc):
    destination_id: str
    # Only whether: a status code, an error or a timing would map internal ports.
    delivered: bool = Field(description="Whether the endpoint answered 2xx in time")


BASE = "/api/v1/workspaces/<workspace_id>"


@router.get(
    f"{BASE}/run-triggers",
    responses=oas.responses(200, RunTriggersView, *oas.READ),
    security=oas.PEOPLE,
)
def run_triggers(workspace_id: str) -> Reply:
    shown = services().run_triggers.show(principal(), workspace_id)
    return json_reply(200, RunTriggersView.model_validate(shown))


@router.post(
    f"{BASE}/run-triggers",
    responses=oas.responses(200, RunTriggersView, *oas.WRITE),
    security=oas.PEOPLE,
)
def add_run_trigger(workspace_id: str, body: TriggerSourceBody) -> Reply:
    kind = RunKind(body.run_kind) if body.run_kind else None
    shown = services().run_triggers.add(principal(), workspace_id, body.source_workspace_id, kind)
    return json_reply(200, RunTriggersView.model_validate(shown))


@router.delete(
    f"{BASE}/run-triggers/<source_id>",
    responses=oas.responses(200, RunTriggersView, *oas.WRITE),
    security=oas.PEOPLE,
)
def remove_run_trigger(workspace_id: str, source_id: str) -> Reply:
    shown = services().run_triggers.remove(principal(), workspace_id, source_id)
    return json_reply(200, RunTriggersView.model_validate(shown))


@router.get(
    f"{BASE}/notifications",
    responses=oas.responses(200, DestinationList, *oas.READ),
    security=oas.PEOPLE,
)
def destinations(workspace_id: str) -> Reply:
    listed = services().notifications.list_for(principal(), workspace_id)
    return json_reply(200, DestinationList.model_validate({"destinations": listed}))


@router.post(
    f"{BASE}/notifications",
    responses=oas.responses(201, DestinationCreated, *oas.WRITE),
    security=oas.PEOPLE,
)
def create_destination(workspace_id: str, body: DestinationBody) -> Reply:
    created = services().notifications.create(
        principal(),
        workspace_id,
        name=body.name,
        kind=body.kind,
        url=body.url,
        events=body.events,
    )
    view = {**created.view, "signing_secret": created.signing_secret}
    return json_reply(201, DestinationCreated.model_validate(view))


@router.delete(
    f"{BASE}/notifications/<destination_id>",
    responses=oas.responses(200, Deleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_destination(workspace_id: str, destination_id: str) -> Reply:
    services().notifications.delete(principal(), workspace_id, destination_id)
    return json_reply(200, Deleted(deleted=destination_id))


@router.post(
    f"{BASE}/notifications/<destination_id>/actions/test",
    responses=oas.responses(200, TestResult, *oas.WRITE),
    security=oas.PEOPLE,
)
def test_destination(workspace_id: str, destination_id: str) -> Reply:
    result = services().notifications.test(principal(), workspace_id, destination_id)
    return json_reply(200, TestResult.model_validate(result))


@router.get(
    f"{BASE}/notifications/<destination_id>/deliveries",
    responses=oas.responses(200, DeliveryList, *oas.READ),
    security=oas.PEOPLE,
)
def deliveries(workspace_id: str, destination_id: str) -> Reply:
    listed = services().notifications.deliveries(principal(), workspace_id, destination_id)
    return json_reply(200, DeliveryList.model_validate({"deliveries": listed}))
