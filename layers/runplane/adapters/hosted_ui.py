"""HTTP calls to a Cognito user pool's hosted UI: the token endpoint and the JWKS.

Standard library only (``urllib``), as the CLI client and the deploy-time JWKS
fetcher. Nothing the endpoints answer is ever repeated in an error: a refusal is
reported by its OAuth error code alone, and a token never leaves this module
except as the return value.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from runplane.domain.errors import SignInRefused, SignInUnavailable

# A token response is a few KiB; a JWKS a few hundred bytes per key.
MAX_RESPONSE_BYTES = 64 * 1024
TIMEOUT_SECONDS = 10
# OAuth error codes (RFC 6749 5.2) that mean "this code, for this request, is no good",
# as opposed to a misconfigured client or an unavailable provider.
_REFUSED_GRANTS = frozenset({"invalid_grant", "invalid_request", "unauthorized_client"})


class HostedUi:
    def __init__(
        self,
        *,
        domain: str,
        client_id: str,
        client_secret: Callable[[], str],
        redirect_uri: str,
    ) -> None:
        self.domain = domain.rstrip("/")
        self.client_id = client_id
        self.redirect_uri = redirect_uri
        self._client_secret = client_secret

    def exchange(self, code: str, verifier: str) -> str:
        """Redeem an authorization code (with its PKCE verifier) for the ID token."""
        body = urlencode(
            {
                "grant_type": "authorization_code",
                "client_id": self.client_id,
                "code": code,
                "redirect_uri": self.redirect_uri,
                "code_verifier": verifier,
            }
        ).encode("ascii")
        # RFC 6749 2.3.1: client id and secret are form-encoded before Basic encoding.
        pair = f"{quote(self.client_id, safe='')}:{quote(self._client_secret(), safe='')}"
        request = urllib.request.Request(  # noqa: S310 - settings require https (or loopback)
            f"{self.domain}/oauth2/token",
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                "Authorization": "Basic " + base64.b64encode(pair.encode()).decode("ascii"),
            },
        )
        answer = _call(request, "the token endpoint")
        id_token = answer.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise SignInUnavailable("the identity provider's answer has no ID token")
        return id_token


def fetch_jwks(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    return _call(request, "the key set")


def _call(request: urllib.request.Request, what: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            raw = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as error:
        reason = _oauth_error(error)
        error.close()
        if error.code in (400, 401) and reason in _REFUSED_GRANTS:
            raise SignInRefused(
                "code_refused", "the identity provider refused the sign-in code"
            ) from None
        raise SignInUnavailable(
            f"the identity provider answered {error.code} from {what}"
            + (f" ({reason})" if reason else "")
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError):
        raise SignInUnavailable(f"the identity provider's {what} cannot be reached") from None
    if len(raw) > MAX_RESPONSE_BYTES:
        raise SignInUnavailable(f"the identity provider's answer from {what} is too large")
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise SignInUnavailable(f"the identity provider's answer from {what} is not JSON")
    return value


def _oauth_error(error: urllib.error.HTTPError) -> str | None:
    """The ``error`` code of an OAuth error response, if it is a known short token."""
    try:
        body = json.loads(error.read(MAX_RESPONSE_BYTES))
    except (ValueError, OSError):
        return None
    code = body.get("error") if isinstance(body, dict) else None
    if isinstance(code, str) and code.isascii() and code.replace("_", "").isalpha():
        return code[:40]
    return None
