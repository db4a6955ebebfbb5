"""API tokens, policy sets and launch controls: what an organization's admins set."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field, StrictInt

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.services.launch_controls import GLOBAL, Controls
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]

# A region, release or runtime name in launch controls.
Name = Annotated[str, Field(min_length=1, max_length=100)]


class TokenCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    role: Literal["reader", "developer", "operator", "admin"]


class PolicySetBody(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    modules: list[dict[str, str]] = Field(min_length=1, max_length=64)
    policies: list[dict[str, str]] = Field(min_length=1, max_length=64)
    input_shape: str | None = Field(default=None, max_length=32)
    unknown_input_roots: str | None = Field(default=None, max_length=32)


class AttachmentsBody(BaseModel):
    workspaces: list[str] = Field(default_factory=list, max_length=500)
    all_workspaces: bool = False


class LaunchControlsBody(BaseModel):
    launches_enabled: bool = True
    suspended: bool = False
    allowed_regions: list[Name] = Field(default_factory=list, max_length=50)
    runner_releases: list[Name] = Field(default_factory=list, max_length=50)
    policy_runtimes: list[Name] = Field(default_factory=list, max_length=50)
    max_sandboxes: StrictInt | None = Field(default=None, ge=0, le=10_000)


# -- API tokens ---------------------------------------------------------------------------


@router.post(
    "/api/v1/tokens",
    responses=oas.responses(201, oas.TokenIssued, *oas.WRITE),
    security=oas.PEOPLE,
)
def create_token(body: TokenCreate) -> Reply:
    issued = services().identity.create_token(principal(), body.name, body.role)
    record = issued.record
    return json_reply(
        201,
        oas.TokenIssued(
            id=record.id,
            name=record.name,
            role=body.role,
            permissions=sorted(p.value for p in record.permissions),
            token=issued.token,  # shown once: only its hash is stored
        ),
    )


@router.delete(
    "/api/v1/tokens/<token_id>",
    responses=oas.responses(200, oas.TokenRevoked, *oas.WRITE),
    security=oas.PEOPLE,
)
def revoke_token(token_id: str) -> Reply:
    services().identity.revoke_token(principal(), token_id)
    return json_reply(200, oas.TokenRevoked(id=token_id, revoked=True))


# -- policy sets ----------------------------------------------------------------------------


@router.post(
    "/api/v1/policy-sets",
    responses=oas.responses(201, oas.PolicySet, *oas.WRITE, also=200),
    security=oas.PEOPLE,
)
def publish_policy_set(body: PolicySetBody) -> Reply:
    published = services().policies.publish(principal(), body.model_dump(exclude_none=True))
    return json_reply(
        201 if published.created else 200, oas.PolicySet.model_validate(published.to_dict())
    )


@router.get(
    "/api/v1/policy-sets",
    responses=oas.responses(200, oas.PolicySets, *oas.READ),
    security=oas.PEOPLE,
)
def list_policy_sets() -> Reply:
    sets = services().policies.list(principal())
    listed = [oas.PolicySet.model_validate(published.to_dict()) for published in sets]
    return json_reply(200, oas.PolicySets(policy_sets=listed))


@router.get(
    "/api/v1/policy-sets/<name>",
    responses=oas.responses(200, oas.PolicySet, *oas.READ),
    security=oas.PEOPLE,
)
def get_policy_set(name: str) -> Reply:
    published = services().policies.get(principal(), name)
    return json_reply(200, oas.PolicySet.model_validate(published.to_dict()))


@router.put(
    "/api/v1/policy-sets/<name>/attachments",
    responses=oas.responses(200, oas.PolicySet, *oas.WRITE),
    security=oas.PEOPLE,
)
def attach_policy_set(name: str, body: AttachmentsBody) -> Reply:
    attached = services().policies.attach(principal(), name, body.workspaces, body.all_workspaces)
    return json_reply(200, oas.PolicySet.model_validate(attached.to_dict()))


# -- launch controls ------------------------------------------------------------------------


@router.get(
    "/api/v1/launch-controls/<scope>",
    responses=oas.responses(200, oas.LaunchControls, *oas.READ),
    security=oas.PEOPLE,
)
def get_launch_controls(scope: Literal["platform", "organization"]) -> Reply:
    controls, running = services().launch_controls.get(
        principal(), GLOBAL if scope == "platform" else "organization"
    )
    view = {"scope": scope, **asdict(controls), "running_sandboxes": running}
    return json_reply(200, oas.LaunchControls.model_validate(view))


@router.put(
    "/api/v1/launch-controls/<scope>",
    responses=oas.responses(200, oas.LaunchControls, *oas.WRITE),
    security=oas.PEOPLE,
)
def set_launch_controls(
    scope: Literal["platform", "organization"], body: LaunchControlsBody
) -> Reply:
    controls = services().launch_controls.set(
        principal(),
        GLOBAL if scope == "platform" else "organization",
        Controls(
            launches_enabled=body.launches_enabled,
            suspended=body.suspended,
            allowed_regions=tuple(body.allowed_regions),
            runner_releases=tuple(body.runner_releases),
            policy_runtimes=tuple(body.policy_runtimes),
            max_sandboxes=body.max_sandboxes,
        ),
    )
    return json_reply(200, oas.LaunchControls.model_validate({"scope": scope, **asdict(controls)}))
