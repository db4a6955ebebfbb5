"""Run API routes that need no Authorization header."""

from __future__ import annotations

# The OpenAPI document is public; a runner's first call carries its one-time
# bootstrap handle in the body instead of a session.
PUBLIC_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/api/v1/openapi.json"),
    ("POST", "/api/v1/runner/sessions"),
    # GitHub signs its deliveries (X-Hub-Signature-256); the route verifies them.
    ("POST", "/webhooks/github"),
)


def is_public(method: str, path: str) -> bool:
    return (method, path) in PUBLIC_ROUTES
