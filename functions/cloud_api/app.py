"""The TFE-compatible Cloud API: the subset native OpenTofu/Terraform clients use for
state, locking and remote operations, on Powertools' REST resolver with one Router
per resource group. Handlers parse, call one service, and map the result; every
rule lives in ``runplane.services``."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from functions.isolation import IsolatedRestResolver, ResolverPool

API_VERSION = "2.5"


def build_app() -> IsolatedRestResolver:
    from functions.cloud_api import runs, state, workspaces
    from functions.cloud_api.request import register_errors

    app = IsolatedRestResolver()
    for router in (workspaces, state, runs):
        app.include_router(router.router)
    register_errors(app)
    return app


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
