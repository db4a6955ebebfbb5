"""Which Cloud API routes need no Authorization header (the gateway's authorizer
is attached to every other route)."""

from __future__ import annotations

import re

# Discovery and ping are public in TFE; upload URLs (state and configuration archives)
# and log-read URLs carry their own single-purpose credential.
PUBLIC_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", r"/\.well-known/terraform\.json"),
    ("GET", r"/api/v2/ping"),
    ("PUT", r"/_archivist/[^/]+"),
    ("PUT", r"/_configuration/[^/]+"),
    ("GET", r"/_logs/[^/]+/[^/]+/[^/]+/[^/]+"),
)

_COMPILED = tuple((method, re.compile(f"^{pattern}$")) for method, pattern in PUBLIC_ROUTES)


def is_public(method: str, path: str) -> bool:
    return any(m == method and pattern.match(path) for m, pattern in _COMPILED)
