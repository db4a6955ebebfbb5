"""Runplane as an OpenID Connect issuer: its discovery document, its published keys,
and the workload identity tokens it signs (docs/credentials.md).

The issuer is configured with its URL and an ordered list of KMS key IDs: the first
signs every new token, and every key of the list is published in the JWKS, so a token
signed before a rotation still verifies until its key is dropped from the list.

Who may have a token is not decided here: the service that redeems a run's credential
capability (bound to its attempt, phase and expiry) asks for one. The public endpoints
need no caller: the discovery document and the JWKS hold public keys and URLs only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from runplane.domain.clock import Clock
from runplane.domain.errors import (
    OidcIssuerNotConfigured,
    SigningKeyUnavailable,
    WorkloadIdentityRefused,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.workload_identity import (
    CLAIMS_SUPPORTED,
    MAX_LIFETIME,
    TokenRequest,
    WorkloadIdentityClaims,
    claims_for,
)

JWKS_PATH = "/.well-known/jwks.json"
DISCOVERY_PATH = "/.well-known/openid-configuration"


class TokenSigner(Protocol):
    """Signs with, and publishes, keys that never leave their store (KMS)."""

    def public_jwk(self, key_id: str) -> Mapping[str, str]:
        """The key's public half as a JWK (``kid``, ``kty``, ``n``, ``e``, ``use``, ``alg``)."""
        ...

    def sign_jwt(self, key_id: str, claims: Mapping[str, Any]) -> str:
        """``claims`` as a compact RS256 JWS signed by the key, its ``kid`` in the header."""
        ...


class WorkloadIdentity:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        signer: TokenSigner,
        *,
        issuer: str | None,
        key_ids: Sequence[str],
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._signer = signer
        self._issuer = issuer
        self._key_ids = tuple(key_ids)

    @property
    def issuer(self) -> str:
        return self._configured()[0]

    def _configured(self) -> tuple[str, tuple[str, ...]]:
        """The issuer URL and its keys, the signing key first."""
        if not self._issuer:
            raise OidcIssuerNotConfigured("oidc_issuer_url")
        if not self._key_ids:
            raise OidcIssuerNotConfigured("oidc_signing_key_ids")
        return self._issuer, self._key_ids

    # -- the public documents --------------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        """The OpenID provider configuration (OpenID Connect Discovery 1.0 §3), as
        workload identity federation reads it: the issuer, where its keys are, and what
        its tokens hold."""
        issuer, _ = self._configured()
        return {
            "issuer": issuer,
            "jwks_uri": issuer + JWKS_PATH,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid"],
            "claims_supported": list(CLAIMS_SUPPORTED),
        }

    def jwks(self) -> dict[str, Any]:
        """Every published key, the signing key first (one entry per distinct key: a key
        listed twice, by ID and by ARN, is published once).

        The signing key must be readable (else ``SigningKeyUnavailable``: no verifier
        should see a key set without it). An earlier key KMS no longer serves (disabled
        or deleted before it was dropped from the list) is left out: its tokens then fail
        verification, and every other key's still verify."""
        signing_key, *earlier = self._configured()[1]
        keys: dict[str, Mapping[str, str]] = {}
        for key_id in (signing_key, *earlier):
            try:
                jwk = self._signer.public_jwk(key_id)
            except SigningKeyUnavailable:
                if key_id == signing_key:
                    raise
                continue
            keys.setdefault(jwk["kid"], jwk)
        return {"keys": [dict(jwk) for jwk in keys.values()]}

    # -- tokens ----------------------------------------------------------------------------

    def claims(
        self,
        request: TokenRequest,
        *,
        phase_deadline: datetime,
        lifetime: timedelta = MAX_LIFETIME,
    ) -> WorkloadIdentityClaims:
        """The claims of a token for ``request``, issued now by this issuer with a fresh
        token ID, living ``lifetime`` clipped to the phase's deadline and the maximum."""
        return claims_for(
            request,
            issuer=self.issuer,
            token_id=self._ids.new(IdKind.WORKLOAD_IDENTITY_TOKEN),
            now=self._clock.now(),
            phase_deadline=phase_deadline,
            requested_lifetime=lifetime,
        )

    def mint(self, claims: WorkloadIdentityClaims) -> str:
        """``claims`` signed with the current key (the first configured). Claims of
        another issuer, or already expired, are refused."""
        issuer, (signing_key, *_) = self._configured()
        if claims.issuer != issuer:
            raise WorkloadIdentityRefused("the claims name another issuer than this one", "/iss")
        if int(self._clock.now().timestamp()) >= claims.expires_at:
            raise WorkloadIdentityRefused("the claims have expired: nothing was signed", "/exp")
        return self._signer.sign_jwt(signing_key, claims.to_jwt())

    def issue(
        self,
        request: TokenRequest,
        *,
        phase_deadline: datetime,
        lifetime: timedelta = MAX_LIFETIME,
    ) -> str:
        """A signed token for ``request`` (``claims`` then ``mint``)."""
        return self.mint(self.claims(request, phase_deadline=phase_deadline, lifetime=lifetime))
