"""A Cognito hosted UI over real HTTP on 127.0.0.1, for sign-in tests.

It plays the parts of the hosted UI a browser and the dashboard talk to:

- ``GET /oauth2/authorize``: "signs in" the configured user and redirects to the
  registered callback with a single-use code bound to the PKCE challenge, nonce
  and redirect URI;
- ``POST /oauth2/token``: checks the client's Basic credentials, the code (once),
  the redirect URI and the PKCE verifier, and answers an RS256 ID token signed
  with a test key;
- ``GET /pool/.well-known/jwks.json``: the key set (the issuer is ``<url>/pool``);
- ``GET /logout``: checks the logout URI and redirects to it.

Knobs let a test make it misbehave (another audience, another nonce) and the
record of redemptions and refusals lets a test say why a code was refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from runplane.adapters.jwt import LocalIssuer


@dataclass(frozen=True)
class User:
    username: str
    organization_id: str | None
    groups: tuple[str, ...] = ("admin",)
    email: str | None = None
    # When the person authenticated (defaults to the moment of the authorize call).
    auth_time: datetime | None = None


@dataclass
class _Code:
    user: User
    client_id: str
    redirect_uri: str
    nonce: str | None
    challenge: str
    auth_time: datetime
    used: bool = False


@dataclass
class FakeCognito:
    client_id: str
    client_secret: str = field(repr=False)
    redirect_uris: tuple[str, ...] = ()
    logout_uris: tuple[str, ...] = ()
    # Who the next authorize call signs in; None: nobody can sign in.
    user: User | None = None
    # Misbehaviour: sign ID tokens for another audience, or with another nonce.
    audience: str | None = None
    nonce: str | None = None
    refusals: list[str] = field(default_factory=list)
    redeemed: int = 0
    logouts: list[str] = field(default_factory=list)
    _codes: dict[str, _Code] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _key: LocalIssuer | None = field(default=None, repr=False)

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> FakeCognito:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake._get(self)

            def do_POST(self) -> None:
                fake._post(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._key = LocalIssuer.create(self.issuer, self.client_id)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def issuer(self) -> str:
        return f"{self.url}/pool"

    # -- endpoints --------------------------------------------------------------------

    def _get(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/oauth2/authorize":
            self._authorize(request, query)
        elif parts.path == "/pool/.well-known/jwks.json":
            assert self._key is not None
            _json(request, 200, self._key.jwks())
        elif parts.path == "/logout":
            uri = query.get("logout_uri", "")
            if query.get("client_id") != self.client_id or uri not in self.logout_uris:
                _json(request, 400, {"error": "invalid_request"})
                return
            self.logouts.append(uri)
            _redirect(request, uri)
        else:
            _json(request, 404, {"error": "not_found"})

    def _authorize(self, request: BaseHTTPRequestHandler, query: dict[str, str]) -> None:
        valid = (
            query.get("response_type") == "code"
            and query.get("client_id") == self.client_id
            and query.get("redirect_uri") in self.redirect_uris
            and query.get("code_challenge_method") == "S256"
            and bool(query.get("code_challenge"))
            and "openid" in query.get("scope", "").split()
        )
        if not valid or self.user is None:
            _json(request, 400, {"error": "invalid_request"})
            return
        code = secrets.token_urlsafe(24)
        now = datetime.now(UTC)
        with self._lock:
            self._codes[code] = _Code(
                user=self.user,
                client_id=query["client_id"],
                redirect_uri=query["redirect_uri"],
                nonce=query.get("nonce"),
                challenge=query["code_challenge"],
                auth_time=self.user.auth_time or now,
            )
        answer = {"code": code}
        if "state" in query:
            answer["state"] = query["state"]
        _redirect(request, f"{query['redirect_uri']}?{urlencode(answer)}")

    def _post(self, request: BaseHTTPRequestHandler) -> None:
        if urlsplit(request.path).path != "/oauth2/token":
            _json(request, 404, {"error": "not_found"})
            return
        length = int(request.headers.get("Content-Length") or 0)
        form = {k: v[-1] for k, v in parse_qs(request.rfile.read(length).decode()).items()}
        if not self._client_authenticated(request.headers.get("Authorization", "")):
            self._refuse(request, 401, "invalid_client", "client")
            return
        if form.get("grant_type") != "authorization_code":
            self._refuse(request, 400, "unsupported_grant_type", "grant_type")
            return
        with self._lock:
            grant = self._codes.get(form.get("code", ""))
            reason = _grant_problem(grant, form, self.client_id)
            if grant is not None and reason != "unknown_code":
                # Cognito burns a code on any redemption attempt.
                grant.used = True
        if reason is not None or grant is None:
            self._refuse(request, 400, "invalid_grant", reason or "unknown_code")
            return
        assert self._key is not None
        user, now = grant.user, datetime.now(UTC)
        claims: dict[str, Any] = {
            "sub": f"sub-{user.username}",
            "iss": self.issuer,
            "aud": self.audience or self.client_id,
            "token_use": "id",
            "auth_time": int(grant.auth_time.timestamp()),
            "iat": int(now.timestamp()),
            "exp": int((now + timedelta(hours=1)).timestamp()),
            "cognito:username": user.username,
            "cognito:groups": list(user.groups),
            "email": user.email or f"{user.username}@example.com",
        }
        if user.organization_id is not None:
            claims["custom:organization"] = user.organization_id
        nonce = self.nonce or grant.nonce
        if nonce is not None:
            claims["nonce"] = nonce
        id_token = self._key.sign(claims)
        self.redeemed += 1
        _json(
            request,
            200,
            {
                "id_token": id_token,
                "access_token": "opaque-access",
                "refresh_token": "opaque-refresh",
                "token_type": "Bearer",
                "expires_in": 3600,
            },
        )

    def _client_authenticated(self, header: str) -> bool:
        if not header.startswith("Basic "):
            return False
        try:
            pair = base64.b64decode(header.removeprefix("Basic ")).decode()
        except ValueError:
            return False
        client_id, _, secret = pair.partition(":")
        return unquote(client_id) == self.client_id and unquote(secret) == self.client_secret

    def _refuse(self, request: BaseHTTPRequestHandler, status: int, error: str, why: str) -> None:
        self.refusals.append(why)
        _json(request, status, {"error": error})


def _grant_problem(grant: _Code | None, form: dict[str, str], client_id: str) -> str | None:
    if grant is None:
        return "unknown_code"
    if grant.used:
        return "code_replayed"
    if form.get("client_id") != client_id or grant.client_id != client_id:
        return "client_id"
    if form.get("redirect_uri") != grant.redirect_uri:
        return "redirect_uri"
    verifier = form.get("code_verifier", "")
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    if challenge.decode() != grant.challenge:
        return "pkce"
    return None


def _json(request: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)


def _redirect(request: BaseHTTPRequestHandler, location: str) -> None:
    request.send_response(302)
    request.send_header("Location", location)
    request.send_header("Content-Length", "0")
    request.end_headers()
