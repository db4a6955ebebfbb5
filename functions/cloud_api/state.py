"""Cloud API routes of state versions, their outputs and uploads."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from functions.cloud_api import jsonapi
from functions.cloud_api.request import (
    Reply,
    base_url,
    body,
    document,
    paged,
    principal,
    query,
    raw_body,
)
from runplane.domain.errors import InvalidInput
from runplane.services.state import PendingUpload
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


# -- state --------------------------------------------------------------------------------


@router.get("/api/v2/workspaces/<ws_id>/current-state-version")
def current_state_version(ws_id: str) -> Reply:
    return document(jsonapi.state_version(services().state.current(principal(), ws_id), base_url()))


@router.get("/api/v2/workspaces/<ws_id>/current-state-version-outputs")
def current_outputs(ws_id: str) -> Reply:
    version, outputs = services().state.outputs(principal(), ws_id)
    return document([jsonapi.output(version, out) for out in outputs])


@router.get("/api/v2/workspaces/<ws_id>/state-versions")
def list_state_versions(ws_id: str) -> Reply:
    versions = services().state.history(principal(), ws_id)
    base = base_url()
    return paged(list(reversed(versions)), lambda v: jsonapi.state_version(v, base))


@router.get("/api/v2/state-versions")
def filter_state_versions() -> Reply:
    org, name = query("filter[organization][name]"), query("filter[workspace][name]")
    if not org or not name:
        raise InvalidInput(
            "filter[organization][name] and filter[workspace][name] are both required"
        )
    versions = services().state.listing(principal(), org, name)
    base = base_url()
    return paged(versions, lambda v: jsonapi.state_version(v, base))


@router.post("/api/v2/workspaces/<ws_id>/state-versions")
def create_state_version(ws_id: str) -> Reply:
    from functions.cloud_api.body_models import StateVersionBody

    attributes = body(StateVersionBody).data.attributes
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
        return document(jsonapi.state_version(created.version, base, upload_urls=urls), status=201)
    return document(jsonapi.state_version(created, base), status=201)


@router.get("/api/v2/state-versions/<sv_id>")
def read_state_version(sv_id: str) -> Reply:
    return document(jsonapi.state_version(services().state.get(principal(), sv_id), base_url()))


@router.get("/api/v2/state-versions/<sv_id>/outputs")
def list_version_outputs(sv_id: str) -> Reply:
    version, outputs = services().state.version_outputs(principal(), sv_id)
    return paged(outputs, lambda out: jsonapi.output(version, out))


@router.get("/api/v2/state-version-outputs/<wsout_id>")
def read_output(wsout_id: str) -> Reply:
    version, found = services().state.output(principal(), wsout_id)
    return document(jsonapi.output(version, found, reveal=True))


@router.get("/api/v2/state-versions/<sv_id>/download")
def download_state(sv_id: str) -> Reply:
    raw = services().state.download(principal(), sv_id)
    return Response(status_code=200, content_type="application/json", body=raw.decode("utf-8"))


@router.get("/api/v2/state-versions/<sv_id>/json-download")
def download_json_state(sv_id: str) -> Reply:
    raw = services().state.download_json(principal(), sv_id)
    return Response(status_code=200, content_type="application/json", body=raw.decode("utf-8"))


@router.put("/_archivist/<token>")
def upload_state(token: str) -> Reply:
    services().state.upload(token, raw_body())
    return Response(status_code=200, content_type="application/json", body="{}")
