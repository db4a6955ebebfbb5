"""A workspace's auto-destroy: read it, set it, postpone it, clear it
(docs/auto-destroy.md)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain import auto_destroy as rules
from runplane.domain.errors import InvalidInput
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]

ROUTE = "/api/v1/workspaces/<workspace_id>/auto-destroy"
POSTPONE = f"{ROUTE}/actions/postpone"


class AutoDestroyBody(BaseModel):
    """The whole setting: a field left out (or null) is unset. Unknown fields are
    refused, so a misspelt one is not taken for an unset setting."""

    model_config = ConfigDict(extra="forbid")

    destroy_at: StrictStr | None = Field(
        default=None, max_length=64, description="ISO 8601 with its zone"
    )
    destroy_after_inactivity: StrictStr | StrictInt | None = Field(
        default=None,
        description="90m, 36h or 7d (or seconds): since the last state change, 1h to 365d",
    )
    auto_apply: StrictBool = Field(
        default=False, description="The destroy run applies without a person's approval"
    )
    version: StrictInt | None = Field(
        default=None, ge=0, description="Replace only the setting at this version, else 409"
    )


class PostponeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    until: StrictStr | None = Field(default=None, max_length=64, description="ISO 8601")
    by: StrictStr | None = Field(
        default=None, max_length=16, description="90m, 36h or 7d after it is due now"
    )


@router.get(
    ROUTE, responses=oas.responses(200, oas.AutoDestroyView, *oas.READ), security=oas.PEOPLE
)
def get_auto_destroy(workspace_id: str) -> Reply:
    view = services().auto_destroys.get(principal(), workspace_id)
    return json_reply(200, oas.AutoDestroyView.model_validate(view))


@router.put(
    ROUTE, responses=oas.responses(200, oas.AutoDestroyView, *oas.WRITE), security=oas.PEOPLE
)
def put_auto_destroy(workspace_id: str, body: AutoDestroyBody) -> Reply:
    settings = rules.AutoDestroySettings(
        destroy_at=None
        if body.destroy_at is None
        else rules.parse_time(body.destroy_at, "/destroy_at"),
        destroy_after_inactivity=None
        if body.destroy_after_inactivity is None
        else rules.parse_duration(body.destroy_after_inactivity, "/destroy_after_inactivity"),
        auto_apply=body.auto_apply,
    )
    view = services().auto_destroys.set(
        principal(), workspace_id, settings, expected_version=body.version
    )
    return json_reply(200, oas.AutoDestroyView.model_validate(view))


@router.delete(
    ROUTE, responses=oas.responses(200, oas.AutoDestroyView, *oas.WRITE), security=oas.PEOPLE
)
def clear_auto_destroy(workspace_id: str) -> Reply:
    view = services().auto_destroys.clear(principal(), workspace_id)
    return json_reply(200, oas.AutoDestroyView.model_validate(view))


@router.post(
    POSTPONE, responses=oas.responses(200, oas.AutoDestroyView, *oas.WRITE), security=oas.PEOPLE
)
def postpone_auto_destroy(workspace_id: str, body: PostponeBody) -> Reply:
    if (body.until is None) == (body.by is None):
        raise InvalidInput("give until (a time) or by (a length), one of them", "/until")
    if body.until is not None:
        until = rules.parse_time(body.until, "/until")
        view = services().auto_destroys.postpone(principal(), workspace_id, until)
    else:
        by = rules.parse_duration(body.by, "/by")
        view = services().auto_destroys.postpone_by(principal(), workspace_id, by)
    return json_reply(200, oas.AutoDestroyView.model_validate(view))
