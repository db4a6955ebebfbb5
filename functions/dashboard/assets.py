"""The dashboard's own files: its stylesheet (assembled from one part per page family,
``static/css/*.css`` in name order), its script and its icon, each linked by a URL
that carries a digest of its content, so a new release is never shown with an old
file a browser kept."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {
    "dashboard.js": "text/javascript",
    "dashboard.css": "text/css",
    # Linked from every page; /favicon.ico answers with it too (see app.favicon).
    "favicon.svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    body: str
    content_type: str
    version: str


def _body(name: str) -> str | None:
    if name == "dashboard.css":
        parts = sorted((STATIC / "css").glob("*.css"))
        return "\n".join(part.read_text(encoding="utf-8") for part in parts)
    path = STATIC / name
    return path.read_text(encoding="utf-8") if path.is_file() else None


@lru_cache(maxsize=len(TYPES))
def _asset(name: str) -> Asset | None:
    body = _body(name)
    if body is None:
        return None
    version = hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]
    return Asset(body, f"{TYPES[name]}; charset=utf-8", version)


def asset(name: str) -> Asset | None:
    """The file named ``name``, or None for any name that is not one of ours."""
    return _asset(name) if name in TYPES else None


def asset_url(name: str) -> str:
    """``/ui/static/NAME?v=DIGEST``: the URL pages link the file by."""
    found = asset(name)
    assert found is not None, name
    return f"/ui/static/{name}?v={found.version}"
