"""GitLab sources: a workspace's project binding and the project webhook."""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header
from pydantic import BaseModel, Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from functions.isolation import current_event
from runplane.services.principals import source_address
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class GitLabBindingBody(BaseModel):
    base_url: str = Field(default="https://gitlab.com", max_length=500)
    project: str = Field(min_length=1, max_length=255)
    branch: str = Field(min_length=1, max_length=255)
    working_directory: str = Field(default="", max_length=500)
    push_run_kind: Literal["plan_and_apply", "plan_only"] = "plan_and_apply"
    # Checked (and sealed) by the service; never echoed back.
    access_token: str = Field(min_length=1, max_length=500)
    # Checked by the service (syntax, count, length), which answers with a pointer.
    trigger_patterns: list[str] = Field(default_factory=list, max_length=100)
    ignore_patterns: list[str] = Field(default_factory=list, max_length=100)


@router.put(
    "/api/v1/workspaces/<workspace_id>/gitlab",
    responses=oas.responses(200, oas.GitLabBound, *oas.WRITE),
    security=oas.PEOPLE,
)
def bind_gitlab(workspace_id: str, body: GitLabBindingBody) -> Reply:
    bound = services().gitlab.bind(principal(), workspace_id, **body.model_dump())
    return json_reply(200, oas.GitLabBound.model_validate(bound.to_dict()))


@router.get(
    "/api/v1/workspaces/<workspace_id>/gitlab",
    responses=oas.responses(200, oas.GitLabBindingView, *oas.READ),
    security=oas.PEOPLE,
)
def get_gitlab(workspace_id: str) -> Reply:
    binding = services().gitlab.binding(principal(), workspace_id)
    return json_reply(200, oas.GitLabBindingView.model_validate(binding.to_dict()))


@router.delete(
    "/api/v1/workspaces/<workspace_id>/gitlab",
    responses=oas.responses(200, oas.GitLabUnbound, *oas.WRITE),
    security=oas.PEOPLE,
)
def unbind_gitlab(workspace_id: str) -> Reply:
    services().gitlab.unbind(principal(), workspace_id)
    return json_reply(200, oas.GitLabUnbound(workspace_id=workspace_id, bound=False))


@router.post("/webhooks/gitlab", responses=oas.webhook_responses())
def gitlab_webhook(
    x_gitlab_event: Annotated[str | None, Header()] = None,
    x_gitlab_event_uuid: Annotated[str | None, Header()] = None,
    x_gitlab_token: Annotated[str | None, Header()] = None,
) -> Reply:
    # Authenticated by the binding's secret token, which the service compares in
    # constant time. The headers are declared for the schema only: validating them
    # here would tell a caller without the token what is wrong before it is checked.
    event = current_event()
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode("utf-8")
    reply = services().gitlab.receive(
        dict(event.get("headers") or {}), body, source_address(event.raw_event)
    )
    return json_reply(reply.status, reply.body)
