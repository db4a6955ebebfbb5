"""A workspace's variables (Terraform and environment variables): list (sensitive values
never returned), set, delete. ``.../variables/<name>`` names a Terraform variable, as it
did before categories; ``.../variables/<category>/<name>`` names either."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field, StrictBool, StrictStr

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.variables import MAX_DESCRIPTION, VariableCategory, category_of
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


def _set(workspace_id: str, category: VariableCategory, name: str, body: VariableBody) -> Reply:
    variable, created = services().workspace_variables.set(
        principal(),
        workspace_id,
        name,
        body.value,
        sensitive=body.sensitive,
        description=body.description,
        category=category,
    )
    return json_reply(201 if created else 200, oas.VariableView.model_validate(variable.view()))


def _delete(workspace_id: str, category: VariableCategory, name: str) -> Reply:
    services().workspace_variables.delete(principal(), workspace_id, name, category)
    deleted = oas.VariableDeleted(
        workspace_id=workspace_id, name=name, category=category.value, deleted=True
    )
    return json_reply(200, deleted)


@router.put(
    "/api/v1/workspaces/<workspace_id>/variables/<name>",
    responses=oas.responses(200, oas.VariableView, *oas.WRITE, also=201),
    security=oas.PEOPLE,
)
def set_variable(workspace_id: str, name: str, body: VariableBody) -> Reply:
    return _set(workspace_id, VariableCategory.TERRAFORM, name, body)


@router.delete(
    "/api/v1/workspaces/<workspace_id>/variables/<name>",
    responses=oas.responses(200, oas.VariableDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_variable(workspace_id: str, name: str) -> Reply:
    return _delete(workspace_id, VariableCategory.TERRAFORM, name)


@router.put(
    "/api/v1/workspaces/<workspace_id>/variables/<category>/<name>",
    responses=oas.responses(200, oas.VariableView, *oas.WRITE, also=201),
    security=oas.PEOPLE,
)
def set_categorized_variable(
    workspace_id: str, category: str, name: str, body: VariableBody
) -> Reply:
    return _set(workspace_id, category_of(category), name, body)


@router.delete(
    "/api/v1/workspaces/<workspace_id>/variables/<category>/<name>",
    responses=oas.responses(200, oas.VariableDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_categorized_variable(workspace_id: str, category: str, name: str) -> Reply:
    return _delete(workspace_id, category_of(category), name)
