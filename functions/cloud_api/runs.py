"""Cloud API routes of remote operations: configuration versions, runs, plans,
applies, policy checks and run actions. Handlers parse, call ``RemoteRuns``, map."""

from __future__ import annotations

from typing import Any, TypeVar

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel

from functions.cloud_api import jsonapi, request
from functions.cloud_api import run_documents as docs
from functions.cloud_api.request import json_reply
from runplane.domain.capabilities import Phase
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.identity import Principal
from runplane.domain.logs import DEFAULT_READ_BYTES
from runplane.domain.paging import Page
from runplane.domain.tfe_runs import APPLY_PREFIX, PLAN_PREFIX, POLICY_CHECK_PREFIX, run_of
from runplane.services.remote_runs import RemoteRun, RunRequest
from runplane.wiring import services

Reply = Response[str]
M = TypeVar("M", bound=BaseModel)
router = Router()  # type: ignore[no-untyped-call]

# What ``include`` may ask for on a run read or list.
INCLUDES = ("plan", "apply", "policy_checks", "configuration_version", "workspace")


def run_body(model: type[M]) -> M:
    """A run action's body: absent reads as empty; pointers use the JSON names."""
    return request.body(model, absent_is_empty=True, aliases=docs.RUN_ALIASES)


def comment() -> str | None:
    parsed = request.json_body()
    if not isinstance(parsed, dict):
        return None
    found: str | None = run_body(docs.CommentBody).comment
    return found


def includes() -> set[str]:
    wanted = {i.strip().replace("-", "_") for i in (request.query("include") or "").split(",")}
    wanted.discard("")
    unknown = sorted(wanted - set(INCLUDES))
    if unknown:
        raise InvalidInput(
            f"include {', '.join(unknown)} is not supported; runs include " + ", ".join(INCLUDES),
            "/include",
        )
    return wanted


def run_document(view: RemoteRun, who: Principal) -> dict[str, Any]:
    return docs.run(view, who)


def included(views: list[RemoteRun], who: Principal, wanted: set[str]) -> list[Any]:
    s = services()
    found: list[Any] = []
    for view in views:
        if "plan" in wanted:
            found.append(docs.plan(view, log_url(view, Phase.PLAN)))
        if "apply" in wanted:
            found.append(docs.apply(view, log_url(view, Phase.APPLY)))
        if "policy_checks" in wanted:
            found.append(docs.policy_check(view))
        if "configuration_version" in wanted and view.configuration_version_id:
            cv = s.remote_runs.configuration_version(who, view.configuration_version_id)
            found.append(docs.configuration_version(cv))
        if "workspace" in wanted:
            ws = s.workspaces.by_id(who, view.run.workspace_id)
            org = s.workspaces.organization_name(ws.organization_id)
            found.append(jsonapi.workspace(ws, org, who))
    return found


def log_url(view: RemoteRun, phase: Phase) -> str:
    return request.base_url() + services().remote_runs.log_url_path(view.run, phase)


def run_reply(view: RemoteRun, who: Principal, status: int = 200) -> Reply:
    document: dict[str, Any] = {"data": run_document(view, who)}
    wanted = includes()
    if wanted:
        document["included"] = included([view], who, wanted)
    return json_reply(status, document)


def view_of(derived: str, prefix: str) -> RemoteRun:
    run_id = run_of(derived, prefix)
    kind = {PLAN_PREFIX: "plan", APPLY_PREFIX: "apply", POLICY_CHECK_PREFIX: "policy check"}
    if run_id is None:
        raise NotFound(kind[prefix], derived)
    try:
        return services().remote_runs.read(request.principal(), run_id)
    except NotFound:
        raise NotFound(kind[prefix], derived) from None


# -- configuration versions ---------------------------------------------------------


@router.post("/api/v2/workspaces/<ws_id>/configuration-versions")
def create_configuration_version(ws_id: str) -> Reply:
    attributes = run_body(docs.ConfigurationVersionBody).data.attributes
    created = services().remote_runs.new_configuration_version(
        request.principal(),
        ws_id,
        speculative=attributes.speculative,
        auto_queue=attributes.auto_queue_runs,
    )
    url = f"{request.base_url()}/_configuration/{created.upload_token}"
    return json_reply(201, {"data": docs.configuration_version(created, url)})


@router.get("/api/v2/configuration-versions/<cv_id>")
def read_configuration_version(cv_id: str) -> Reply:
    found = services().remote_runs.configuration_version(request.principal(), cv_id)
    return json_reply(200, {"data": docs.configuration_version(found)})


@router.put("/_configuration/<token>")
def upload_configuration(token: str) -> Reply:
    services().remote_runs.upload(token, request.raw_body())
    return Response(status_code=200, content_type="application/json", body="{}")


# -- runs -------------------------------------------------------------------------------


@router.post("/api/v2/runs")
def create_run() -> Reply:
    data = run_body(docs.RunBody).data
    a = data.attributes
    options = RunRequest(
        message=a.message,
        is_destroy=a.is_destroy,
        refresh=a.refresh,
        refresh_only=a.refresh_only,
        plan_only=a.plan_only,
        auto_apply=bool(a.auto_apply),
        target_addrs=tuple(a.target_addrs or ()),
        replace_addrs=tuple(a.replace_addrs or ()),
        variables=len(a.variables or ()),
    )
    who = request.principal()
    created = services().remote_runs.create(
        who,
        data.relationships.workspace.data.id,
        data.relationships.configuration_version.data.id,
        options,
    )
    return run_reply(created, who, status=201)


@router.get("/api/v2/runs/<run_id>")
def read_run(run_id: str) -> Reply:
    who = request.principal()
    return run_reply(services().remote_runs.read(who, run_id), who)


@router.get("/api/v2/workspaces/<ws_id>/runs")
def list_runs(ws_id: str) -> Reply:
    who = request.principal()
    wanted = includes()
    s = services()
    # The one paging rule of a workspace's runs (through the run reader), as the run API.
    page = s.runs.page(who, ws_id, *request.page_params())
    views = s.remote_runs.views(page.items)
    document: dict[str, Any] = {
        "data": [run_document(view, who) for view in views],
        "meta": jsonapi.pagination(page),
    }
    if wanted:
        document["included"] = included(views, who, wanted)
    return json_reply(200, document)


@router.post("/api/v2/runs/<run_id>/actions/apply")
def apply_run(run_id: str) -> Reply:
    services().remote_runs.apply(request.principal(), run_id, comment())
    return Response(status_code=202, content_type=jsonapi.JSONAPI, body="")


@router.post("/api/v2/runs/<run_id>/actions/discard")
def discard_run(run_id: str) -> Reply:
    services().remote_runs.discard(request.principal(), run_id, comment())
    return Response(status_code=202, content_type=jsonapi.JSONAPI, body="")


@router.post("/api/v2/runs/<run_id>/actions/cancel")
def cancel_run(run_id: str) -> Reply:
    comment()  # validated, not kept: the cancellation records who asked
    s = services()
    s.remote_runs.cancel(request.principal(), run_id, s.launcher)
    return Response(status_code=202, content_type=jsonapi.JSONAPI, body="")


# -- plans, applies and policy checks --------------------------------------------------


@router.get("/api/v2/plans/<plan_id>")
def read_plan(plan_id: str) -> Reply:
    view = view_of(plan_id, PLAN_PREFIX)
    return json_reply(200, {"data": docs.plan(view, log_url(view, Phase.PLAN))})


@router.get("/api/v2/runs/<run_id>/plan")
def read_run_plan(run_id: str) -> Reply:
    view = services().remote_runs.read(request.principal(), run_id)
    return json_reply(200, {"data": docs.plan(view, log_url(view, Phase.PLAN))})


@router.get("/api/v2/applies/<apply_id>")
def read_apply(apply_id: str) -> Reply:
    view = view_of(apply_id, APPLY_PREFIX)
    return json_reply(200, {"data": docs.apply(view, log_url(view, Phase.APPLY))})


@router.get("/api/v2/runs/<run_id>/apply")
def read_run_apply(run_id: str) -> Reply:
    view = services().remote_runs.read(request.principal(), run_id)
    return json_reply(200, {"data": docs.apply(view, log_url(view, Phase.APPLY))})


@router.get("/_logs/<run_id>/<phase>/<expires>/<grant>")
def read_log(run_id: str, phase: str, expires: str, grant: str) -> Reply:
    if phase not in ("plan", "apply") or not expires.isdigit() or len(expires) > 12:
        raise NotFound("log", "this URL")
    limit = _whole(request.query("limit"), "limit")
    read = services().remote_runs.log_by_grant(
        run_id,
        Phase(phase),
        int(expires),
        grant,
        offset=_whole(request.query("offset"), "offset") or 0,
        limit=min(limit or DEFAULT_READ_BYTES, DEFAULT_READ_BYTES),
    )
    return Response(
        status_code=200,
        content_type="text/plain; charset=utf-8",
        body=read.data.decode("utf-8", "replace"),
    )


@router.get("/api/v2/runs/<run_id>/policy-checks")
def list_policy_checks(run_id: str) -> Reply:
    view = services().remote_runs.read(request.principal(), run_id)
    page = Page.of([view], *request.page_params())
    return json_reply(
        200,
        {
            "data": [docs.policy_check(v) for v in page.items],
            "meta": jsonapi.pagination(page),
        },
    )


@router.get("/api/v2/policy-checks/<check_id>")
def read_policy_check(check_id: str) -> Reply:
    return json_reply(200, {"data": docs.policy_check(view_of(check_id, POLICY_CHECK_PREFIX))})


@router.get("/api/v2/policy-checks/<check_id>/output")
def policy_check_output(check_id: str) -> Reply:
    view = view_of(check_id, POLICY_CHECK_PREFIX)
    return Response(
        status_code=200,
        content_type="text/plain; charset=utf-8",
        body=docs.policy_output(view),
    )


def _whole(raw: str | None, name: str) -> int | None:
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 15:
        raise InvalidInput(f"{name} must be a whole number of bytes", f"/{name}")
    return int(raw)
