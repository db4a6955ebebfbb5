"""The run API (REST): workspaces, configuration uploads, runs, reviews, decisions,
and the runner's endpoints. Handlers parse, call one service, map the result."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.event_handler import Response

from functions.bodies import parse_json
from functions.isolation import IsolatedRestResolver, ResolverPool
from functions.observability import observed
from runplane.domain.errors import InvalidBody


def build_app() -> IsolatedRestResolver:
    # The routers, their request models and the services they name are imported
    # here, by the first request, not at a cold start's import.
    from functions.api import schema as oas
    from functions.api.edge import register_errors
    from functions.api.routers import (
        access,
        events,
        github,
        logs,
        runner,
        runs,
        schedules,
        variables,
        workspaces,
    )

    app = IsolatedRestResolver(enable_validation=True)
    app.configure_openapi(
        title="Runplane run API", version="1", security_schemes=oas.SECURITY_SCHEMES
    )

    @app.get("/api/v1/openapi.json", include_in_schema=False)
    def openapi() -> Response[str]:
        schema = app.get_openapi_json_schema()
        return Response(status_code=200, content_type="application/json", body=schema)

    # In this order the OpenAPI document lists them.
    for router in (workspaces, variables, runs, access, github, logs, runner, events, schedules):
        app.include_router(router.router)
    register_errors(app)
    return app


@lru_cache(maxsize=1)
def resolvers() -> ResolverPool:
    return ResolverPool(build_app)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Read before Powertools does: it fails untyped on some bodies (deep nesting, not UTF-8).
    # A webhook's body is read only after its signature is checked, by its route.
    if not str(event.get("path", "")).startswith("/webhooks/"):
        try:
            parse_json(event.get("body"), bool(event.get("isBase64Encoded")))
        except InvalidBody as unreadable:
            return {
                "statusCode": unreadable.http_status,
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps(unreadable.to_body()),
                "isBase64Encoded": False,
            }
    result: dict[str, Any] = resolvers().resolve(event, context)
    return result
