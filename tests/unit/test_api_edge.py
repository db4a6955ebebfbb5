"""The run API's routers share one error mapping: typed domain errors and refused
request models become the same machine-readable bodies."""

from __future__ import annotations

import json
from typing import Any

from functions.api.app import handler
from functions.api.edge import invalid_request_body
from functions.observability import run_id_of


def _call(method: str, path: str, body: Any = None, authorizer: Any = None) -> dict[str, Any]:
    event = {
        "httpMethod": method,
        "path": path,
        "resource": "/{proxy+}",
        "headers": {"Content-Type": "application/json"},
        "queryStringParameters": None,
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
        "requestContext": {"stage": "$default", "path": path, "authorizer": authorizer},
    }
    return handler(event, None)


def test_a_body_its_router_model_refuses_is_a_typed_422_with_a_pointer() -> None:
    # Given a token request whose role is not one of the roles
    # When the tokens router validates it
    reply = _call("POST", "/api/v1/tokens", {"name": "ci", "role": "owner"})

    # Then it is refused before any service runs, with a pointer to the field
    assert reply["statusCode"] == 422
    body = json.loads(reply["body"])
    assert body["code"] == "INVALID_INPUT"
    assert body["pointer"] == "/role"
    assert body["message"]


def test_a_route_without_a_caller_maps_the_domain_error_to_its_status() -> None:
    # Given a valid workspace request that reached the API without an authorizer context
    # When the workspaces router asks for its caller
    reply = _call("POST", "/api/v1/workspaces", {"name": "prod"})

    # Then the typed domain error is the reply, with its own code
    assert reply["statusCode"] == 401
    assert json.loads(reply["body"])["code"] == "UNAUTHENTICATED"


def test_an_unknown_path_is_a_typed_404() -> None:
    reply = _call("GET", "/api/v1/nothing-here")
    assert reply["statusCode"] == 404
    assert json.loads(reply["body"]) == {"code": "NOT_FOUND", "message": "no such endpoint"}


def test_the_422_body_names_the_first_error_without_the_body_prefix() -> None:
    errors = [{"loc": ("body", "variables", "region"), "msg": "Input should be a string"}]
    assert invalid_request_body(errors) == {
        "code": "INVALID_INPUT",
        "message": "Input should be a string",
        "pointer": "/variables/region",
    }
    assert invalid_request_body([])["pointer"] == "/"


def test_the_run_id_log_key_comes_from_a_step_input_or_a_run_path() -> None:
    assert run_id_of({"run_id": "run-abc"}) == "run-abc"
    assert run_id_of({"path": "/api/v1/runs/run-9Xy/actions/approve"}) == "run-9Xy"
    assert run_id_of({"path": "/api/v1/workspaces"}) is None
    assert run_id_of(None) is None


def test_a_reply_model_is_the_reply_and_refuses_to_stray_from_its_schema() -> None:
    import pytest
    from pydantic import ValidationError

    from functions.api import schema as oas
    from functions.api.edge import json_reply

    # Given a reply built as its documented model / When it is sent
    reply = json_reply(201, oas.WorkspaceCreated(id="ws-1", name="a", organization="o", tags=[]))
    # Then the body is the model's JSON, field for field
    assert json.loads(reply.body or "") == {
        "id": "ws-1",
        "name": "a",
        "organization": "o",
        "tags": [],
    }
    # And one that lacks a documented field, or has a wrong type, cannot be built
    with pytest.raises(ValidationError):
        oas.WorkspaceCreated(id="ws-1", name="a", organization="o")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        oas.WorkspaceUpdated.model_validate(
            {"id": "ws-1", "name": "a", "approval_window_seconds": "soon", "tags": []}
        )
