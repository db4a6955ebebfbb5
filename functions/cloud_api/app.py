"""The TFE-compatible Cloud API: the subset native OpenTofu/Terraform clients use for
state and locking, on Powertools' REST resolver. Handlers parse, call one
service, and map the result; every rule lives in ``runplane.services``."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel, ValidationError

from functions.bodies import parse_json
from functions.cloud_api import jsonapi
from functions.cloud_api import runs as remote_runs
from functions.isolation import IsolatedRestResolver, ResolverPool
from runplane.domain.errors import InvalidInput, RunplaneError
from runplane.domain.identity import Principal
from runplane.domain.paging import Page
from runplane.domain.tfe_runs import ExecutionMode
from runplane.services.identity import decode_principal
from runplane.services.state import PendingUpload
from runplane.wiring import services

API_VERSION = "2.5"
Reply = Response[str]


def _json(status: int, body: Any, content_type: str = jsonapi.JSONAPI) -> Reply:
    return Response(status_code=status, content_type=content_type, body=json.dumps(body))


def _document(data: Any, status: int = 200, **top: Any) -> Reply:
    return _json(status, {"data": data, **top})


def build_app() -> IsolatedRestResolver:
    app = IsolatedRestResolver()

    def principal() -> Principal:
        return decode_principal(app.current_event.request_context.raw_event.get("authorizer"))

    def base_url() -> str:
        """Absolute URLs for clients, as they reached us (stage prefix included)."""
        event = app.current_event
        host = event.headers.get("Host") or "localhost"
        proto = event.headers.get("X-Forwarded-Proto") or "https"
        full_path = str(event.request_context.raw_event.get("path") or event.path)
        prefix = full_path[: -len(event.path)] if full_path.endswith(event.path) else ""
        return f"{proto}://{host}{prefix}"

    def json_body() -> Any:
        event = app.current_event
        return parse_json(event.body, bool(event.is_base64_encoded))

    def body(model: type[BaseModel]) -> Any:
        parsed = json_body()
        try:
            return model.model_validate(parsed)
        except ValidationError as invalid:
            pointer, message = jsonapi.pointer_of(invalid)
            raise InvalidInput(message, pointer) from None

    def raw_body() -> bytes:
        event = app.current_event
        if event.is_base64_encoded:
            return base64.b64decode(event.body or "")
        return (event.body or "").encode("utf-8")

    def page_params() -> tuple[int, int]:
        query = app.current_event.get_query_string_value
        try:
            return int(query("page[number]") or 1), int(query("page[size]") or 20)
        except ValueError:
            raise InvalidInput("page[number] and page[size] must be integers") from None

    def paged(everything: list[Any], render: Callable[[Any], Any]) -> Reply:
        page = Page.of(everything, *page_params())
        return _document([render(item) for item in page.items], meta=jsonapi.pagination(page))

    def org_name_of(org_id: str) -> str:
        return services().workspaces.organization_name(org_id)

    # -- discovery and handshake ----------------------------------------------------------

    @app.get("/.well-known/terraform.json")
    def discovery() -> Reply:
        api = "/api/v2/"
        return _json(
            200,
            {"tfe.v2": api, "tfe.v2.1": api, "tfe.v2.2": api, "state.v2": api},
            content_type="application/json",
        )

    @app.get("/api/v2/ping")
    def ping() -> Reply:
        return Response(status_code=204, headers={"X-RateLimit-Limit": "30"})

    @app.get("/api/v2/account/details")
    def account_details() -> Reply:
        return _document(jsonapi.account(principal()))

    @app.get("/api/v2/organizations")
    def list_organizations() -> Reply:
        return paged(services().workspaces.organizations(principal()), jsonapi.organization)

    @app.get("/api/v2/organizations/<org>")
    def read_organization(org: str) -> Reply:
        found = services().workspaces.read_organization(principal(), org)
        return _document(jsonapi.organization(found))

    @app.get("/api/v2/organizations/<org>/entitlement-set")
    def entitlement_set(org: str) -> Reply:
        found = services().workspaces.organization(principal(), org)
        return _document(jsonapi.entitlements(found, principal()))

    # -- workspaces -------------------------------------------------------------------------

    @app.get("/api/v2/organizations/<org>/workspaces")
    def list_workspaces(org: str) -> Reply:
        query = app.current_event.get_query_string_value
        tags = tuple(t for t in (query("search[tags]") or "").split(",") if t)
        number, size = page_params()
        who = principal()
        page = services().workspaces.search(
            who, org, search=query("search[name]"), tags=tags, page=number, size=size
        )
        return _document(
            [jsonapi.workspace(w, org, who) for w in page.items], meta=jsonapi.pagination(page)
        )

    @app.get("/api/v2/organizations/<org>/workspaces/<name>")
    def read_workspace_by_name(org: str, name: str) -> Reply:
        who = principal()
        return _document(jsonapi.workspace(services().workspaces.by_name(who, org, name), org, who))

    @app.post("/api/v2/organizations/<org>/workspaces")
    def create_workspace(org: str) -> Reply:
        who = principal()
        attributes = body(jsonapi.WorkspaceBody).data.attributes
        if not attributes.name:
            raise InvalidInput("a workspace needs a name", "/data/attributes/name")
        created = services().workspaces.create(
            who,
            org,
            attributes.name,
            terraform_version=attributes.terraform_version,
            description=attributes.description,
            tags=tuple(attributes.tag_names or ()),
            execution_mode=_execution_mode(attributes.execution_mode) or ExecutionMode.LOCAL,
        )
        return _document(jsonapi.workspace(created, org, who), status=201)

    def _update(who: Principal, ws_id: str) -> Reply:
        attributes = body(jsonapi.WorkspaceBody).data.attributes
        mode = _execution_mode(attributes.execution_mode)
        ws = services().workspaces.by_id(who, ws_id)
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
        return _document(jsonapi.workspace(updated, org_name_of(updated.organization_id), who))

    @app.get("/api/v2/workspaces/<ws_id>")
    def read_workspace(ws_id: str) -> Reply:
        who = principal()
        ws = services().workspaces.by_id(who, ws_id)
        return _document(jsonapi.workspace(ws, org_name_of(ws.organization_id), who))

    @app.patch("/api/v2/workspaces/<ws_id>")
    def update_workspace(ws_id: str) -> Reply:
        return _update(principal(), ws_id)

    @app.patch("/api/v2/organizations/<org>/workspaces/<name>")
    def update_workspace_by_name(org: str, name: str) -> Reply:
        who = principal()
        return _update(who, services().workspaces.by_name(who, org, name).id)

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
        return _document(jsonapi.workspace(ws, org_name_of(ws.organization_id), who))

    @app.post("/api/v2/workspaces/<ws_id>/actions/lock")
    def lock(ws_id: str) -> Reply:
        who = principal()
        reason = _lock_reason()
        return _workspace_response(who, lambda: services().workspaces.lock(who, ws_id, reason))

    @app.post("/api/v2/workspaces/<ws_id>/actions/unlock")
    def unlock(ws_id: str) -> Reply:
        who = principal()
        return _workspace_response(who, lambda: services().workspaces.unlock(who, ws_id))

    @app.post("/api/v2/workspaces/<ws_id>/actions/force-unlock")
    def force_unlock(ws_id: str) -> Reply:
        who = principal()
        return _workspace_response(who, lambda: services().workspaces.force_unlock(who, ws_id))

    # -- state --------------------------------------------------------------------------------

    @app.get("/api/v2/workspaces/<ws_id>/current-state-version")
    def current_state_version(ws_id: str) -> Reply:
        return _document(
            jsonapi.state_version(services().state.current(principal(), ws_id), base_url())
        )

    @app.get("/api/v2/workspaces/<ws_id>/current-state-version-outputs")
    def current_outputs(ws_id: str) -> Reply:
        version, outputs = services().state.outputs(principal(), ws_id)
        return _document([jsonapi.output(version, out) for out in outputs])

    @app.get("/api/v2/workspaces/<ws_id>/state-versions")
    def list_state_versions(ws_id: str) -> Reply:
        versions = services().state.history(principal(), ws_id)
        base = base_url()
        return paged(list(reversed(versions)), lambda v: jsonapi.state_version(v, base))

    @app.get("/api/v2/state-versions")
    def filter_state_versions() -> Reply:
        query = app.current_event.get_query_string_value
        org, name = query("filter[organization][name]"), query("filter[workspace][name]")
        if not org or not name:
            raise InvalidInput(
                "filter[organization][name] and filter[workspace][name] are both required"
            )
        versions = services().state.listing(principal(), org, name)
        base = base_url()
        return paged(versions, lambda v: jsonapi.state_version(v, base))

    @app.post("/api/v2/workspaces/<ws_id>/state-versions")
    def create_state_version(ws_id: str) -> Reply:
        attributes = body(jsonapi.StateVersionBody).data.attributes
        created = services().state.create(
            principal(),
            ws_id,
            serial=attributes.serial,
            md5=attributes.md5,
            lineage=attributes.lineage,
            state_b64=attributes.state,
            force=attributes.force,
        )
        base = base_url()
        if isinstance(created, PendingUpload):
            urls = (
                f"{base}/_archivist/{created.state_token}",
                f"{base}/_archivist/{created.json_token}",
            )
            return _document(
                jsonapi.state_version(created.version, base, upload_urls=urls), status=201
            )
        return _document(jsonapi.state_version(created, base), status=201)

    @app.get("/api/v2/state-versions/<sv_id>")
    def read_state_version(sv_id: str) -> Reply:
        return _document(
            jsonapi.state_version(services().state.get(principal(), sv_id), base_url())
        )

    @app.get("/api/v2/state-versions/<sv_id>/outputs")
    def list_version_outputs(sv_id: str) -> Reply:
        version, outputs = services().state.version_outputs(principal(), sv_id)
        return paged(outputs, lambda out: jsonapi.output(version, out))

    @app.get("/api/v2/state-version-outputs/<wsout_id>")
    def read_output(wsout_id: str) -> Reply:
        version, found = services().state.output(principal(), wsout_id)
        return _document(jsonapi.output(version, found, reveal=True))

    @app.get("/api/v2/state-versions/<sv_id>/download")
    def download_state(sv_id: str) -> Reply:
        raw = services().state.download(principal(), sv_id)
        return Response(status_code=200, content_type="application/json", body=raw.decode("utf-8"))

    @app.get("/api/v2/state-versions/<sv_id>/json-download")
    def download_json_state(sv_id: str) -> Reply:
        raw = services().state.download_json(principal(), sv_id)
        return Response(status_code=200, content_type="application/json", body=raw.decode("utf-8"))

    @app.put("/_archivist/<token>")
    def upload_state(token: str) -> Reply:
        services().state.upload(token, raw_body())
        return Response(status_code=200, content_type="application/json", body="{}")

    # -- remote operations ----------------------------------------------------------------

    remote_runs.register(
        app,
        remote_runs.Request(
            principal=principal,
            base_url=base_url,
            json_body=json_body,
            raw_body=raw_body,
            page_params=page_params,
        ),
    )

    # -- errors -------------------------------------------------------------------------------

    @app.exception_handler(RunplaneError)  # type: ignore[untyped-decorator]
    def runplane_error(error: RunplaneError) -> Reply:
        pointer = getattr(error, "pointer", None)
        reply = _json(
            error.http_status,
            jsonapi.error(
                error.http_status, error.code.lower().replace("_", " "), error.message, pointer
            ),
        )
        retry_after = getattr(error, "retry_after_seconds", None)
        if retry_after:
            reply.headers["Retry-After"] = str(retry_after)
        return reply

    @app.not_found
    def not_found(_: Exception) -> Reply:
        return _json(404, jsonapi.error(404, "not found", "no such endpoint"))

    return app


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


@lru_cache(maxsize=1)
def resolvers() -> ResolverPool:
    return ResolverPool(build_app)


def resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway proxy event; every response carries TFP-API-Version."""
    response: dict[str, Any] = resolvers().resolve(event, context)
    response.setdefault("headers", {})["TFP-API-Version"] = API_VERSION
    if response.get("multiValueHeaders") is not None:
        response["multiValueHeaders"]["TFP-API-Version"] = [API_VERSION]
    return response
