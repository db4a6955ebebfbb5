"""RS256 JSON Web Tokens as Amazon Cognito user pools issue them.

PyJWT does the JOSE work: it decodes the three segments (base64url alphabet only,
no stray low bits, JSON objects, a duplicate member's last value winning), refuses
any ``alg`` but RS256, verifies the RSASSA-PKCS1-v1_5 SHA-256 signature with the
key we pick (refusing keys under 2048 bits), checks that ``iss`` equals the issuer
exactly and that ``sub`` and ``jti``, if present, are strings. It tolerates
trailing ``=`` padding, so a token has more than one spelling; each carries the
same signed bytes, and nothing of ours keys on a token's spelling. PyJWT is imported
on the first verification, not with this module: the authorizer builds the verifier
at every cold start, also for the API tokens and runner sessions that carry no JWT.

What stays ours is what PyJWT does not know or does differently:

* Cognito's claims: ``token_use``, if present, is ``id`` or ``access``; an ID
  token's ``aud`` or an access token's ``client_id`` equals the audience (without
  ``token_use``, either may; PyJWT's audience check knows ``aud`` only); the
  subject is a non-empty string; ``cognito:groups`` is a list of strings.
* Times against the caller's ``now`` (PyJWT reads the wall clock, and its ``int()``
  would take ``"exp": "1999999999"`` or ``true``): ``exp`` is a finite number and
  ``now < exp + leeway``; ``nbf`` and ``iat`` are not later than ``now + leeway``.
* Before PyJWT verifies anything: a token longer than ``MAX_TOKEN_LENGTH`` or
  not ASCII is refused; the header's ``alg`` must be RS256 and its ``kid`` must name a key of
  the configured JWKS, so each failure has its own reason; a ``crit`` header is
  refused (PyJWT accepts ``crit: ["b64"]``). Keys never come from the token
  (``jku``, ``x5u`` and ``jwk`` headers are ignored), and the key handed to PyJWT
  is an RSA public key object, which no HMAC algorithm accepts as a secret.
* The JWKS is read when the verifier is built (RSA signing keys of at least 2048
  bits, one per kid), so a bad configuration fails at start, without PyJWT.

:class:`LocalIssuer` signs Cognito-shaped tokens (with PyJWT) for the embedded
development stack and for tests.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import os
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from cryptography.hazmat.primitives.asymmetric import rsa

if TYPE_CHECKING:
    from jwt import PyJWTError

RejectReason = Literal[
    "malformed",
    "bad_signature",
    "unknown_key",
    "expired",
    "not_yet_valid",
    "wrong_issuer",
    "wrong_audience",
    "wrong_token_use",
    "unsupported_algorithm",
]

ALGORITHM = "RS256"
MIN_KEY_BITS = 2048
# Far above any Cognito token (API Gateway caps a header at 10 KiB); bounds the
# work an unauthenticated caller can ask of us.
MAX_TOKEN_LENGTH = 16 * 1024
# Cognito's token_use values (named so that no literal sits next to "token").
_ID = "id"
_ACCESS = "access"
_TOKEN_USES = frozenset({_ID, _ACCESS})


class JwtRejected(Exception):
    """A token failed verification. ``reason`` is machine-readable; the message is
    for humans and never repeats any part of the token."""

    def __init__(self, reason: RejectReason, message: str) -> None:
        super().__init__(message)
        self.reason: RejectReason = reason
        self.message = message

    def __reduce__(self) -> tuple[type[JwtRejected], tuple[RejectReason, str]]:
        return (type(self), (self.reason, self.message))


@dataclass(frozen=True)
class VerifiedClaims:
    subject: str
    issuer: str
    auth_time: datetime | None
    expires_at: datetime
    groups: tuple[str, ...]
    username: str | None
    email: str | None
    claims: Mapping[str, Any] = field(hash=False)


class JwtVerifier:
    """Verifies RS256 tokens against a fixed JWKS (see the module docstring)."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks: Mapping[str, Any],
        leeway_seconds: int = 60,
    ) -> None:
        if not issuer:
            raise ValueError("issuer must not be empty")
        if not audience:
            raise ValueError("audience must not be empty")
        if leeway_seconds < 0:
            raise ValueError("leeway_seconds must not be negative")
        self._issuer = issuer
        self._audience = audience
        self._leeway = leeway_seconds
        self._keys = _parse_jwks(jwks)

    @property
    def issuer(self) -> str:
        return self._issuer

    @property
    def audience(self) -> str:
        return self._audience

    def verify(self, token: str, now: datetime) -> VerifiedClaims:
        """Return the token's claims, or raise :class:`JwtRejected`. ``now`` must be
        timezone-aware."""
        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError("now must be timezone-aware")
        # A compact JWS is ASCII; PyJWT encodes the token as UTF-8 first, which raises
        # (not a PyJWT error) on a lone surrogate.
        if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH or not token.isascii():
            raise JwtRejected("malformed", "token is not an ASCII string of acceptable length")
        import jwt

        try:
            # Decodes every segment, so a bad encoding anywhere is "malformed" before
            # the header is read; PyJWT also refuses a kid that is not a string and
            # critical extensions other than b64.
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise JwtRejected("malformed", "token is not a well-formed signed JWT") from None
        if header.get("alg") != ALGORITHM:
            raise JwtRejected("unsupported_algorithm", "token algorithm is not RS256")
        # Even the b64 extension PyJWT understands: Cognito never sets crit.
        if "crit" in header:
            raise JwtRejected("malformed", "token header has critical extensions")
        key = self._keys.get(header.get("kid", ""))
        if key is None:
            raise JwtRejected("unknown_key", "token is signed with a key not in the key set")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                issuer=self._issuer,
                options={
                    # Times are checked against the caller's clock (_check_claims),
                    # the audience by Cognito's token_use rules.
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": False,
                    "enforce_minimum_key_length": True,
                },
            )
        except jwt.PyJWTError as error:
            raise _rejection(error) from None
        return self._check_claims(claims, now)

    def _check_claims(self, claims: dict[str, Any], now: datetime) -> VerifiedClaims:
        now_ts = now.timestamp()
        exp = _numeric_date(claims, "exp")
        if exp is None:
            raise JwtRejected("malformed", "token has no exp claim")
        if now_ts >= exp + self._leeway:
            raise JwtRejected("expired", "token has expired")
        for name in ("nbf", "iat"):
            when = _numeric_date(claims, name)
            if when is not None and when > now_ts + self._leeway:
                raise JwtRejected("not_yet_valid", f"token {name} is in the future")

        token_use = claims.get("token_use")
        if token_use is not None and (
            not isinstance(token_use, str) or token_use not in _TOKEN_USES
        ):
            raise JwtRejected("wrong_token_use", "token_use is neither id nor access")
        if token_use == _ID:
            audience_ok = _audience_matches(claims.get("aud"), self._audience)
        elif token_use == _ACCESS:
            audience_ok = claims.get("client_id") == self._audience
        else:
            audience_ok = (
                _audience_matches(claims.get("aud"), self._audience)
                or claims.get("client_id") == self._audience
            )
        if not audience_ok:
            raise JwtRejected("wrong_audience", "token is not for this audience")

        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise JwtRejected("malformed", "token has no subject")
        auth_time = _numeric_date(claims, "auth_time")
        groups = claims.get("cognito:groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise JwtRejected("malformed", "token cognito:groups is not a list of strings")
        username = claims.get("cognito:username", claims.get("username"))
        email = claims.get("email")
        return VerifiedClaims(
            subject=subject,
            issuer=self._issuer,
            auth_time=None if auth_time is None else _datetime(auth_time),
            expires_at=_datetime(exp),
            groups=tuple(groups),
            username=username if isinstance(username, str) else None,
            email=email if isinstance(email, str) else None,
            claims=MappingProxyType(claims),
        )


def _rejection(error: PyJWTError) -> JwtRejected:
    """Our reason for what PyJWT refused (its messages may quote the token: not kept)."""
    import jwt

    if isinstance(error, jwt.InvalidSignatureError):
        return JwtRejected("bad_signature", "token signature does not verify")
    if isinstance(error, jwt.InvalidAlgorithmError):
        return JwtRejected("unsupported_algorithm", "token algorithm is not RS256")
    if isinstance(error, jwt.InvalidIssuerError) or (
        isinstance(error, jwt.MissingRequiredClaimError) and error.claim == "iss"
    ):
        return JwtRejected("wrong_issuer", "token issuer is not the expected issuer")
    # The payload is not a JSON object, or sub or jti is not a string.
    return JwtRejected("malformed", "token payload is not a valid claim set")


class LocalIssuer:
    """Signs Cognito-shaped RS256 tokens with a local key (embedded stack, tests)."""

    def __init__(
        self, *, issuer: str, audience: str, private_key: rsa.RSAPrivateKey, kid: str
    ) -> None:
        if not issuer:
            raise ValueError("issuer must not be empty")
        if not audience:
            raise ValueError("audience must not be empty")
        if not kid:
            raise ValueError("kid must not be empty")
        if private_key.key_size < MIN_KEY_BITS:
            raise ValueError(f"RSA keys must have at least {MIN_KEY_BITS} bits")
        self._issuer = issuer
        self._audience = audience
        self._key = private_key
        self._kid = kid

    @classmethod
    def create(cls, issuer: str, audience: str) -> LocalIssuer:
        key = rsa.generate_private_key(public_exponent=65537, key_size=MIN_KEY_BITS)
        return cls(issuer=issuer, audience=audience, private_key=key, kid=secrets.token_hex(16))

    @classmethod
    def load(cls, path: Path, issuer: str, audience: str) -> LocalIssuer:
        """Read a key saved by :meth:`save` (JSON: ``{"kid": ..., "pem": ...}``)."""
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(stored, dict):
            raise ValueError(f"{path} is not a saved LocalIssuer key")
        kid, pem = stored.get("kid"), stored.get("pem")
        if not isinstance(kid, str) or not isinstance(pem, str):
            raise ValueError(f"{path} is not a saved LocalIssuer key")
        # Key files are the local stack's only: serialization (with its SSH formats and
        # bcrypt) stays out of a Lambda's cold start.
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{path} does not hold an RSA private key")
        return cls(issuer=issuer, audience=audience, private_key=key, kid=kid)

    def save(self, path: Path) -> None:
        """Write the key and kid atomically, readable by the owner only (0o600)."""
        from cryptography.hazmat.primitives import serialization

        pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode("ascii")
        data = json.dumps({"kid": self._kid, "pem": pem}, indent=2) + "\n"
        # mkstemp creates the file with mode 0o600, so the key is never readable by others.
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o600)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    @property
    def issuer(self) -> str:
        return self._issuer

    @property
    def audience(self) -> str:
        return self._audience

    @property
    def kid(self) -> str:
        return self._kid

    @property
    def private_key(self) -> rsa.RSAPrivateKey:
        return self._key

    def jwks(self) -> dict[str, Any]:
        from jwt.algorithms import RSAAlgorithm

        public = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        return {
            "keys": [
                {
                    "kty": "RSA",
                    "kid": self._kid,
                    "alg": ALGORITHM,
                    "use": "sig",
                    "n": public["n"],
                    "e": public["e"],
                }
            ]
        }

    def verifier(self, *, leeway_seconds: int = 60) -> JwtVerifier:
        return JwtVerifier(
            issuer=self._issuer,
            audience=self._audience,
            jwks=self.jwks(),
            leeway_seconds=leeway_seconds,
        )

    def issue(
        self,
        *,
        subject: str,
        now: datetime,
        lifetime: timedelta = timedelta(hours=1),
        groups: Sequence[str] = (),
        auth_time: datetime | None = None,
        token_use: str = _ID,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """A Cognito-shaped token. ``extra`` adds claims but may not replace any
        claim set here (use :meth:`sign` for arbitrary claims)."""
        if now.tzinfo is None or (auth_time is not None and auth_time.tzinfo is None):
            raise ValueError("now and auth_time must be timezone-aware")
        if lifetime <= timedelta(0):
            raise ValueError("lifetime must be positive")
        if token_use not in _TOKEN_USES:
            raise ValueError("token_use must be 'id' or 'access'")
        if isinstance(groups, str):
            raise ValueError("groups must be a sequence of group names, not a string")
        claims: dict[str, Any] = {
            "sub": subject,
            "iss": self._issuer,
            ("aud" if token_use == _ID else "client_id"): self._audience,
            "token_use": token_use,
            "auth_time": int((auth_time or now).timestamp()),
            "iat": int(now.timestamp()),
            "exp": int((now + lifetime).timestamp()),
            "cognito:username": subject,
        }
        if groups:
            claims["cognito:groups"] = list(groups)
        clashes = sorted(set(extra or {}) & set(claims))
        if clashes:
            raise ValueError(f"extra may not replace claims {clashes}")
        claims.update(extra or {})
        return self.sign(claims)

    def sign(self, claims: Mapping[str, Any]) -> str:
        """Sign arbitrary claims as they are (no claim rules applied, except that
        PyJWT refuses an ``iss`` that is not a string)."""
        import jwt

        # Cognito's header names only kid and alg: PyJWT's default typ is dropped.
        headers = {"kid": self._kid, "typ": None}
        return jwt.encode(dict(claims), self._key, algorithm=ALGORITHM, headers=headers)


def _parse_jwks(jwks: Mapping[str, Any]) -> dict[str, rsa.RSAPublicKey]:
    """RSA signing keys by kid. Keys for other uses or algorithms are skipped; a
    malformed RSA key, a duplicate kid or a set with no usable key is an error."""
    entries = jwks.get("keys")
    if not isinstance(entries, list):
        raise ValueError("JWKS has no 'keys' list")
    keys: dict[str, rsa.RSAPublicKey] = {}
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get("kty") != "RSA":
            continue
        if entry.get("alg", ALGORITHM) != ALGORITHM or entry.get("use", "sig") != "sig":
            continue
        kid, n, e = entry.get("kid"), entry.get("n"), entry.get("e")
        if not isinstance(kid, str) or not kid:
            raise ValueError("JWKS RSA key has no kid")
        if not isinstance(n, str) or not isinstance(e, str):
            raise ValueError(f"JWKS key {kid!r} has no modulus or exponent")
        if kid in keys:
            raise ValueError(f"JWKS has two keys with kid {kid!r}")
        try:
            public = rsa.RSAPublicNumbers(_b64url_uint(e), _b64url_uint(n)).public_key()
        except ValueError as error:
            raise ValueError(f"JWKS key {kid!r} is not a valid RSA key: {error}") from None
        if public.key_size < MIN_KEY_BITS:
            raise ValueError(f"JWKS key {kid!r} is shorter than {MIN_KEY_BITS} bits")
        keys[kid] = public
    if not keys:
        raise ValueError("JWKS has no RS256 signing key")
    return keys


def _b64url_uint(text: str) -> int:
    """A JWK's unpadded base64url integer (``validate`` refuses stray characters,
    which the default decoder would drop)."""
    padded = text + "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_", validate=True)
    except binascii.Error:
        raise ValueError("not base64url") from None
    return int.from_bytes(raw, "big")


def _numeric_date(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JwtRejected("malformed", f"token {name} claim is not a number")
    try:
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(name)
        _datetime(number)
    except (OverflowError, OSError, ValueError):
        raise JwtRejected("malformed", f"token {name} claim is out of range") from None
    return number


def _datetime(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def _audience_matches(aud: Any, audience: str) -> bool:
    if isinstance(aud, str):
        return aud == audience
    return isinstance(aud, list) and audience in aud and all(isinstance(a, str) for a in aud)
