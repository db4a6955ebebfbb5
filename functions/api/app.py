"""The run API (REST): workspaces, configuration uploads, runs, reviews, decisions,
and the runner's endpoints. Handlers parse, call one service, map the result."""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.event_handler import Response

from functions.bodies import parse_json
from functions.isolation import IsolatedRestResolver
from functions.observability import observed
from functions.route_groups import RouteGroups
from runplane.domain.errors import InvalidBody

# Each Router module of functions/api/routers/ and the routes it declares, in the
# order the OpenAPI document lists them. A request imports and builds only the
# Routers its path can reach (functions/route_groups.py).
ROUTERS: dict[str, tuple[str, ...]] = {
    "workspaces": (
        "/api/v1/workspaces",
        "/api/v1/workspaces/<workspace_id>",
        "/api/v1/workspaces/<workspace_id>/configuration-versions",
        "/api/v1/configuration-versions/<cv_id>/actions/finalize",
    ),
    "variables": (
        "/api/v1/workspaces/<workspace_id>/variables",
        "/api/v1/workspaces/<workspace_id>/variables/<name>",
        "/api/v1/workspaces/<workspace_id>/variables/<category>/<name>",
    ),
    "variable_sets": (
        "/api/v1/variable-sets",
        "/api/v1/variable-sets/<set_id>",
        "/api/v1/variable-sets/<set_id>/variables/<category>/<name>",
        "/api/v1/variable-sets/<set_id>/workspaces/<workspace_id>",
    ),
    "cloud_settings": ("/api/v1/workspaces/<workspace_id>/cloud-settings",),
    "auto_destroy": (
        "/api/v1/workspaces/<workspace_id>/auto-destroy",
        "/api/v1/workspaces/<workspace_id>/auto-destroy/actions/postpone",
    ),
    "runs": (
        "/api/v1/workspaces/<workspace_id>/runs",
        "/api/v1/runs/<run_id>",
        "/api/v1/runs/<run_id>/actions/approve",
        "/api/v1/runs/<run_id>/actions/reject",
        "/api/v1/runs/<run_id>/actions/cancel",
        "/api/v1/runs/<run_id>/actions/override-policy",
        "/api/v1/runs/<run_id>/actions/recover",
    ),
    "access": (
        "/api/v1/tokens",
        "/api/v1/tokens/<token_id>",
        "/api/v1/policy-sets",
        "/api/v1/policy-sets/<name>",
        "/api/v1/policy-sets/<name>/attachments",
        "/api/v1/launch-controls/<scope>",
    ),
    "teams": (
        "/api/v1/teams",
        "/api/v1/teams/<team_id>",
        "/api/v1/teams/<team_id>/members/<user>",
        "/api/v1/teams/<team_id>/tokens",
        "/api/v1/teams/<team_id>/access",
        "/api/v1/workspaces/<workspace_id>/team-access",
        "/api/v1/workspaces/<workspace_id>/team-access/<team_id>",
    ),
    "github": (
        "/api/v1/workspaces/<workspace_id>/github",
        "/api/v1/github/installations",
        "/api/v1/github/installations/<installation_id>",
        "/api/v1/github/ingestions/<source_id>",
        "/webhooks/github",
    ),
    "gitlab": (
        "/api/v1/workspaces/<workspace_id>/gitlab",
        "/webhooks/gitlab",
    ),
    "logs": ("/api/v1/runs/<run_id>/logs/<phase>",),
    "plans": ("/api/v1/runs/<run_id>/plan",),
    "attention": ("/api/v1/attention",),
    "audit": ("/api/v1/audit",),
    "runner": (
        "/api/v1/runner/sessions",
        "/api/v1/runner/downloads/<artifact_id>",
        "/api/v1/runner/uploads",
        "/api/v1/runner/uploads/register",
        "/api/v1/runner/uploads/<artifact_id>/register",
        "/api/v1/runner/apply-start",
        "/api/v1/runner/credentials",
        "/api/v1/runner/state-check",
        "/api/v1/runner/heartbeat",
        "/api/v1/runner/log-chunks",
        "/api/v1/runner/result",
        "/api/v1/runner/standby/claim",
    ),
    "events": (
        "/api/v1/workspaces/<workspace_id>/run-triggers",
        "/api/v1/workspaces/<workspace_id>/run-triggers/<source_id>",
        "/api/v1/workspaces/<workspace_id>/notifications",
        "/api/v1/workspaces/<workspace_id>/notifications/<destination_id>",
        "/api/v1/workspaces/<workspace_id>/notifications/<destination_id>/actions/test",
        "/api/v1/workspaces/<workspace_id>/notifications/<destination_id>/deliveries",
    ),
    "schedules": (
        "/api/v1/workspaces/<workspace_id>/drift/actions/remediate",
        "/api/v1/workspaces/<workspace_id>/schedules",
        "/api/v1/schedules/<schedule_id>",
        "/api/v1/schedules/<schedule_id>/actions/pause",
    ),
    # How the CLI signs in through the hosted UI (docs/sso.md).
    "sign_in": ("/api/v1/sign-in/config",),
    # Runplane as an OpenID Connect issuer (docs/credentials.md).
    "oidc": (
        "/.well-known/openid-configuration",
        "/.well-known/jwks.json",
    ),
}


def build_app(groups: Sequence[str] | None = None) -> IsolatedRestResolver:
    """The run API with the named Routers only (None: every Router and the OpenAPI
    document)."""
    from functions.api.edge import register_errors

    app = IsolatedRestResolver(enable_validation=True)
    if groups is None:
        _serve_openapi(app)
    for name in ROUTERS if groups is None else groups:
        module = importlib.import_module(f"functions.api.routers.{name}")
        app.include_router(module.router)
    register_errors(app)
    return app


def _serve_openapi(app: IsolatedRestResolver) -> None:
    # The document's own models load only with the app that serves it.
    from functions.api import schema as oas

    app.configure_openapi(
        title="Runplane run API", version="1", security_schemes=oas.security_schemes()
    )

    @app.get("/api/v1/openapi.json", include_in_schema=False)
    def openapi() -> Response[str]:
        schema = oas.with_runner_report(app.get_openapi_json_schema())
        return Response(status_code=200, content_type="application/json", body=schema)


@lru_cache(maxsize=1)
def resolvers() -> RouteGroups:
    return RouteGroups(ROUTERS, build_app)


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
