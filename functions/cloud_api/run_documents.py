"""JSON:API documents of remote operations (runs, plans, applies, policy checks,
configuration versions) in the shapes go-tfe and pytfe decode, and the run body."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from functions.cloud_api.jsonapi import timestamp
from runplane.domain.identity import Permission, Principal
from runplane.domain.tfe_runs import (
    APPLY_PREFIX,
    PLAN_PREFIX,
    POLICY_CHECK_PREFIX,
    apply_status,
    derived_id,
    is_cancelable,
    is_confirmable,
    is_discardable,
    plan_status,
    policy_check_status,
    tfe_status,
)
from runplane.services.remote_runs import ConfigurationView, RemoteRun


def _ref(kind: str, ident: str | None) -> dict[str, Any]:
    return {"data": {"id": ident, "type": kind} if ident else None}


def configuration_version(cv: ConfigurationView, upload_url: str | None = None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "status": cv.status,
        "source": "tfe-api",
        "speculative": cv.speculative,
        "auto-queue-runs": False,
        "error": None,
        "error-message": None,
    }
    if upload_url is not None:
        attributes["upload-url"] = upload_url
    return {
        "id": cv.id,
        "type": "configuration-versions",
        "attributes": attributes,
        "relationships": {"workspace": _ref("workspaces", cv.workspace_id)},
    }


def run(view: RemoteRun, principal: Principal) -> dict[str, Any]:
    r, facts = view.run, view.facts
    can = principal.permissions_in(r.workspace_id).__contains__
    attributes: dict[str, Any] = {
        "status": tfe_status(facts).value,
        "has-changes": view.has_changes,
        "is-destroy": view.options.destroy,
        "message": view.message or "",
        "refresh": True,
        "refresh-only": view.options.refresh_only,
        "plan-only": not r.kind.may_apply,
        "auto-apply": False,
        "source": "tfe-api",
        "created-at": timestamp(r.created_at),
        # There is no organization queue (a launch over its limits is refused, not
        # queued): a run waits only in its workspace, which ``pending`` says.
        "position-in-queue": 0,
        "target-addrs": list(view.options.targets) or None,
        "replace-addrs": list(view.options.replacements) or None,
        "actions": {
            "is-cancelable": is_cancelable(facts),
            "is-confirmable": is_confirmable(facts),
            "is-discardable": is_discardable(facts),
            "is-force-cancelable": False,
        },
        "permissions": {
            "can-apply": can(Permission.RUN_APPROVE),
            "can-cancel": can(Permission.RUN_CANCEL),
            "can-discard": can(Permission.RUN_APPROVE),
            "can-force-cancel": False,
            "can-force-execute": False,
        },
        # Runplane's own status and why the run is there (an errored run says why), and
        # the run a pending one waits behind.
        "runplane-status": r.status.value,
        "status-reason": r.status_reason,
        "runplane-waiting-for": facts.waiting_for,
    }
    return {
        "id": r.id,
        "type": "runs",
        "attributes": attributes,
        "relationships": {
            "workspace": _ref("workspaces", r.workspace_id),
            "configuration-version": _ref("configuration-versions", view.configuration_version_id),
            "plan": _ref("plans", derived_id(PLAN_PREFIX, r.id)),
            "apply": _ref("applies", derived_id(APPLY_PREFIX, r.id)),
            # One policy check per run: the client waits on it after the plan.
            "policy-checks": {
                "data": [{"id": derived_id(POLICY_CHECK_PREFIX, r.id), "type": "policy-checks"}]
            },
        },
    }


def _counts(view: RemoteRun) -> dict[str, int]:
    summary = view.summary
    return {
        "resource-additions": int(summary.get("adds") or 0),
        "resource-changes": int(summary.get("changes") or 0),
        "resource-destructions": int(summary.get("destroys") or 0),
        "resource-imports": 0,
    }


def plan(view: RemoteRun, log_url: str) -> dict[str, Any]:
    plan_id = derived_id(PLAN_PREFIX, view.run.id)
    return {
        "id": plan_id,
        "type": "plans",
        "attributes": {
            "status": plan_status(view.facts),
            "has-changes": view.has_changes,
            "log-read-url": log_url,
            **_counts(view),
        },
        "relationships": {"run": _ref("runs", view.run.id)},
    }


def apply(view: RemoteRun, log_url: str) -> dict[str, Any]:
    apply_id = derived_id(APPLY_PREFIX, view.run.id)
    counts = _counts(view) if view.facts.applied else dict.fromkeys(_counts(view), 0)
    return {
        "id": apply_id,
        "type": "applies",
        "attributes": {
            "status": apply_status(view.facts),
            "log-read-url": log_url,
            **counts,
        },
        "relationships": {"run": _ref("runs", view.run.id)},
    }


def _tally(view: RemoteRun) -> dict[str, int]:
    results = (view.policy or {}).get("results") or []
    failed = [r for r in results if r.get("outcome") != "passed"]
    by = {
        enforcement: sum(1 for r in failed if r.get("enforcement") == enforcement)
        for enforcement in ("advisory", "soft_mandatory", "hard_mandatory")
    }
    return {
        "passed": len(results) - len(failed),
        "advisory-failed": by["advisory"],
        "soft-failed": by["soft_mandatory"],
        "hard-failed": len(failed) - by["advisory"] - by["soft_mandatory"],
        "total-failed": len(failed),
    }


def policy_check(view: RemoteRun) -> dict[str, Any]:
    status = policy_check_status(view.facts)
    tally = _tally(view)
    return {
        "id": derived_id(POLICY_CHECK_PREFIX, view.run.id),
        "type": "policy-checks",
        "attributes": {
            "status": status,
            "scope": "organization",
            "result": {**tally, "result": status in ("passed", "overridden"), "duration": 0},
            # Soft failures are overridden through the Runplane API (with a reason).
            "actions": {"is-overridable": False},
            "permissions": {"can-override": False},
        },
        "relationships": {"run": _ref("runs", view.run.id)},
    }


def policy_output(view: RemoteRun) -> str:
    """The policy check's text, as the client prints it under "policy check"."""
    policy = view.policy or {}
    results = policy.get("results") or []
    lines = [f"Runplane policy check: {policy_check_status(view.facts)}"]
    if not results:
        lines.append("No policy set is attached to this workspace.")
    for result in results:
        lines.append(
            f"  {result.get('policy_set')}/{result.get('policy')} "
            f"({result.get('enforcement')}): {result.get('outcome')}"
        )
        lines.extend(f"    - {message}" for message in result.get("messages") or [])
    return "\n".join(lines) + "\n"


# -- request bodies ---------------------------------------------------------------------


class _Attributes(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class ConfigurationVersionAttributes(_Attributes):
    auto_queue_runs: StrictBool = Field(default=True, alias="auto-queue-runs")
    speculative: StrictBool = False


class ConfigurationVersionData(BaseModel):
    type: str | None = None
    attributes: ConfigurationVersionAttributes = ConfigurationVersionAttributes()


class ConfigurationVersionBody(BaseModel):
    data: ConfigurationVersionData = ConfigurationVersionData()


class _Ref(BaseModel):
    id: StrictStr = Field(min_length=1, max_length=64)
    type: str | None = None


class _Relationship(BaseModel):
    data: _Ref


class RunRelationships(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")
    workspace: _Relationship
    configuration_version: _Relationship = Field(alias="configuration-version")


class RunAttributes(_Attributes):
    message: StrictStr | None = None
    is_destroy: StrictBool = Field(default=False, alias="is-destroy")
    refresh: StrictBool = True
    refresh_only: StrictBool = Field(default=False, alias="refresh-only")
    plan_only: StrictBool = Field(default=False, alias="plan-only")
    auto_apply: StrictBool | None = Field(default=None, alias="auto-apply")
    target_addrs: list[StrictStr] | None = Field(default=None, alias="target-addrs")
    replace_addrs: list[StrictStr] | None = Field(default=None, alias="replace-addrs")
    variables: list[Any] | None = None


class RunData(BaseModel):
    type: str | None = None
    attributes: RunAttributes = RunAttributes()
    relationships: RunRelationships


class RunBody(BaseModel):
    data: RunData


class CommentBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    comment: StrictStr | None = Field(default=None, max_length=1000)


RUN_ALIASES = {
    "is_destroy": "is-destroy",
    "refresh_only": "refresh-only",
    "plan_only": "plan-only",
    "auto_apply": "auto-apply",
    "target_addrs": "target-addrs",
    "replace_addrs": "replace-addrs",
    "configuration_version": "configuration-version",
    "auto_queue_runs": "auto-queue-runs",
}
