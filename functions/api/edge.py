"""What every run API router shares at the edge: the caller, JSON replies, query
integers, and one mapping of every error (typed domain errors and request
validation) to the API's error body."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from pydantic import BaseModel

from functions.isolation import current_event
from runplane.domain.errors import InvalidInput, RunplaneError
from runplane.domain.identity import Principal
from runplane.services.principals import decode_principal, source_address
from runplane.wiring import services

Reply = Response[str]


def json_reply(status: int, body: Any) -> Reply:
    """``body`` as JSON; a reply model (``functions.api.schema``) is the reply and its
    schema at once: built by validation, so a reply that strays from its documented
    shape fails in the handler instead of reaching a client, and a field the model does
    not name never reaches one. Fields left unset (an optional one a dict did not
    carry) stay out, as they were."""
    if isinstance(body, BaseModel):
        body = body.model_dump(mode="json", exclude_unset=True)
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


def principal() -> Principal:
    """The caller the authorizer established for this request."""
    event = current_event()
    caller = decode_principal(
        event.request_context.raw_event.get("authorizer"), source_address(event.raw_event)
    )
    return services().with_teams(caller)


def query_int(name: str) -> int | None:
    raw = current_event().get_query_string_value(name)
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 15:
        raise InvalidInput(f"{name} must be a whole number of bytes", f"/{name}")
    return int(raw)


def error_body(error: RunplaneError) -> dict[str, Any]:
    body: dict[str, Any] = error.to_body()
    pointer = getattr(error, "pointer", None)
    if pointer:
        body["pointer"] = pointer
    return body


def invalid_request_body(errors: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The 422 body of a request its pydantic model refused: the first error, with a
    JSON pointer into the body (or to the path or query parameter)."""
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    location = [str(p) for p in first.get("loc", ()) if p != "body"]
    return {
        "code": "INVALID_INPUT",
        "message": str(first.get("msg")),
        "pointer": "/" + "/".join(location),
    }


def register_errors(app: APIGatewayRestResolver) -> None:
    @app.exception_handler(RunplaneError)  # type: ignore[untyped-decorator]
    def runplane_error(error: RunplaneError) -> Reply:
        reply = json_reply(error.http_status, error_body(error))
        retry_after = getattr(error, "retry_after_seconds", None)
        if retry_after:
            reply.headers["Retry-After"] = str(retry_after)
        return reply

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def invalid(error: RequestValidationError) -> Reply:
        return json_reply(422, invalid_request_body(error.errors()))

    @app.not_found
    def not_found(_: Exception) -> Reply:
        return json_reply(404, {"code": "NOT_FOUND", "message": "no such endpoint"})
