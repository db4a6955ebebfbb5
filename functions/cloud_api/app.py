"""The TFE-compatible Cloud API: the subset native OpenTofu/Terraform clients use for
state, locking and remote operations, on Powertools' REST resolver with one Router
per resource group. Handlers parse, call one service, and map the result; every
rule lives in ``runplane.services``."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from functions.isolation import IsolatedRestResolver
from functions.route_groups import RouteGroups

API_VERSION = "2.5"

# Each Router module and the routes it declares, in the order the app includes them.
# A request imports and builds only the Routers its path can reach
# (functions/route_groups.py).
ROUTERS: dict[str, tuple[str, ...]] = {
    "workspaces": (
        "/.well-known/terraform.json",
        "/api/v2/ping",
        "/api/v2/account/details",
        "/api/v2/organizations",
        "/api/v2/organizations/<org>",
        "/api/v2/organizations/<org>/entitlement-set",
        "/api/v2/organizations/<org>/runs/queue",
        "/api/v2/organizations/<org>/workspaces",
        "/api/v2/organizations/<org>/workspaces/<name>",
        "/api/v2/workspaces/<ws_id>",
        "/api/v2/workspaces/<ws_id>/actions/lock",
        "/api/v2/workspaces/<ws_id>/actions/unlock",
        "/api/v2/workspaces/<ws_id>/actions/force-unlock",
        "/api/v2/workspaces/<ws_id>/actions/safe-delete",
    ),
    "state": (
        "/api/v2/workspaces/<ws_id>/current-state-version",
        "/api/v2/workspaces/<ws_id>/current-state-version-outputs",
        "/api/v2/workspaces/<ws_id>/state-versions",
        "/api/v2/state-versions",
        "/api/v2/state-versions/<sv_id>",
        "/api/v2/state-versions/<sv_id>/outputs",
        "/api/v2/state-version-outputs/<wsout_id>",
        "/api/v2/state-versions/<sv_id>/download",
        "/api/v2/state-versions/<sv_id>/json-download",
        "/_archivist/<token>",
    ),
    "runs": (
        "/api/v2/workspaces/<ws_id>/configuration-versions",
        "/api/v2/configuration-versions/<cv_id>",
        "/_configuration/<token>",
        "/api/v2/runs",
        "/api/v2/runs/<run_id>",
        "/api/v2/workspaces/<ws_id>/runs",
        "/api/v2/runs/<run_id>/actions/apply",
        "/api/v2/runs/<run_id>/actions/discard",
        "/api/v2/runs/<run_id>/actions/cancel",
        "/api/v2/plans/<plan_id>",
        "/api/v2/runs/<run_id>/plan",
        "/api/v2/applies/<apply_id>",
        "/api/v2/runs/<run_id>/apply",
        "/_logs/<run_id>/<phase>/<expires>/<grant>",
        "/api/v2/runs/<run_id>/policy-checks",
        "/api/v2/policy-checks/<check_id>",
        "/api/v2/policy-checks/<check_id>/output",
    ),
    "first_reads": ("/api/v2/runner/first-reads",),
}


def build_app(groups: Sequence[str] | None = None) -> IsolatedRestResolver:
    """The Cloud API with the named Routers only (None: every Router)."""
    from functions.cloud_api.request import register_errors, require_json_bodies

    app = IsolatedRestResolver()
    app.use(middlewares=[require_json_bodies])
    for name in ROUTERS if groups is None else groups:
        app.include_router(importlib.import_module(f"functions.cloud_api.{name}").router)
    register_errors(app)
    return app


@lru_cache(maxsize=1)
def resolvers() -> RouteGroups:
    return RouteGroups(ROUTERS, build_app)


def resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway proxy event; every response carries TFP-API-Version."""
    response: dict[str, Any] = resolvers().resolve(event, context)
    response.setdefault("headers", {})["TFP-API-Version"] = API_VERSION
    if response.get("multiValueHeaders") is not None:
        response["multiValueHeaders"]["TFP-API-Version"] = [API_VERSION]
    return response
