"""JSON:API documents in the shapes TFE clients (go-tfe, pytfe) decode (request bodies:
``body_models``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane.domain.entities import Organization, Workspace
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.paging import Page
from runplane.domain.state import FINALIZED, Output, StateVersion, output_id, simple_type
from runplane.domain.tfe_runs import ExecutionMode

JSONAPI = "application/vnd.api+json"


def timestamp(value: datetime) -> str:
    """go-tfe's JSON:API decoder accepts exactly ``YYYY-MM-DDTHH:MM:SSZ``."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- documents --------------------------------------------------------------------------


def organization(org: Organization) -> dict[str, Any]:
    return {
        "id": org.name,
        "type": "organizations",
        "attributes": {
            "name": org.name,
            "external-id": org.id,
            "created-at": timestamp(org.created_at),
            "email": "",
            "collaborator-auth-policy": "password",
        },
    }


def runs_remotely(principal: Principal) -> bool:
    """Whether remote execution is offered to this caller. Never to a sandbox: the
    engine inside a managed run uses the same backend and must run its plan itself."""
    return principal.kind is not PrincipalKind.RUNNER


def entitlements(org: Organization, principal: Principal) -> dict[str, Any]:
    return {
        "id": org.id,
        "type": "entitlement-sets",
        "attributes": {
            # Remote operations are per workspace (execution mode); local is the default.
            "operations": runs_remotely(principal),
            "state-storage": True,
            "audit-logging": True,
            "private-module-registry": False,
            "sentinel": False,
            "teams": False,
            "vcs-integrations": False,
            "cost-estimation": False,
            "run-tasks": False,
            "configuration-designer": False,
            "agents": False,
            "sso": False,
        },
    }


def account(principal: Principal) -> dict[str, Any]:
    return {
        "id": principal.id,
        "type": "users",
        "attributes": {
            "username": principal.display.removeprefix("User "),
            "email": "",
            "is-service-account": principal.kind.value != "user",
            "two-factor": {"enabled": False, "verified": False},
        },
    }


def workspace(
    ws: Workspace,
    org_name: str,
    principal: Principal,
    auto_destroy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``auto_destroy``: the workspace's auto-destroy view (``AutoDestroys.view``), if
    the caller read it."""
    can = principal.permissions_in(ws.id).__contains__
    armed = auto_destroy if auto_destroy and auto_destroy.get("armed") else {}
    remote = ws.execution_mode == ExecutionMode.REMOTE and runs_remotely(principal)
    relationships: dict[str, Any] = {
        "organization": {"data": {"id": org_name, "type": "organizations"}},
        "current-state-version": {
            "data": {"id": ws.current_state_version_id, "type": "state-versions"}
            if ws.current_state_version_id
            else None
        },
    }
    # A run's writer authority locks the workspace for everyone else from before
    # it plans, not only while its apply holds the lock: say so, and name the run.
    holding_run = ws.lock_run_id or ws.writer_run_id
    if holding_run:
        relationships["locked-by"] = {"data": {"id": holding_run, "type": "runs"}}
        # Terraform's remote backend counts the runs a pending run waits behind down
        # the workspace's run list, from that run to this one (docs/cloud-api.md).
        relationships["current-run"] = {"data": {"id": holding_run, "type": "runs"}}
    elif ws.lock_holder:
        relationships["locked-by"] = {
            "data": {"id": ws.lock_holder.split(":", 1)[-1], "type": "users"}
        }
    return {
        "id": ws.id,
        "type": "workspaces",
        "attributes": {
            "name": ws.name,
            "description": ws.description or "",
            "locked": ws.locked or holding_run is not None,
            "execution-mode": ws.execution_mode,
            "operations": remote,
            "auto-apply": False,
            # Remote operations check the engine version; unpinned runs the deployment's.
            "terraform-version": ws.terraform_version or ("latest" if remote else ""),
            "tag-names": list(ws.tag_names),
            "created-at": timestamp(ws.created_at),
            "updated-at": timestamp(ws.created_at),
            "working-directory": "",
            "resource-count": 0,
            "global-remote-state": False,
            # Set or postponed time and inactivity (HCP Terraform's ephemeral workspaces).
            "auto-destroy-at": armed.get("destroy_at"),
            "auto-destroy-activity-duration": armed.get("destroy_after_inactivity"),
            "actions": {"is-destroyable": can(Permission.WORKSPACE_DELETE)},
            "permissions": {
                "can-update": can(Permission.WORKSPACE_UPDATE),
                # Deleting the workspace (refused while its state manages resources).
                "can-destroy": can(Permission.WORKSPACE_DELETE),
                "can-queue-run": can(Permission.RUN_CREATE),
                "can-queue-apply": remote and can(Permission.RUN_APPROVE),
                # Destroy runs apply like any other (is-destroy, docs/runs.md).
                "can-queue-destroy": remote and can(Permission.RUN_APPROVE),
                "can-lock": can(Permission.WORKSPACE_LOCK),
                "can-unlock": can(Permission.WORKSPACE_LOCK),
                "can-force-unlock": can(Permission.WORKSPACE_FORCE_UNLOCK),
                "can-read-settings": can(Permission.WORKSPACE_READ),
                "can-read-state-versions": can(Permission.STATE_READ),
                "can-create-state-versions": can(Permission.STATE_WRITE),
                "can-update-variable": False,
            },
        },
        "relationships": relationships,
    }


def state_version(
    sv: StateVersion,
    base_url: str,
    *,
    upload_urls: tuple[str, str] | None = None,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "serial": sv.serial,
        "lineage": sv.lineage,
        "md5": sv.md5,
        "size": sv.size or 0,
        "status": sv.status,
        "created-at": timestamp(sv.created_at),
        "resources-processed": sv.status == FINALIZED,
        "state-version": 4,
    }
    if sv.status == FINALIZED:
        attributes["hosted-state-download-url"] = (
            f"{base_url}/api/v2/state-versions/{sv.id}/download"
        )
    if sv.json_artifact_id:
        attributes["hosted-json-state-download-url"] = (
            f"{base_url}/api/v2/state-versions/{sv.id}/json-download"
        )
    if upload_urls is not None:
        attributes["hosted-state-upload-url"] = upload_urls[0]
        attributes["hosted-json-state-upload-url"] = upload_urls[1]
    relationships: dict[str, Any] = {
        "workspace": {"data": {"id": sv.workspace_id, "type": "workspaces"}},
    }
    provenance = sv.provenance or {}
    if provenance.get("run_id"):
        relationships["run"] = {"data": {"id": provenance["run_id"], "type": "runs"}}
    return {
        "id": sv.id,
        "type": "state-versions",
        "attributes": attributes,
        "relationships": relationships,
    }


def output(sv: StateVersion, out: Output, *, reveal: bool = False) -> dict[str, Any]:
    """As TFE does, listings withhold sensitive values (``null``); reading one output
    by its ID reveals it to the state reader, who may download the whole state anyway."""
    wsout_id = output_id(sv.id, out.name)
    return {
        "id": wsout_id,
        "type": "state-version-outputs",
        "attributes": {
            "name": out.name,
            "sensitive": out.sensitive,
            "type": simple_type(out.type),
            "detailed-type": out.type,
            "value": out.value if reveal or not out.sensitive else None,
        },
        "relationships": {
            "state-version": {"data": {"id": sv.id, "type": "state-versions"}},
        },
        "links": {"self": f"/api/v2/state-version-outputs/{wsout_id}"},
    }


def pagination(page: Page[Any]) -> dict[str, Any]:
    return {
        "pagination": {
            "current-page": page.number,
            "page-size": page.size,
            "prev-page": page.number - 1 if page.number > 1 else None,
            "next-page": page.number + 1 if page.number < page.pages else None,
            "total-pages": page.pages,
            "total-count": page.total,
        }
    }


def error(status: int, title: str, detail: str, pointer: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"status": str(status), "title": title, "detail": detail}
    if pointer:
        item["source"] = {"pointer": pointer}
    return {"errors": [item]}
