"""Dashboard sign-in rules: one-time login codes, cookie sessions and CSRF tokens.

Only hashes of codes and session ids are stored. The CSRF token is derived from
the session secret (an HMAC), so it needs no storage, and it reveals nothing
about the secret it came from. A code and a session each carry a ``Grant``: who it
signs in as, until when.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from runplane.domain.identity import Permission

# A login link is for the person starting the stack, now.
LOGIN_CODE_LIFETIME = timedelta(minutes=10)
SESSION_LIFETIME = timedelta(hours=8)
SESSION_COOKIE = "runplane_session"
_CSRF_CONTEXT = b"runplane dashboard csrf v1"


@dataclass(frozen=True)
class Grant:
    """Who a login code or session signs in as."""

    organization_id: str
    name: str
    permissions: frozenset[Permission]
    created_at: datetime
    valid_until: datetime
    # When the person authenticated at the identity provider (hosted-UI sign-in);
    # None for a login code and its session, whose sign-in is their creation.
    auth_time: datetime | None = None
    # The identity provider's groups at sign-in (team mappings read them; a change
    # takes effect at the next sign-in).
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class WebSession:
    id: str
    grant: Grant


def new_secret() -> str:
    """256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def csrf_token(session_secret: str) -> str:
    return hmac.new(session_secret.encode("utf-8"), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


def csrf_matches(session_secret: str, presented: str | None) -> bool:
    if not presented:
        return False
    return hmac.compare_digest(csrf_token(session_secret).encode(), presented.encode("utf-8"))


def same_origin(origin: str | None, scheme: str, host: str | None) -> bool:
    """A browser names the page that sent a POST in ``Origin``; a request from any
    other origin (or an opaque ``null`` one) is refused. No header: not a
    cross-origin browser request, and the CSRF token still has to match."""
    if origin is None:
        return True
    if not host:
        return False
    return origin == f"{scheme}://{host}"


def session_cookie(secret: str, *, secure: bool, max_age: int) -> str:
    flags = f"Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}"
    return f"{SESSION_COOKIE}={secret}; {flags}{'; Secure' if secure else ''}"


def cleared_cookie(*, secure: bool) -> str:
    return session_cookie("", secure=secure, max_age=0)
