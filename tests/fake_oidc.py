"""An external OpenID Connect provider over real HTTP on 127.0.0.1, for SSO tests.

It serves discovery, its JWKS, ``/authorize`` (signing in whoever ``login_as``
names, if that user exists) and ``/token`` (client secret, single-use code, the same
redirect URI), answering an RS256 ID token with the user's e-mail, groups and the
nonce. A test changes ``users`` (add, remove, regroup) and can make the provider
misbehave: another audience, another signing key.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from runplane.adapters.jwt import LocalIssuer


@dataclass
class OidcUser:
    email: str
    groups: list[str] = field(default_factory=list)
    # Extra claims the provider asserts (a test may claim an organization).
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Code:
    subject: str
    redirect_uri: str
    nonce: str | None


class FakeOidcProvider:
    def __init__(self, client_id: str, client_secret: str) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.users: dict[str, OidcUser] = {}
        self.login_as: str | None = None
        # Misbehaviour knobs.
        self.audience: str | None = None
        self.rogue_key = False
        self._codes: dict[str, _Code] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""
        self._key: LocalIssuer | None = None
        self._rogue: LocalIssuer | None = None

    def start(self) -> FakeOidcProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider._get(self)

            def do_POST(self) -> None:
                provider._post(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._key = LocalIssuer.create(self.url, self.client_id)
        self._rogue = LocalIssuer.create(self.url, self.client_id)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _get(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        query = dict(parse_qsl(parts.query))
        assert self._key is not None
        if parts.path == "/.well-known/openid-configuration":
            _json(
                request,
                200,
                {
                    "issuer": self.url,
                    "authorization_endpoint": f"{self.url}/authorize",
                    "token_endpoint": f"{self.url}/token",
                    "jwks_uri": f"{self.url}/jwks",
                },
            )
        elif parts.path == "/jwks":
            _json(request, 200, self._key.jwks())
        elif parts.path == "/authorize":
            redirect_uri = query.get("redirect_uri", "")
            user = self.login_as
            answer = {"state": query.get("state", "")}
            if query.get("client_id") != self.client_id or user not in self.users:
                answer["error"] = "access_denied"
            else:
                answer["code"] = secrets.token_urlsafe(16)
                with self._lock:
                    self._codes[answer["code"]] = _Code(user, redirect_uri, query.get("nonce"))
            target = f"{redirect_uri}?{urlencode(answer)}"
            request.send_response(302)
            request.send_header("Location", target)
            request.end_headers()
        else:
            _json(request, 404, {"error": "not_found"})

    def _post(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        form = dict(parse_qsl(request.rfile.read(length).decode()))
        if urlsplit(request.path).path != "/token":
            _json(request, 404, {"error": "not_found"})
            return
        if (
            form.get("client_id") != self.client_id
            or form.get("client_secret") != self.client_secret
        ):
            _json(request, 401, {"error": "invalid_client"})
            return
        with self._lock:
            code = self._codes.pop(form.get("code", ""), None)
        if code is None or code.redirect_uri != form.get("redirect_uri"):
            _json(request, 400, {"error": "invalid_grant"})
            return
        user = self.users[code.subject]
        now = datetime.now(UTC)
        claims: dict[str, Any] = {
            **user.extra,
            "iss": self.url,
            "sub": code.subject,
            "aud": self.audience or self.client_id,
            "iat": int(now.timestamp()),
            "exp": int((now + timedelta(minutes=5)).timestamp()),
            "email": user.email,
            "groups": list(user.groups),
        }
        if code.nonce is not None:
            claims["nonce"] = code.nonce
        signer = self._rogue if self.rogue_key else self._key
        assert signer is not None
        _json(request, 200, {"id_token": signer.sign(claims), "token_type": "Bearer"})


def _json(request: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)
