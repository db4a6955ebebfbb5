"""A workspace's cloud settings: read them, replace them whole, clear them
(docs/credentials.md). The external ID is write-only: never in a reply."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.cloud_settings import CloudSettingsChange, settings_view
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]

ROUTE = "/api/v1/workspaces/<workspace_id>/cloud-settings"
# Longer than any valid value (an IAM role ARN with a 512-character path); the rules
# themselves are the domain's (422 with a pointer).
_TEXT = 2048


class CloudSettingsBody(BaseModel):
    """The whole settings: a field left out (or null) is unset. Unknown fields are
    refused, so a misspelt one is not taken for an unset setting."""

    model_config = ConfigDict(extra="forbid")

    aws_plan_role_arn: StrictStr | None = Field(default=None, max_length=_TEXT)
    aws_apply_role_arn: StrictStr | None = Field(default=None, max_length=_TEXT)
    aws_external_id: StrictStr | None = Field(
        default=None, max_length=_TEXT, description="Write-only: never returned"
    )
    keep_aws_external_id: StrictBool = Field(
        default=False, description="Keep the external ID stored (it is never read back)"
    )
    aws_session_duration: StrictInt | None = Field(default=None, description="Seconds")
    aws_region: StrictStr | None = Field(default=None, max_length=_TEXT)
    gcp_audience: StrictStr | None = Field(default=None, max_length=_TEXT)
    azure_audience: StrictStr | None = Field(default=None, max_length=_TEXT)
    azure_client_id: StrictStr | None = Field(default=None, max_length=_TEXT)
    azure_tenant_id: StrictStr | None = Field(default=None, max_length=_TEXT)
    version: StrictInt | None = Field(
        default=None,
        ge=0,
        description="Replace only the settings at this version (0: none yet), else 409",
    )


@router.get(
    ROUTE,
    responses=oas.responses(200, oas.CloudSettingsView, *oas.READ),
    security=oas.PEOPLE,
)
def get_cloud_settings(workspace_id: str) -> Reply:
    stored = services().cloud_settings.get(principal(), workspace_id)
    return json_reply(
        200, oas.CloudSettingsView.model_validate(settings_view(workspace_id, stored))
    )


@router.put(
    ROUTE,
    responses=oas.responses(200, oas.CloudSettingsView, *oas.WRITE),
    security=oas.PEOPLE,
)
def put_cloud_settings(workspace_id: str, body: CloudSettingsBody) -> Reply:
    change = CloudSettingsChange(**body.model_dump(exclude={"version"}))
    stored = services().cloud_settings.put(
        principal(), workspace_id, change, expected_version=body.version
    )
    return json_reply(
        200, oas.CloudSettingsView.model_validate(settings_view(workspace_id, stored))
    )


@router.delete(
    ROUTE,
    responses=oas.responses(200, oas.CloudSettingsView, *oas.WRITE),
    security=oas.PEOPLE,
)
def clear_cloud_settings(workspace_id: str) -> Reply:
    stored = services().cloud_settings.clear(principal(), workspace_id)
    return json_reply(
        200, oas.CloudSettingsView.model_validate(settings_view(workspace_id, stored))
    )
