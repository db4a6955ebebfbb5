"""A workspace's Terraform variables: list (sensitive values never returned), set, delete."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field, StrictBool, StrictStr

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.variables import MAX_DESCRIPTION
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class VariableBody(BaseModel):
    # Size and name rules are the service's (422, 413 with a pointer).
    value: StrictStr
    sensitive: StrictBool = False
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)


@router.get(
    "/api/v1/workspaces/<workspace_id>/variables",
    responses=oas.responses(200, oas.VariableList, *oas.READ),
    security=oas.PEOPLE,
)
def list_variables(workspace_id: str) -> Reply:
    found = services().workspace_variables.list(principal(), workspace_id)
    listed = {"workspace_id": workspace_id, "variables": [v.view() for v in found]}
    return json_reply(200, oas.VariableList.model_validate(listed))


@router.put(
    "/api/v1/workspaces/<workspace_id>/variables/<name>",
    responses=oas.responses(200, oas.VariableView, *oas.WRITE, also=201),
    security=oas.PEOPLE,
)
def set_variable(workspace_id: str, name: str, body: VariableBody) -> Reply:
    variable, created = services().workspace_variables.set(
        principal(),
        workspace_id,
        name,
        body.value,
        sensitive=body.sensitive,
        description=body.description,
    )
    return json_reply(201 if created else 200, oas.VariableView.model_validate(variable.view()))


@router.delete(
    "/api/v1/workspaces/<workspace_id>/variables/<name>",
    responses=oas.responses(200, oas.VariableDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_variable(workspace_id: str, name: str) -> Reply:
    services().workspace_variables.delete(principal(), workspace_id, name)
    deleted = oas.VariableDeleted(workspace_id=workspace_id, name=name, deleted=True)
    return json_reply(200, deleted)
