"""A stand-in for Cognito's hosted UI with federation, for the embedded stack.

It serves what the dashboard and ``runplane login`` talk to in AWS, on 127.0.0.1:

- ``GET /oauth2/authorize``: a sign-in through one external provider (the
  ``identity_provider`` parameter, else a page listing them): OpenID Connect with the
  authorization code flow, or SAML 2.0 (AuthnRequest by HTTP-Redirect, the Response
  by HTTP-POST to ``/saml2/idpresponse``);
- ``GET /oauth2/idpresponse``: the OIDC provider's callback: the code is redeemed and
  its ID token verified (signature by the provider's JWKS, issuer, audience, expiry,
  nonce) before anyone is signed in;
- ``POST /saml2/idpresponse``: the SAML Response, verified by runplane.local.saml
  (signature, issuer, audience, recipient, validity, request, replay);
- ``POST /oauth2/token``: our clients' codes (single use, PKCE S256, the same
  redirect URI; a confidential client's secret) and refresh tokens;
- ``GET /logout`` and ``GET /.well-known/jwks.json``.

Tokens are Cognito-shaped, signed with the stack's own key: ``cognito:username`` is
``<provider>_<subject>``, ``identities`` names the provider, ``custom:groups`` holds
its groups as Cognito writes them (a JSON array from OIDC, ``[a, b]`` from SAML). As
in Cognito, attributes change only at a sign-in, and a refresh token does not ask the
provider again. A refused sign-in creates nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import secrets
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from runplane.adapters.jwt import JwtRejected, JwtVerifier, LocalIssuer
from runplane.local import saml

AUTHORIZATION_LIFETIME = timedelta(minutes=10)
CODE_LIFETIME = timedelta(minutes=5)
MAX_FORM_BYTES = 512 * 1024
GROUPS_CLAIM = "custom:groups"


@dataclass(frozen=True)
class BrokerClient:
    """An app client: confidential (the dashboard) when it has a secret."""

    client_id: str
    redirect_uris: tuple[str, ...]
    secret: str | None = field(default=None, repr=False)
    logout_uris: tuple[str, ...] = ()


@dataclass(frozen=True)
class OidcProvider:
    name: str
    organization: str
    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    groups_claim: str = "groups"
    email_claim: str = "email"
    roles: Mapping[str, str] = field(default_factory=dict)
    kind: str = "OIDC"


@dataclass(frozen=True)
class SamlProvider:
    name: str
    organization: str
    sso_url: str
    entity_id: str
    certificate_pem: str = field(repr=False)
    groups_attribute: str = "groups"
    email_attribute: str = "email"
    roles: Mapping[str, str] = field(default_factory=dict)
    kind: str = "SAML"


Provider = OidcProvider | SamlProvider


@dataclass
class _Authorization:
    client: BrokerClient
    redirect_uri: str
    state: str | None
    nonce: str | None
    challenge: str
    provider: Provider
    upstream_nonce: str
    request_id: str
    expires_at: datetime


@dataclass(frozen=True)
class _User:
    username: str
    sub: str
    provider: Provider
    subject: str
    email: str | None
    groups: str | None
    auth_time: datetime


@dataclass
class _Code:
    user: _User
    client_id: str
    redirect_uri: str
    nonce: str | None
    challenge: str
    expires_at: datetime


class Refused(Exception):
    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


class FederationBroker:
    def __init__(
        self,
        key: LocalIssuer,
        clients: tuple[BrokerClient, ...],
        providers: tuple[Provider, ...],
        clock: Callable[[], datetime],
        *,
        token_lifetime: timedelta = timedelta(hours=1),
        refresh_lifetime: timedelta = timedelta(hours=1),
        sp_entity_id: str = "urn:amazon:cognito:sp:runplane-local",
    ) -> None:
        self._key = key
        self._clients = {c.client_id: c for c in clients}
        self._providers = {p.name: p for p in providers}
        self._clock = clock
        self.token_lifetime = token_lifetime
        self.refresh_lifetime = refresh_lifetime
        self.sp_entity_id = sp_entity_id
        self._lock = threading.Lock()
        self._pending: dict[str, _Authorization] = {}
        self._codes: dict[str, _Code] = {}
        self._refresh: dict[str, tuple[_User, str, datetime]] = {}
        self._users: dict[str, _User] = {}
        self._seen_assertions: dict[str, datetime] = {}
        self._upstream_keys: dict[str, JwtVerifier] = {}
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FederationBroker:
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                broker._serve(self, "GET")

            def do_POST(self) -> None:
                broker._serve(self, "POST")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def issuer(self) -> str:
        return self._key.issuer

    def jwks(self) -> dict[str, Any]:
        return self._key.jwks()

    def bindings(self) -> str:
        """The ``sso_providers`` setting: each provider's organization and role map."""
        return json.dumps(
            {
                p.name: {"organization": p.organization, "roles": dict(p.roles)}
                for p in self._providers.values()
            }
        )

    @property
    def acs_url(self) -> str:
        return f"{self.url}/saml2/idpresponse"

    @property
    def oidc_callback(self) -> str:
        return f"{self.url}/oauth2/idpresponse"

    # -- HTTP -----------------------------------------------------------------------------

    def _serve(self, request: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(request.path)
        query = dict(parse_qsl(parts.query))
        routes: dict[tuple[str, str], Callable[[dict[str, str], BaseHTTPRequestHandler], None]] = {
            ("GET", "/oauth2/authorize"): self._authorize,
            ("GET", "/oauth2/idpresponse"): self._oidc_response,
            ("POST", "/saml2/idpresponse"): self._saml_response,
            ("POST", "/oauth2/token"): self._token,
            ("GET", "/logout"): self._logout,
            ("GET", "/.well-known/jwks.json"): self._jwks,
        }
        route = routes.get((method, parts.path))
        try:
            if route is None:
                raise Refused(404, "not_found")
            if method == "POST":
                length = int(request.headers.get("Content-Length") or 0)
                if length > MAX_FORM_BYTES:
                    raise Refused(413, "too_large")
                query = dict(parse_qsl(request.rfile.read(length).decode("utf-8", "replace")))
            route(query, request)
        except Refused as refused:
            _send(request, refused.status, {"error": refused.error})

    def _jwks(self, query: dict[str, str], request: BaseHTTPRequestHandler) -> None:
        _send(request, 200, self.jwks())

    def _authorize(self, query: dict[str, str], request: BaseHTTPRequestHandler) -> None:
        client = self._clients.get(query.get("client_id", ""))
        redirect_uri = query.get("redirect_uri", "")
        if client is None or redirect_uri not in client.redirect_uris:
            # Never redirect to a URI the client did not register.
            raise Refused(400, "invalid_client_or_redirect_uri")
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256":
            raise Refused(400, "pkce_s256_code_required")
        chosen = query.get("identity_provider")
        if chosen is None and len(self._providers) > 1:
            self._chooser(query, request)
            return
        provider = self._providers.get(chosen or next(iter(self._providers), ""))
        if provider is None:
            raise Refused(400, "unknown_identity_provider")
        now = self._clock()
        pending = _Authorization(
            client=client,
            redirect_uri=redirect_uri,
            state=query.get("state"),
            nonce=query.get("nonce"),
            challenge=query.get("code_challenge", ""),
            provider=provider,
            upstream_nonce=secrets.token_urlsafe(24),
            request_id="_" + secrets.token_hex(20),
            expires_at=now + AUTHORIZATION_LIFETIME,
        )
        relay = secrets.token_urlsafe(24)
        with self._lock:
            self._pending[relay] = pending
        if isinstance(provider, OidcProvider):
            endpoint = self._discovery(provider)["authorization_endpoint"]
            location = f"{endpoint}?" + urlencode(
                {
                    "response_type": "code",
                    "client_id": provider.client_id,
                    "redirect_uri": self.oidc_callback,
                    "scope": "openid email profile",
                    "state": relay,
                    "nonce": pending.upstream_nonce,
                }
            )
        else:
            request_xml = saml.authn_request(
                pending.request_id,
                issuer=self.sp_entity_id,
                destination=provider.sso_url,
                acs_url=self.acs_url,
                now=now,
            )
            location = saml.redirect_url(provider.sso_url, request_xml, relay)
        _redirect(request, location)

    def _chooser(self, query: dict[str, str], request: BaseHTTPRequestHandler) -> None:
        links = "".join(
            f'<li><a href="{html.escape(self._choice(query, name))}">{html.escape(name)}</a></li>'
            for name in self._providers
        )
        body = f"<!doctype html><title>Sign in</title><ul>{links}</ul>".encode()
        request.send_response(200)
        request.send_header("Content-Type", "text/html; charset=utf-8")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    @staticmethod
    def _choice(query: dict[str, str], provider: str) -> str:
        return "/oauth2/authorize?" + urlencode({**query, "identity_provider": provider})

    def _take_pending(self, relay: str | None) -> _Authorization:
        with self._lock:
            pending = self._pending.pop(relay or "", None)
        if pending is None or pending.expires_at <= self._clock():
            raise Refused(400, "unknown_or_expired_sign_in")
        return pending

    def _oidc_response(self, query: dict[str, str], request: BaseHTTPRequestHandler) -> None:
        pending = self._take_pending(query.get("state"))
        provider = pending.provider
        if not isinstance(provider, OidcProvider):
            raise Refused(400, "unknown_or_expired_sign_in")
        if "code" not in query:
            self._back_with_error(request, pending, "access_denied")
            return
        try:
            claims = self._redeem_upstream(provider, query["code"], pending.upstream_nonce)
        except Refused:
            self._back_with_error(request, pending, "invalid_request")
            return
        groups = claims.get(provider.groups_claim)
        # Cognito keeps a multi-valued OIDC claim as its JSON text.
        stored = json.dumps(groups, separators=(",", ":")) if isinstance(groups, list) else groups
        email = claims.get(provider.email_claim)
        self._signed_in(
            request,
            pending,
            subject=str(claims["sub"]),
            email=email if isinstance(email, str) else None,
            groups=stored if isinstance(stored, str) else None,
        )

    def _redeem_upstream(self, provider: OidcProvider, code: str, nonce: str) -> dict[str, Any]:
        endpoint = self._discovery(provider)["token_endpoint"]
        form = urlencode(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": self.oidc_callback,
                "client_id": provider.client_id,
                "client_secret": provider.client_secret,
            }
        ).encode()
        answer = _fetch_json(endpoint, form)
        token = answer.get("id_token")
        if not isinstance(token, str):
            raise Refused(400, "no_id_token")
        verifier = self._upstream_verifier(provider)
        try:
            verified = verifier.verify(token, self._clock())
        except JwtRejected:
            raise Refused(400, "invalid_id_token") from None
        presented = verified.claims.get("nonce")
        if not isinstance(presented, str) or not hmac.compare_digest(presented, nonce):
            raise Refused(400, "nonce_mismatch")
        return dict(verified.claims)

    def _upstream_verifier(self, provider: OidcProvider) -> JwtVerifier:
        with self._lock:
            known = self._upstream_keys.get(provider.name)
        if known is None:
            jwks = _fetch_json(self._discovery(provider)["jwks_uri"])
            known = JwtVerifier(issuer=provider.issuer, audience=provider.client_id, jwks=jwks)
            with self._lock:
                self._upstream_keys[provider.name] = known
        return known

    def _discovery(self, provider: OidcProvider) -> dict[str, Any]:
        found = _fetch_json(f"{provider.issuer}/.well-known/openid-configuration")
        if found.get("issuer") != provider.issuer:
            raise Refused(502, "provider_discovery_mismatch")
        return found

    def _saml_response(self, form: dict[str, str], request: BaseHTTPRequestHandler) -> None:
        pending = self._take_pending(form.get("RelayState"))
        provider = pending.provider
        if not isinstance(provider, SamlProvider):
            raise Refused(400, "unknown_or_expired_sign_in")
        now = self._clock()
        try:
            identity = saml.verify_response(
                form.get("SAMLResponse", ""),
                certificate_pem=provider.certificate_pem,
                idp_entity_id=provider.entity_id,
                sp_entity_id=self.sp_entity_id,
                acs_url=self.acs_url,
                request_id=pending.request_id,
                now=now,
            )
            with self._lock:
                for seen, until in list(self._seen_assertions.items()):
                    if until <= now:
                        del self._seen_assertions[seen]
                if identity.assertion_id in self._seen_assertions:
                    raise saml.SamlRefused("replayed")
                self._seen_assertions[identity.assertion_id] = identity.valid_until
        except saml.SamlRefused as refused:
            raise Refused(400, f"saml_{refused.reason}") from None
        groups = identity.attributes.get(provider.groups_attribute, ())
        emails = identity.attributes.get(provider.email_attribute, ())
        self._signed_in(
            request,
            pending,
            subject=identity.subject,
            email=emails[0] if emails else None,
            # Cognito writes a multi-valued SAML attribute as "[a, b]".
            groups=None
            if not groups
            else (groups[0] if len(groups) == 1 else "[" + ", ".join(groups) + "]"),
        )

    def _signed_in(
        self,
        request: BaseHTTPRequestHandler,
        pending: _Authorization,
        *,
        subject: str,
        email: str | None,
        groups: str | None,
    ) -> None:
        now = self._clock()
        username = f"{pending.provider.name}_{subject}"
        with self._lock:
            known = self._users.get(username)
            user = _User(
                username=username,
                sub=known.sub if known else str(uuid.uuid4()),
                provider=pending.provider,
                subject=subject,
                email=email,
                groups=groups,
                auth_time=now,
            )
            self._users[username] = user
            code = secrets.token_urlsafe(32)
            self._codes[code] = _Code(
                user,
                pending.client.client_id,
                pending.redirect_uri,
                pending.nonce,
                pending.challenge,
                now + CODE_LIFETIME,
            )
        _redirect(request, _with_query(pending.redirect_uri, code=code, state=pending.state))

    def _back_with_error(
        self, request: BaseHTTPRequestHandler, pending: _Authorization, error: str
    ) -> None:
        _redirect(request, _with_query(pending.redirect_uri, error=error, state=pending.state))

    def _token(self, form: dict[str, str], request: BaseHTTPRequestHandler) -> None:
        client = self._authenticated_client(form, request)
        grant = form.get("grant_type")
        now = self._clock()
        if grant == "authorization_code":
            with self._lock:
                code = self._codes.pop(form.get("code", ""), None)
            if (
                code is None
                or code.expires_at <= now
                or code.client_id != client.client_id
                or code.redirect_uri != form.get("redirect_uri")
                or not _pkce_matches(form.get("code_verifier", ""), code.challenge)
            ):
                raise Refused(400, "invalid_grant")
            refresh = secrets.token_urlsafe(48)
            with self._lock:
                self._refresh[refresh] = (code.user, client.client_id, now + self.refresh_lifetime)
            answer = self._tokens(code.user, client, code.nonce)
            _send(request, 200, {**answer, "refresh_token": refresh})
            return
        if grant == "refresh_token":
            with self._lock:
                held = self._refresh.get(form.get("refresh_token", ""))
            if held is None or held[1] != client.client_id or held[2] <= now:
                raise Refused(400, "invalid_grant")
            with self._lock:
                # As Cognito: the attributes of the latest sign-in, not the provider's now.
                user = self._users.get(held[0].username, held[0])
            _send(request, 200, self._tokens(user, client, None))
            return
        raise Refused(400, "unsupported_grant_type")

    def _authenticated_client(
        self, form: dict[str, str], request: BaseHTTPRequestHandler
    ) -> BrokerClient:
        client_id, secret = form.get("client_id", ""), None
        basic = request.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            try:
                pair = base64.b64decode(basic[6:]).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                raise Refused(401, "invalid_client") from None
            from urllib.parse import unquote

            client_id, _, secret = (unquote(p) for p in pair.partition(":"))
        client = self._clients.get(client_id)
        if client is None:
            raise Refused(401, "invalid_client")
        if client.secret is not None and not (
            secret is not None and hmac.compare_digest(secret, client.secret)
        ):
            raise Refused(401, "invalid_client")
        return client

    def _tokens(self, user: _User, client: BrokerClient, nonce: str | None) -> dict[str, Any]:
        now = self._clock()
        signer = LocalIssuer(
            issuer=self._key.issuer,
            audience=client.client_id,
            private_key=self._key.private_key,
            kid=self._key.kid,
        )
        common = {
            "sub": user.sub,
            "iss": self._key.issuer,
            "auth_time": int(user.auth_time.timestamp()),
            "iat": int(now.timestamp()),
            "exp": int((now + self.token_lifetime).timestamp()),
        }
        identity = {
            **common,
            "aud": client.client_id,
            "token_use": "id",
            "cognito:username": user.username,
            "identities": [
                {
                    "userId": user.subject,
                    "providerName": user.provider.name,
                    "providerType": user.provider.kind,
                    "issuer": None,
                    "primary": "true",
                    "dateCreated": str(int(user.auth_time.timestamp() * 1000)),
                }
            ],
        }
        if user.email is not None:
            identity["email"] = user.email
        if user.groups is not None:
            identity[GROUPS_CLAIM] = user.groups
        if nonce is not None:
            identity["nonce"] = nonce
        access = {
            **common,
            "client_id": client.client_id,
            "token_use": "access",
            "scope": "openid email profile",
            "username": user.username,
            "jti": str(uuid.uuid4()),
        }
        return {
            "id_token": signer.sign(identity),
            "access_token": signer.sign(access),
            "token_type": "Bearer",
            "expires_in": int(self.token_lifetime.total_seconds()),
        }

    def _logout(self, query: dict[str, str], request: BaseHTTPRequestHandler) -> None:
        client = self._clients.get(query.get("client_id", ""))
        target = query.get("logout_uri", "")
        if client is None or target not in client.logout_uris:
            raise Refused(400, "invalid_logout_uri")
        _redirect(request, target)


def _pkce_matches(verifier: str, challenge: str) -> bool:
    if not verifier or not challenge:
        return False
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    expected = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    return hmac.compare_digest(expected, challenge)


def _with_query(url: str, **values: str | None) -> str:
    query = urlencode({k: v for k, v in values.items() if v is not None})
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _redirect(request: BaseHTTPRequestHandler, location: str) -> None:
    request.send_response(302)
    request.send_header("Location", location)
    request.send_header("Content-Length", "0")
    request.end_headers()


def _send(request: BaseHTTPRequestHandler, status: int, body: Mapping[str, Any]) -> None:
    data = json.dumps(body).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)


def _fetch_json(url: str, form: bytes | None = None) -> dict[str, Any]:
    headers = {"Accept": "application/json"}
    if form is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    outgoing = urllib.request.Request(url, data=form, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(outgoing, timeout=10) as response:  # noqa: S310
            value = json.loads(response.read(MAX_FORM_BYTES))
    except urllib.error.HTTPError as error:
        error.close()
        raise Refused(400, "provider_refused") from None
    except (urllib.error.URLError, OSError, ValueError):
        raise Refused(502, "provider_unreachable") from None
    if not isinstance(value, dict):
        raise Refused(502, "provider_unreachable")
    return value
