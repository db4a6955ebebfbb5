"""Run API routes that need no Authorization header."""

from __future__ import annotations

# The OpenAPI document is public; a runner's first call carries its one-time
# bootstrap handle in the body instead of a session.
PUBLIC_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/api/v1/openapi.json"),
    # What the CLI needs to sign in (docs/sso.md): endpoints and a public client ID.
    ("GET", "/api/v1/sign-in/config"),
    ("POST", "/api/v1/runner/sessions"),
    # A standby runner polls with its single-use ticket in the body (docs/standby.md).
    ("POST", "/api/v1/runner/standby/claim"),
    # GitHub signs its deliveries (X-Hub-Signature-256); the route verifies them.
    ("POST", "/webhooks/github"),
    # GitLab sends each binding's secret token (X-Gitlab-Token); the route checks it.
    ("POST", "/webhooks/gitlab"),
    # The OpenID Connect issuer's discovery document and keys: public by the
    # protocol (clouds fetch them anonymously); they hold public keys and URLs only.
    ("GET", "/.well-known/openid-configuration"),
    ("GET", "/.well-known/jwks.json"),
)

# Paths outside /api/v1 the run API serves (the embedded stack's gateway sends them to
# it; in AWS each is a resource of its own, infra/constructs/api.py).
OWN_PATHS: tuple[str, ...] = (
    "/.well-known/openid-configuration",
    "/.well-known/jwks.json",
)


def is_public(method: str, path: str) -> bool:
    return (method, path) in PUBLIC_ROUTES
