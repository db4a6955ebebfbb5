"""Hosted-UI sign-in rules (OAuth 2.0 authorization code flow with PKCE, OpenID Connect).

A sign-in starts with a pre-session: 256 random bits in a short-lived cookie.
The ``state``, ``nonce`` and PKCE ``code_verifier`` are HMACs of that secret, so
the server stores only the secret's hash (to make the pre-session single-use and
to expire it) and recomputes the three from the cookie the browser sends back.
Whoever lacks the cookie cannot produce the verifier, and a callback arriving in
another browser carries no cookie, or another one, whose ``state`` does not match.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from runplane.domain.errors import RunplaneError, SignInRefused

# Long enough to type a password and a one-time code, short enough to be useless later.
PRE_SESSION_LIFETIME = timedelta(minutes=10)
PRE_SESSION_COOKIE = "runplane_sign_in"
# The cookie goes only to the callback, never to the pages.
PRE_SESSION_PATH = "/ui/oauth2/"
CALLBACK_PATH = "/ui/oauth2/callback"
START_PATH = "/ui/sign-in"
SCOPES = ("openid", "email", "profile")
# Clock skew tolerated on auth_time, as on the token's own times.
LEEWAY = timedelta(seconds=60)
_CONTEXT = b"runplane dashboard sign-in v1 "


def _derive(secret: str, purpose: str) -> str:
    digest = hmac.new(secret.encode("utf-8"), _CONTEXT + purpose.encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def code_challenge(verifier: str) -> str:
    """RFC 7636 S256: BASE64URL(SHA256(ASCII(code_verifier)))."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Binding:
    """What one pre-session binds a sign-in to (all derived from its secret)."""

    state: str = field(repr=False)
    nonce: str = field(repr=False)
    verifier: str = field(repr=False)

    @classmethod
    def of(cls, secret: str) -> Binding:
        return cls(_derive(secret, "state"), _derive(secret, "nonce"), _derive(secret, "verifier"))

    @property
    def challenge(self) -> str:
        return code_challenge(self.verifier)

    def state_matches(self, presented: str | None) -> bool:
        if not presented or not presented.isascii():
            return False
        return hmac.compare_digest(self.state.encode(), presented.encode())


def authorize_url(domain: str, client_id: str, redirect_uri: str, binding: Binding) -> str:
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": " ".join(SCOPES),
            "state": binding.state,
            "nonce": binding.nonce,
            "code_challenge": binding.challenge,
            "code_challenge_method": "S256",
        }
    )
    return f"{domain.rstrip('/')}/oauth2/authorize?{query}"


def logout_url(domain: str, client_id: str, logout_uri: str) -> str:
    query = urlencode({"client_id": client_id, "logout_uri": logout_uri})
    return f"{domain.rstrip('/')}/logout?{query}"


def signed_out_uri(redirect_uri: str) -> str:
    """Where the hosted UI sends the browser after logout: the sign-in page next to
    the callback (both under the dashboard's base URL)."""
    base = redirect_uri.removesuffix(CALLBACK_PATH)
    return f"{base}{START_PATH}"


def check_id_token(claims: Mapping[str, Any], *, nonce: str, now: datetime) -> datetime:
    """The rules an ID token must meet beyond its signature, issuer, audience and
    expiry (checked by the verifier): it is an ID token, it answers this sign-in
    (``nonce``), and it says when the person authenticated. Returns ``auth_time``."""
    if claims.get("token_use") != "id":
        raise SignInRefused("wrong_token_use", "the identity provider did not return an ID token")
    presented = claims.get("nonce")
    if (
        not isinstance(presented, str)
        or not presented.isascii()
        or not hmac.compare_digest(presented.encode(), nonce.encode())
    ):
        raise SignInRefused("nonce_mismatch", "the ID token does not answer this sign-in")
    auth_time = claims.get("auth_time")
    if isinstance(auth_time, bool) or not isinstance(auth_time, int | float):
        raise SignInRefused("no_auth_time", "the ID token does not say when you signed in")
    try:
        when = datetime.fromtimestamp(auth_time, now.tzinfo)
    except (OverflowError, OSError, ValueError):
        raise SignInRefused("no_auth_time", "the ID token's sign-in time is invalid") from None
    if when > now + LEEWAY:
        raise SignInRefused("no_auth_time", "the ID token's sign-in time is in the future")
    return when


def pre_session_cookie(secret: str, *, secure: bool, max_age: int) -> str:
    # Lax, not Strict: the callback is a top-level navigation from the hosted UI's
    # site, and a Strict cookie would not be sent with it.
    flags = f"Path={PRE_SESSION_PATH}; HttpOnly; SameSite=Lax; Max-Age={max_age}"
    return f"{PRE_SESSION_COOKIE}={secret}; {flags}{'; Secure' if secure else ''}"


def cleared_pre_session_cookie(*, secure: bool) -> str:
    return pre_session_cookie("", secure=secure, max_age=0)


# -- CLI sign-in (runplane login, docs/sso.md) ---------------------------------------------

CLI_CALLBACK_PATH = "/callback"


class CliSignInNotConfigured(RunplaneError):
    """The deployment has no hosted UI for the CLI: people use API tokens."""

    code = "CLI_SIGN_IN_NOT_CONFIGURED"
    http_status = 404

    def __init__(self) -> None:
        super().__init__(
            "this deployment has no single sign-on for the CLI; use an API token (--token)"
        )


@dataclass(frozen=True)
class CliSignIn:
    """What the CLI needs to sign in through the hosted UI: nothing secret."""

    domain: str
    client_id: str
    ports: tuple[int, ...]

    @property
    def authorize_endpoint(self) -> str:
        return f"{self.domain.rstrip('/')}/oauth2/authorize"

    @property
    def token_endpoint(self) -> str:
        return f"{self.domain.rstrip('/')}/oauth2/token"

    @property
    def logout_endpoint(self) -> str:
        return f"{self.domain.rstrip('/')}/logout"

    def redirect_uri(self, port: int) -> str:
        return f"http://127.0.0.1:{port}{CLI_CALLBACK_PATH}"


def cli_sign_in(domain: str | None, client_id: str | None, ports: tuple[int, ...]) -> CliSignIn:
    if not domain or not client_id or not ports:
        raise CliSignInNotConfigured()
    return CliSignIn(domain.rstrip("/"), client_id, ports)
