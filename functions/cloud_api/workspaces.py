"""Cloud API routes of discovery, organizations, workspaces and locking."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.cloud_api import jsonapi
from functions.cloud_api.request import (
    Reply,
    body,
    document,
    json_body,
    json_reply,
    org_name_of,
    page_params,
    paged,
    principal,
    query,
)
from runplane.domain.auto_destroy import AutoDestroySettings, parse_duration, parse_time
from runplane.domain.entities import Workspace
from runplane.domain.errors import InvalidInput
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.tfe_runs import ExecutionMode
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


# -- discovery and handshake ----------------------------------------------------------


@router.get("/.well-known/terraform.json")
def discovery() -> Reply:
    api = "/api/v2/"
    return json_reply(
        200,
        {"tfe.v2": api, "tfe.v2.1": api, "tfe.v2.2": api, "state.v2": api},
        content_type="application/json",
    )


@router.get("/api/v2/ping")
def ping() -> Reply:
    return Response(status_code=204, headers={"X-RateLimit-Limit": "30"})


@router.get("/api/v2/account/details")
def account_details() -> Reply:
    return document(jsonapi.account(principal()))


@router.get("/api/v2/organizations")
def list_organizations() -> Reply:
    return paged(services().workspaces.organizations(principal()), jsonapi.organization)


@router.get("/api/v2/organizations/<org>")
def read_organization(org: str) -> Reply:
    found = services().workspaces.read_organization(principal(), org)
    return document(jsonapi.organization(found))


@router.get("/api/v2/organizations/<org>/entitlement-set")
def entitlement_set(org: str) -> Reply:
    found = services().workspaces.organization(principal(), org)
    return document(jsonapi.entitlements(found, principal()))


@router.get("/api/v2/organizations/<org>/runs/queue")
def organization_run_queue(org: str) -> Reply:
    # Runs wait per workspace (the writer reservation), and a launch over the
    # organization's limits is refused with 503 rather than queued: there is no
    # organization-wide queue, so it is always empty. Terraform's remote backend reads
    # it while a run is pending or confirmed, and a 404 there fails the operation.
    services().workspaces.organization(principal(), org)
    return paged([], lambda run: run)


# -- workspaces -------------------------------------------------------------------------


@router.get("/api/v2/organizations/<org>/workspaces")
def list_workspaces(org: str) -> Reply:
    tags = tuple(t for t in (query("search[tags]") or "").split(",") if t)
    number, size = page_params()
    who = principal()
    page = services().workspaces.search(
        who, org, search=query("search[name]"), tags=tags, page=number, size=size
    )
    return document([_workspace(who, w, org) for w in page.items], meta=jsonapi.pagination(page))


@router.get("/api/v2/organizations/<org>/workspaces/<name>")
def read_workspace_by_name(org: str, name: str) -> Reply:
    who = principal()
    return document(_workspace(who, services().workspaces.by_name(who, org, name), org))


def _workspace(who: Principal, ws: Workspace, org: str | None = None) -> dict[str, Any]:
    """The workspace's document, with its auto-destroy for people and tokens (a runner's
    engine reads its workspace as its first call, and never needs it)."""
    auto_destroy = None if who.kind is PrincipalKind.RUNNER else services().auto_destroys.of(ws)
    org_name = org if org is not None else org_name_of(ws.organization_id)
    return jsonapi.workspace(ws, org_name, who, auto_destroy)


@router.post("/api/v2/organizations/<org>/workspaces")
def create_workspace(org: str) -> Reply:
    from functions.cloud_api.body_models import WorkspaceBody

    who = principal()
    attributes = body(WorkspaceBody).data.attributes
    if not attributes.name:
        raise InvalidInput("a workspace needs a name", "/data/attributes/name")
    # Checked before anything is written: a refused auto-destroy creates nothing.
    arm = _auto_destroy_change(who, None, attributes)
    created = services().workspaces.create(
        who,
        org,
        attributes.name,
        terraform_version=attributes.terraform_version,
        description=attributes.description,
        tags=tuple(attributes.tag_names or ()),
        execution_mode=_execution_mode(attributes.execution_mode) or ExecutionMode.LOCAL,
    )
    if arm is not None:
        arm(created)
    return document(_workspace(who, created, org), status=201)


def _update(who: Principal, ws_id: str) -> Reply:
    from functions.cloud_api.body_models import WorkspaceBody

    attributes = body(WorkspaceBody).data.attributes
    ws = services().workspaces.by_id(who, ws_id)
    # A caller who may not change the workspace learns nothing from how its body would
    # have been judged: refused first (the service checks again, as for every caller).
    who.require(Permission.WORKSPACE_UPDATE, ws.id)
    mode = _execution_mode(attributes.execution_mode)
    # Checked before anything is written: a refused auto-destroy changes nothing.
    arm = _auto_destroy_change(who, ws, attributes)
    if attributes.name and attributes.name != ws.name:
        raise InvalidInput("renaming a workspace is not supported", "/data/attributes/name")
    updated = services().workspaces.update(
        who,
        ws,
        terraform_version=attributes.terraform_version,
        description=attributes.description,
        tags=tuple(attributes.tag_names) if attributes.tag_names is not None else None,
        execution_mode=mode,
    )
    if arm is not None:
        arm(updated)
    return document(_workspace(who, updated))


def _auto_destroy_change(
    who: Principal, ws: Workspace | None, attributes: Any
) -> Callable[[Workspace], object] | None:
    """HCP Terraform's ``auto-destroy-at`` and ``auto-destroy-activity-duration``, when
    the body names either, as the change to make to the workspace once the rest is
    written (``ws``: the workspace as read, None for one being created): both null
    clears the auto-destroy; otherwise it is set to them (keeping its auto-apply
    choice), as ``PUT /api/v1/workspaces/{id}/auto-destroy``. Checked before anything
    is written."""
    named = attributes.model_fields_set & {"auto_destroy_at", "auto_destroy_activity_duration"}
    if not named:
        return None
    if ws is not None:
        # A workspace being created is its creator's to set up (workspace:create).
        who.require(Permission.WORKSPACE_UPDATE, ws.id)
    auto_destroys = services().auto_destroys
    current = {} if ws is None else auto_destroys.of(ws)
    at = attributes.auto_destroy_at if "auto_destroy_at" in named else current.get("destroy_at")
    inactivity = (
        attributes.auto_destroy_activity_duration
        if "auto_destroy_activity_duration" in named
        else current.get("destroy_after_inactivity")
    )
    if at is None and inactivity is None:
        if not current.get("armed"):
            return None
        return lambda workspace: auto_destroys.clear(who, workspace.id)
    try:
        settings = AutoDestroySettings(
            destroy_at=None if at is None else parse_time(at, "/destroy_at"),
            destroy_after_inactivity=None
            if inactivity is None
            else parse_duration(inactivity, "/destroy_after_inactivity"),
            auto_apply=bool(current.get("auto_apply")),
        ).checked(services().clock.now())
    except InvalidInput as refused:
        raise InvalidInput(refused.message, _TFE_POINTERS.get(refused.pointer or "")) from None
    return lambda workspace: auto_destroys.set(who, workspace.id, settings)


_TFE_POINTERS = {
    "/destroy_at": "/data/attributes/auto-destroy-at",
    "/destroy_after_inactivity": "/data/attributes/auto-destroy-activity-duration",
}


@router.get("/api/v2/workspaces/<ws_id>")
def read_workspace(ws_id: str) -> Reply:
    who = principal()
    return document(_workspace(who, services().workspaces.by_id(who, ws_id)))


@router.patch("/api/v2/workspaces/<ws_id>")
def update_workspace(ws_id: str) -> Reply:
    return _update(principal(), ws_id)


@router.patch("/api/v2/organizations/<org>/workspaces/<name>")
def update_workspace_by_name(org: str, name: str) -> Reply:
    who = principal()
    return _update(who, services().workspaces.by_name(who, org, name).id)


# -- deletion -----------------------------------------------------------------------------


def _safe_delete(who: Principal, ws_id: str) -> Reply:
    """TFE's deletions, both the safe one: refused (409) while the workspace's state
    still manages resources; there is no forced deletion here (runplane workspace
    delete --force --reason is the audited one)."""
    services().workspace_deletion.delete(who, ws_id, force=False, reason=None)
    return Response(status_code=204)


@router.delete("/api/v2/organizations/<org>/workspaces/<name>")
def delete_workspace_by_name(org: str, name: str) -> Reply:
    who = principal()
    return _safe_delete(who, services().workspaces.by_name(who, org, name).id)


@router.post("/api/v2/workspaces/<ws_id>/actions/safe-delete")
def safe_delete_workspace(ws_id: str) -> Reply:
    return _safe_delete(principal(), ws_id)


# -- locking ----------------------------------------------------------------------------


def _lock_reason() -> str | None:
    parsed = json_body()
    if not isinstance(parsed, dict):
        return None
    # The CLI wraps the reason in JSON:API; pytfe sends it bare.
    data = parsed.get("data")
    if isinstance(data, dict):
        reason = (data.get("attributes") or {}).get("reason")
    else:
        reason = parsed.get("reason")
    return str(reason)[:500] if reason else None


def _workspace_response(who: Principal, action: Callable[[], Any]) -> Reply:
    ws = action()
    return document(jsonapi.workspace(ws, org_name_of(ws.organization_id), who))


@router.post("/api/v2/workspaces/<ws_id>/actions/lock")
def lock(ws_id: str) -> Reply:
    who = principal()
    reason = _lock_reason()
    return _workspace_response(who, lambda: services().workspaces.lock(who, ws_id, reason))


@router.post("/api/v2/workspaces/<ws_id>/actions/unlock")
def unlock(ws_id: str) -> Reply:
    who = principal()
    return _workspace_response(who, lambda: services().workspaces.unlock(who, ws_id))


@router.post("/api/v2/workspaces/<ws_id>/actions/force-unlock")
def force_unlock(ws_id: str) -> Reply:
    who = principal()
    return _workspace_response(who, lambda: services().workspaces.force_unlock(who, ws_id))


def _execution_mode(mode: str | None) -> ExecutionMode | None:
    if mode is None:
        return None
    try:
        return ExecutionMode(mode)
    except ValueError:
        raise InvalidInput(
            "a workspace's execution mode is 'local' (the client runs the engine) or "
            "'remote' (plan and apply create managed runs here)",
            "/data/attributes/execution-mode",
        ) from None
