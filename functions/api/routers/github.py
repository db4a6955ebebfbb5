"""GitHub sources: a workspace's repository binding and the App's webhook."""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header
from pydantic import BaseModel, Field, StrictBool, StrictInt

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from functions.isolation import current_event
from runplane.domain.errors import NotFound
from runplane.services.github_path_filters import ingestion_view
from runplane.services.principals import source_address
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class GitHubBindingBody(BaseModel):
    repository: str = Field(min_length=3, max_length=140)
    branch: str = Field(min_length=1, max_length=255)
    working_directory: str = Field(default="", max_length=500)
    installation_id: StrictInt
    push_run_kind: Literal["plan_and_apply", "plan_only"] = "plan_and_apply"
    pull_request_workspaces: StrictBool = False
    pull_request_auto_apply_destroy: StrictBool = False
    # Checked by the service (syntax, count, length), which answers with a pointer.
    trigger_patterns: list[str] = Field(default_factory=list, max_length=100)
    ignore_patterns: list[str] = Field(default_factory=list, max_length=100)


@router.put(
    "/api/v1/workspaces/<workspace_id>/github",
    responses=oas.responses(200, oas.GitHubBindingView, *oas.WRITE),
    security=oas.PEOPLE,
)
def bind_github(workspace_id: str, body: GitHubBindingBody) -> Reply:
    bound = services().github.bind(principal(), workspace_id, **body.model_dump())
    return json_reply(200, oas.GitHubBindingView.model_validate(bound.to_dict()))


@router.get(
    "/api/v1/workspaces/<workspace_id>/github",
    responses=oas.responses(200, oas.GitHubBindingView, *oas.READ),
    security=oas.PEOPLE,
)
def get_github(workspace_id: str) -> Reply:
    binding = services().github.binding(principal(), workspace_id)
    return json_reply(200, oas.GitHubBindingView.model_validate(binding.to_dict()))


@router.delete(
    "/api/v1/workspaces/<workspace_id>/github",
    responses=oas.responses(200, oas.GitHubUnbound, *oas.WRITE),
    security=oas.PEOPLE,
)
def unbind_github(workspace_id: str) -> Reply:
    services().github.unbind(principal(), workspace_id)
    return json_reply(200, oas.GitHubUnbound(workspace_id=workspace_id, bound=False))


@router.get(
    "/api/v1/github/installations",
    responses=oas.responses(200, oas.GitHubInstallationList, *oas.READ),
    security=oas.PEOPLE,
)
def list_github_installations() -> Reply:
    held = services().github_installations.list(principal())
    listed = {"installations": [i.to_dict() for i in held]}
    return json_reply(200, oas.GitHubInstallationList.model_validate(listed))


@router.delete(
    "/api/v1/github/installations/<installation_id>",
    responses=oas.responses(200, oas.GitHubInstallationReleased, *oas.WRITE),
    security=oas.PEOPLE,
)
def release_github_installation(installation_id: str) -> Reply:
    if not installation_id.isdigit() or len(installation_id) > 16:
        raise NotFound("GitHub App installation", installation_id[:40])
    services().github_installations.release(principal(), int(installation_id))
    released = oas.GitHubInstallationReleased(installation_id=int(installation_id), released=True)
    return json_reply(200, released)


@router.get(
    "/api/v1/github/ingestions/<source_id>",
    responses=oas.responses(200, oas.GitHubIngestionView, *oas.READ),
    security=oas.PEOPLE,
)
def get_source_ingestion(source_id: str) -> Reply:
    found = services().github.ingestion(principal(), source_id)
    return json_reply(200, oas.GitHubIngestionView.model_validate(ingestion_view(found)))


@router.post("/webhooks/github", responses=oas.webhook_responses())
def github_webhook(
    x_github_event: Annotated[str | None, Header()] = None,
    x_github_delivery: Annotated[str | None, Header()] = None,
    x_hub_signature_256: Annotated[str | None, Header()] = None,
) -> Reply:
    # Signed by GitHub, not authenticated by a token: the service checks the HMAC
    # of the exact bytes received. The headers are declared for the schema only and
    # left unconstrained here: validating them first would tell an unsigned caller
    # what is wrong before the signature is checked (the service checks them after).
    event = current_event()
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode("utf-8")
    reply = services().github.receive(
        dict(event.get("headers") or {}), body, source_address(event.raw_event)
    )
    return json_reply(reply.status, reply.body)
