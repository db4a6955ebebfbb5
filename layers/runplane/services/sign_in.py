"""Dashboard sign-in through a Cognito hosted UI (authorization code flow with PKCE).

``start`` opens a pre-session and names the hosted UI's authorize URL;
``finish`` takes the browser back from the callback: the pre-session must exist,
be fresh and match ``state``; it is consumed before the code is redeemed; the
ID token must verify (signature, issuer, audience, expiry) and answer this
sign-in (``nonce``, ``token_use``); the person is mapped to a principal exactly
as an API bearer token is (``services.identity.user_principal``). Only then is a
cookie session opened. Any refusal creates nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from runplane.adapters.hosted_ui import HostedUi
from runplane.adapters.jwt import JwtRejected, JwtVerifier, VerifiedClaims
from runplane.domain.capabilities import handle_hash
from runplane.domain.clock import Clock
from runplane.domain.errors import NotFound, SignInRefused, SignInUnavailable
from runplane.domain.federation import NO_FEDERATION, Federation
from runplane.domain.identity import Unauthenticated
from runplane.domain.sign_in import (
    PRE_SESSION_LIFETIME,
    Binding,
    authorize_url,
    check_id_token,
    logout_url,
    signed_out_uri,
)
from runplane.domain.web_session import new_secret
from runplane.services.identity import ORGANIZATION_CLAIM, user_name, user_principal
from runplane.services.repositories.access import PreSessionStore
from runplane.services.web_sessions import SignedIn, WebSessions

# The verifier's reasons that a person can act on differently; the rest are one.
_AUDIENCE = "wrong_audience"


@dataclass(frozen=True)
class Started:
    """A sign-in begun: the pre-session secret for the cookie, where to send the browser."""

    secret: str = field(repr=False)
    location: str = field(repr=False)
    valid_until: datetime


class HostedUiSignIn:
    def __init__(
        self,
        clock: Clock,
        pre_sessions: PreSessionStore,
        web_sessions: WebSessions,
        hosted_ui: HostedUi,
        verifier: Callable[[], JwtVerifier],
        organization_exists: Callable[[str], bool],
        *,
        federation: Federation = NO_FEDERATION,
    ) -> None:
        self._federation = federation
        self._clock = clock
        self._pre_sessions = pre_sessions
        self._web_sessions = web_sessions
        self._hosted_ui = hosted_ui
        self._verifier = verifier
        self._organization_exists = organization_exists

    def start(self) -> Started:
        secret = new_secret()
        now = self._clock.now()
        valid_until = now + PRE_SESSION_LIFETIME
        self._pre_sessions.put_pre_session(handle_hash(secret), now, valid_until)
        ui = self._hosted_ui
        location = authorize_url(ui.domain, ui.client_id, ui.redirect_uri, Binding.of(secret))
        return Started(secret, location, valid_until)

    def finish(
        self,
        secret: str | None,
        state: str | None,
        code: str | None,
        error: str | None,
        source_address: str | None = None,
    ) -> SignedIn:
        if not secret:
            raise SignInRefused(
                "no_pre_session", "this browser did not start the sign-in, or took too long"
            )
        secret_hash = handle_hash(secret)
        valid_until = self._pre_sessions.pre_session_validity(secret_hash)
        if valid_until is None:
            raise SignInRefused(
                "pre_session_used", "this sign-in was already finished or abandoned"
            )
        if valid_until <= self._clock.now():
            raise SignInRefused("pre_session_expired", "this sign-in took too long")
        binding = Binding.of(secret)
        if not binding.state_matches(state):
            raise SignInRefused("state_mismatch", "the sign-in answer is not for this browser")
        # Single use from here on, whatever the outcome: a second callback with the same
        # cookie, concurrent or later, is refused before its code is redeemed.
        self._pre_sessions.consume_pre_session(secret_hash)
        if error is not None or not code:
            raise SignInRefused("provider_refused", "the identity provider did not sign you in")
        id_token = self._hosted_ui.exchange(code, binding.verifier)
        now = self._clock.now()
        try:
            claims = self._verifier().verify(id_token, now)
        except JwtRejected as rejected:
            reason = _AUDIENCE if rejected.reason == _AUDIENCE else "invalid_id_token"
            raise SignInRefused(reason, rejected.message) from None
        try:
            auth_time = check_id_token(claims.claims, nonce=binding.nonce, now=now)
        except SignInRefused as refused:
            self._record_refusal(claims, refused.reason, source_address)
            raise
        try:
            principal = user_principal(claims, self._federation)
        except Unauthenticated:
            raise SignInRefused(
                "unknown_user", "your account belongs to no Runplane organization"
            ) from None
        if not self._organization_exists(principal.organization_id):
            raise SignInRefused(
                "unknown_user", "your account names an organization that does not exist"
            )
        return self._web_sessions.open(
            principal.organization_id,
            user_name(claims),
            principal.permissions,
            auth_time=auth_time,
            groups=principal.groups,
            source_address=source_address,
            # Not beyond the ID token: a person the provider no longer signs in loses
            # the dashboard within a token lifetime (docs/sso.md, "Deprovisioning").
            until=claims.expires_at,
        )

    def _record_refusal(
        self, claims: VerifiedClaims, reason: str, source_address: str | None
    ) -> None:
        # A verified token names its organization: the refusal goes on that trail.
        organization_id = claims.claims.get(ORGANIZATION_CLAIM)
        if isinstance(organization_id, str) and self._organization_exists(organization_id):
            self._web_sessions.refused(
                organization_id, user_name(claims), "hosted_ui", reason, source_address
            )

    def signed_out_location(self) -> str:
        ui = self._hosted_ui
        return logout_url(ui.domain, ui.client_id, signed_out_uri(ui.redirect_uri))


class CachedKeys:
    """The issuer's key set: from settings when the deployment pinned it, else read
    from the issuer once per process (``<issuer>/.well-known/jwks.json``)."""

    def __init__(
        self,
        issuer: str,
        audience: str,
        pinned: dict[str, object] | None,
        fetch: Callable[[str], dict[str, object]],
    ) -> None:
        self._issuer = issuer
        self._audience = audience
        self._pinned = pinned
        self._fetch = fetch
        self._verifier: JwtVerifier | None = None
        self._lock = threading.Lock()

    def __call__(self) -> JwtVerifier:
        with self._lock:
            if self._verifier is None:
                jwks = self._pinned or self._fetch(
                    f"{self._issuer.rstrip('/')}/.well-known/jwks.json"
                )
                try:
                    self._verifier = JwtVerifier(
                        issuer=self._issuer, audience=self._audience, jwks=jwks
                    )
                except ValueError:
                    raise SignInUnavailable("the identity provider's key set is unusable") from None
            return self._verifier


def organization_exists(lookup: Callable[[str], str]) -> Callable[[str], bool]:
    def exists(organization_id: str) -> bool:
        try:
            lookup(organization_id)
        except NotFound:
            return False
        return True

    return exists
