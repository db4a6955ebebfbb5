"""What every Cloud API router reads of the current request, its one way of
validating a JSON:API body, and its one mapping of errors to JSON:API error bodies."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from pydantic import BaseModel, ValidationError

from functions.bodies import parse_json
from functions.cloud_api import jsonapi
from functions.isolation import current_event
from runplane.domain.errors import InvalidInput, RunplaneError
from runplane.domain.identity import Principal
from runplane.domain.paging import Page
from runplane.services.principals import decode_principal, source_address
from runplane.wiring import services

Reply = Response[str]
M = TypeVar("M", bound=BaseModel)


def json_reply(status: int, body: Any, content_type: str = jsonapi.JSONAPI) -> Reply:
    return Response(status_code=status, content_type=content_type, body=json.dumps(body))


def document(data: Any, status: int = 200, **top: Any) -> Reply:
    return json_reply(status, {"data": data, **top})


def principal() -> Principal:
    event = current_event()
    caller = decode_principal(
        event.request_context.raw_event.get("authorizer"), source_address(event.raw_event)
    )
    return services().with_teams(caller)


def query(name: str) -> str | None:
    return current_event().get_query_string_value(name)


def base_url() -> str:
    """Absolute URLs for clients, as they reached us (stage prefix included)."""
    event = current_event()
    host = event.headers.get("Host") or "localhost"
    proto = event.headers.get("X-Forwarded-Proto") or "https"
    full_path = str(event.request_context.raw_event.get("path") or event.path)
    prefix = full_path[: -len(event.path)] if full_path.endswith(event.path) else ""
    return f"{proto}://{host}{prefix}"


def json_body() -> Any:
    event = current_event()
    return parse_json(event.body, bool(event.is_base64_encoded))


def body(model: type[M], *, absent_is_empty: bool = False, aliases: Mapping[str, str] = {}) -> M:
    """The request's JSON:API body as ``model``, or a 422 pointing at the first problem
    (``aliases``: the JSON names of the model's fields, where they differ)."""
    parsed = json_body()
    try:
        return model.model_validate({} if parsed is None and absent_is_empty else parsed)
    except ValidationError as invalid:
        from functions.cloud_api.body_models import pointer_of

        pointer, message = pointer_of(invalid, aliases)
        raise InvalidInput(message, pointer) from None


def raw_body() -> bytes:
    event = current_event()
    if event.is_base64_encoded:
        return base64.b64decode(event.body or "")
    return (event.body or "").encode("utf-8")


def page_params() -> tuple[int, int]:
    try:
        return int(query("page[number]") or 1), int(query("page[size]") or 20)
    except ValueError:
        raise InvalidInput("page[number] and page[size] must be integers") from None


def paged(everything: list[Any], render: Callable[[Any], Any]) -> Reply:
    page = Page.of(everything, *page_params())
    return document([render(item) for item in page.items], meta=jsonapi.pagination(page))


def org_name_of(org_id: str) -> str:
    return services().workspaces.organization_name(org_id)


JSON_MEDIA_TYPES: Final = frozenset({jsonapi.JSONAPI, "application/json"})
"""What a body sent to the Cloud API may be labelled: JSON:API's own media type (what
go-tfe, hence Terraform's remote backend, sends) or plain JSON (what pytfe and other
clients send); parameters such as ``charset`` are allowed."""
RAW_UPLOAD_PATHS: Final = ("/_archivist/", "/_configuration/")
"""Uploads of bytes as they are (a state file, a configuration tarball), not documents."""


def media_type_problem(path: str, content_type: str, has_body: bool) -> str | None:
    """Why a request's body cannot be read as JSON, or None if it can (or has none)."""
    if not has_body or path.startswith(RAW_UPLOAD_PATHS):
        return None
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type in JSON_MEDIA_TYPES:
        return None
    shown = media_type[:100] or "none"
    return f"a request body must be {jsonapi.JSONAPI} or application/json, not {shown}"


def require_json_bodies(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Reply:
    """Refuse (415) a body labelled as something other than JSON before any route reads
    it, so a form or text body is never parsed as if it were a document."""
    event = app.current_event
    content_type = event.headers.get("Content-Type") or ""
    problem = media_type_problem(event.path, content_type, bool(event.body))
    if problem is not None:
        return json_reply(415, jsonapi.error(415, "unsupported media type", problem))
    return next_middleware(app)


def register_errors(app: APIGatewayRestResolver) -> None:
    @app.exception_handler(RunplaneError)  # type: ignore[untyped-decorator]
    def runplane_error(error: RunplaneError) -> Reply:
        pointer = getattr(error, "pointer", None)
        reply = json_reply(
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
        return json_reply(404, jsonapi.error(404, "not found", "no such endpoint"))
