"""Workspaces and their configuration uploads."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.entities import Workspace, valid_tags
from runplane.domain.second_approval import MAX_DESTROYS_OVER, SecondApprovalRule
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class WorkspaceCreate(BaseModel):
    name: str = Field(min_length=1, max_length=90)
    terraform_version: str | None = Field(default=None, max_length=40)
    # What policies see as the workspace's tags (Spacelift's stack labels).
    tags: list[str] = Field(default_factory=list)


class SecondApprovalBody(BaseModel):
    destroy_runs: StrictBool = False
    destroys_over: StrictInt | None = Field(default=None, ge=0, le=MAX_DESTROYS_OVER)
    separation_of_duties: StrictBool = False


class WorkspaceUpdate(BaseModel):
    # Strict: lax parsing would read `true` as a one-second window.
    approval_window_seconds: StrictInt | None = Field(default=None, ge=1, le=30 * 24 * 3600)
    # The whole list: [] clears it; left out, the tags stay as they are.
    tags: list[str] | None = None
    # The whole rule: left out, it stays as it is.
    second_approval: SecondApprovalBody | None = None


@router.post(
    "/api/v1/workspaces",
    responses=oas.responses(201, oas.WorkspaceCreated, *oas.WRITE),
    security=oas.PEOPLE,
)
def create_workspace(body: WorkspaceCreate) -> Reply:
    who = principal()
    s = services()
    org = s.workspaces.organization_name(who.organization_id)
    ws = s.workspaces.create(
        who,
        org,
        body.name,
        terraform_version=body.terraform_version,
        tags=valid_tags(tuple(body.tags), "/tags"),
    )
    return json_reply(
        201, oas.WorkspaceCreated(id=ws.id, name=ws.name, organization=org, tags=list(ws.tag_names))
    )


@router.patch(
    "/api/v1/workspaces/<workspace_id>",
    responses=oas.responses(200, oas.WorkspaceUpdated, *oas.WRITE),
    security=oas.PEOPLE,
)
def update_workspace(workspace_id: str, body: WorkspaceUpdate) -> Reply:
    who = principal()
    s = services()
    ws = s.workspaces.update(
        who,
        s.workspaces.by_id(who, workspace_id),
        approval_window_seconds=body.approval_window_seconds,
        tags=None if body.tags is None else valid_tags(tuple(body.tags), "/tags"),
        second_approval=None
        if body.second_approval is None
        else SecondApprovalRule(**body.second_approval.model_dump()),
    )
    return json_reply(
        200,
        oas.WorkspaceUpdated(
            id=ws.id,
            name=ws.name,
            approval_window_seconds=ws.approval_window_seconds,
            tags=list(ws.tag_names),
            second_approval=oas.SecondApprovalView(**ws.second_approval.to_body()),
        ),
    )


class WorkspaceDelete(BaseModel):
    """How to delete: left out, a safe deletion (refused while resources remain)."""

    model_config = ConfigDict(extra="forbid")

    force: StrictBool = Field(
        default=False,
        description="Delete even though its current state manages resources (never while "
        "a run or a lock uses it); needs a reason",
    )
    reason: StrictStr | None = Field(
        default=None, description="Why (1-500 characters, audited); required with force"
    )


@router.delete(
    "/api/v1/workspaces/<workspace_id>",
    responses=oas.responses(200, oas.WorkspaceDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_workspace(workspace_id: str, body: WorkspaceDelete | None = None) -> Reply:
    given = body or WorkspaceDelete()
    deleted = services().workspace_deletion.delete(
        principal(), workspace_id, force=given.force, reason=given.reason
    )
    return json_reply(
        200,
        oas.WorkspaceDeleted(
            id=deleted.id,
            name=deleted.name,
            deleted=True,
            deleted_at=deleted.deleted_at.isoformat(),
            forced=deleted.forced,
            resources=deleted.resources,
        ),
    )


@router.post(
    "/api/v1/workspaces/<workspace_id>/configuration-versions",
    responses=oas.responses(201, oas.ConfigurationUpload, *oas.WRITE),
    security=oas.PEOPLE,
)
def new_configuration(workspace_id: str) -> Reply:
    upload = services().runs.new_configuration_upload(principal(), workspace_id)
    return json_reply(
        201,
        oas.ConfigurationUpload(
            id=upload.id, upload_url=upload.upload_url, expires_at=upload.expires_at.isoformat()
        ),
    )


@router.post(
    "/api/v1/configuration-versions/<cv_id>/actions/finalize",
    responses=oas.responses(200, oas.Configuration, *oas.WRITE),
    security=oas.PEOPLE,
)
def finalize_configuration(cv_id: str) -> Reply:
    return json_reply(200, services().runs.finalize_configuration(principal(), cv_id))


def _workspace(ws: Workspace) -> oas.WorkspaceView:
    drift = services().schedules.drift_of(ws.id)
    return oas.WorkspaceView(
        id=ws.id,
        name=ws.name,
        created_at=ws.created_at.isoformat(),
        description=ws.description,
        tags=list(ws.tag_names),
        terraform_version=ws.terraform_version,
        approval_window_seconds=ws.approval_window_seconds,
        locked=ws.locked,
        writer_run_id=ws.writer_run_id,
        queue_length=ws.queue_length,
        current_state_version_id=ws.current_state_version_id,
        drift=None if drift is None else oas.DriftView.model_validate(drift),
        second_approval=oas.SecondApprovalView(**ws.second_approval.to_body()),
    )


@router.get(
    "/api/v1/workspaces",
    responses=oas.responses(200, oas.WorkspaceList, *oas.AUTHENTICATED),
    security=oas.PEOPLE,
)
def list_workspaces() -> Reply:
    found = services().workspaces.list_own(principal())
    return json_reply(200, oas.WorkspaceList(workspaces=[_workspace(ws) for ws in found]))


@router.get(
    "/api/v1/workspaces/<workspace_id>",
    responses=oas.responses(200, oas.WorkspaceView, *oas.READ),
    security=oas.PEOPLE,
)
def get_workspace(workspace_id: str) -> Reply:
    return json_reply(200, _workspace(services().workspaces.by_id(principal(), workspace_id)))
