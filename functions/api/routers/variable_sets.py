"""Organization variable sets (docs/runs.md, "Variable sets"): create, list, show,
change and delete them, set and delete their variables, apply them to workspaces.
Handlers parse, call one service, map the result."""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.variable_sets import MAX_SET_DESCRIPTION, VariableSet
from runplane.domain.variables import MAX_DESCRIPTION, category_of
from runplane.services.variable_sets import UNCHANGED
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]

# The name rule is the service's (422 with a pointer).
_Name = Field(min_length=1, max_length=200)


class SetCreate(BaseModel):
    name: StrictStr = _Name
    description: str | None = Field(default=None, max_length=MAX_SET_DESCRIPTION)
    global_: StrictBool = Field(
        default=False,
        alias="global",
        description="Apply the set to every workspace of the organization",
    )


class SetChange(BaseModel):
    """Only the fields given change; ``description: null`` clears it."""

    name: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=MAX_SET_DESCRIPTION)
    global_: StrictBool | None = Field(default=None, alias="global")


class SetVariableBody(BaseModel):
    # Size and name rules are the service's (422, 413 with a pointer).
    value: StrictStr
    sensitive: StrictBool = False
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)


class VariableSetView(oas.Doc):
    # ``global`` is a Python keyword: the field is ``global_``, the reply's key ``global``.
    model_config = ConfigDict(defer_build=True, serialize_by_alias=True)

    id: str
    name: str
    description: str | None
    global_: bool = Field(alias="global")
    workspace_ids: list[str] = Field(
        description="The workspaces the set is applied to by name (a global set applies to "
        "every workspace besides)"
    )
    variable_count: int
    created_at: str
    created_by: str
    updated_at: str
    updated_by: str


class VariableSetDetail(VariableSetView):
    variables: list[oas.VariableView] = Field(
        description="Terraform then environment variables, by name; a sensitive one's value "
        "is always null"
    )


class VariableSetList(oas.Doc):
    variable_sets: list[VariableSetView]


class VariableSetDeleted(oas.Doc):
    id: str
    deleted: Literal[True]


class SetVariableDeleted(oas.Doc):
    variable_set_id: str
    category: Literal["terraform", "env"]
    name: str
    deleted: Literal[True]


def _view(found: VariableSet) -> VariableSetView:
    return VariableSetView.model_validate(found.view())


@router.post(
    "/api/v1/variable-sets",
    responses=oas.responses(201, VariableSetView, *oas.WRITE),
    security=oas.PEOPLE,
)
def create_variable_set(body: SetCreate) -> Reply:
    created = services().variable_sets.create(
        principal(), body.name, description=body.description, global_=body.global_
    )
    return json_reply(201, _view(created))


@router.get(
    "/api/v1/variable-sets",
    responses=oas.responses(200, VariableSetList, *oas.READ),
    security=oas.PEOPLE,
)
def list_variable_sets() -> Reply:
    found = services().variable_sets.list(principal())
    return json_reply(200, VariableSetList(variable_sets=[_view(s) for s in found]))


@router.get(
    "/api/v1/variable-sets/<set_id>",
    responses=oas.responses(200, VariableSetDetail, *oas.READ),
    security=oas.PEOPLE,
)
def show_variable_set(set_id: str) -> Reply:
    detail = services().variable_sets.show(principal(), set_id)
    shown = {
        **detail.variable_set.view(),
        "variables": [v.view() for v in detail.variables],
    }
    return json_reply(200, VariableSetDetail.model_validate(shown))


@router.patch(
    "/api/v1/variable-sets/<set_id>",
    responses=oas.responses(200, VariableSetView, *oas.WRITE),
    security=oas.PEOPLE,
)
def change_variable_set(set_id: str, body: SetChange) -> Reply:
    given = body.model_fields_set
    changes: dict[str, Any] = {}
    if "name" in given and body.name is not None:
        changes["name"] = body.name
    if "description" in given:
        changes["description"] = body.description
    if "global_" in given and body.global_ is not None:
        changes["global_"] = body.global_
    updated = services().variable_sets.update(
        principal(),
        set_id,
        name=changes.get("name", UNCHANGED),
        description=changes.get("description", UNCHANGED),
        global_=changes.get("global_", UNCHANGED),
    )
    return json_reply(200, _view(updated))


@router.delete(
    "/api/v1/variable-sets/<set_id>",
    responses=oas.responses(200, VariableSetDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_variable_set(set_id: str) -> Reply:
    services().variable_sets.delete(principal(), set_id)
    return json_reply(200, VariableSetDeleted(id=set_id, deleted=True))


@router.put(
    "/api/v1/variable-sets/<set_id>/variables/<category>/<name>",
    responses=oas.responses(200, oas.VariableView, *oas.WRITE, also=201),
    security=oas.PEOPLE,
)
def set_set_variable(set_id: str, category: str, name: str, body: SetVariableBody) -> Reply:
    variable, created = services().variable_sets.set_variable(
        principal(),
        set_id,
        category_of(category),
        name,
        body.value,
        sensitive=body.sensitive,
        description=body.description,
    )
    return json_reply(201 if created else 200, oas.VariableView.model_validate(variable.view()))


@router.delete(
    "/api/v1/variable-sets/<set_id>/variables/<category>/<name>",
    responses=oas.responses(200, SetVariableDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_set_variable(set_id: str, category: str, name: str) -> Reply:
    which = category_of(category)
    services().variable_sets.delete_variable(principal(), set_id, which, name)
    deleted = SetVariableDeleted(
        variable_set_id=set_id, category=which.value, name=name, deleted=True
    )
    return json_reply(200, deleted)


@router.put(
    "/api/v1/variable-sets/<set_id>/workspaces/<workspace_id>",
    responses=oas.responses(200, VariableSetView, *oas.WRITE),
    security=oas.PEOPLE,
)
def apply_variable_set(set_id: str, workspace_id: str) -> Reply:
    return json_reply(200, _view(services().variable_sets.apply(principal(), set_id, workspace_id)))


@router.delete(
    "/api/v1/variable-sets/<set_id>/workspaces/<workspace_id>",
    responses=oas.responses(200, VariableSetView, *oas.WRITE),
    security=oas.PEOPLE,
)
def unapply_variable_set(set_id: str, workspace_id: str) -> Reply:
    removed = services().variable_sets.unapply(principal(), set_id, workspace_id)
    return json_reply(200, _view(removed))
