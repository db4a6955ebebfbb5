"""RS256 JSON Web Tokens as Amazon Cognito user pools issue them.

We verify tokens here rather than depend on a JWT library because the surface we
need is small and fixed: one algorithm (RS256), keys from one configured JWKS,
and Cognito's claim rules (ID tokens carry ``aud``, access tokens carry
``client_id``, ``token_use`` tells them apart). A general library brings
algorithm negotiation, key fetching and options we would have to switch off one
by one; writing the hundred lines ourselves on top of ``cryptography`` keeps
every rule visible and tested, and adds no dependency to the Lambda layer.

Verification rules (:class:`JwtVerifier`):

* three base64url segments, canonically encoded (no padding, no stray bits);
* the header's ``alg`` is exactly ``RS256`` (``none``, HMAC and everything else
  are refused, so a public key can never be used as an HMAC secret);
* the header's ``kid`` names a key in the configured JWKS (``jku``, ``x5u`` and
  ``jwk`` headers are ignored: keys never come from the token);
* the RSASSA-PKCS1-v1_5 SHA-256 signature over ``header.payload`` verifies;
* ``iss`` equals the issuer; ``exp`` is present and ``now < exp + leeway``;
  ``nbf`` and ``iat`` are not later than ``now + leeway``;
* ``token_use``, if present, is ``id`` or ``access``; an ID token's ``aud`` or an
  access token's ``client_id`` equals the audience (without ``token_use``,
  either may).

:class:`LocalIssuer` signs Cognito-shaped tokens for the embedded development
stack and for tests.
"""

from __future__ import annotations

import base64
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
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

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
        header_b64, payload_b64, signature_b64 = _split(token)
        # Decode every segment first, so any bad encoding is "malformed"; parse the
        # payload's JSON only once its signature has verified.
        header_raw = _segment(header_b64, "header")
        payload_raw = _segment(payload_b64, "payload")
        signature = _segment(signature_b64, "signature")
        header = _json_object(header_raw, "header")
        if header.get("alg") != ALGORITHM:
            raise JwtRejected("unsupported_algorithm", "token algorithm is not RS256")
        if "crit" in header:
            raise JwtRejected("malformed", "token header has critical extensions")
        kid = header.get("kid")
        key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise JwtRejected("unknown_key", "token is signed with a key not in the key set")
        try:
            key.verify(
                signature,
                f"{header_b64}.{payload_b64}".encode("ascii"),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except InvalidSignature:
            raise JwtRejected("bad_signature", "token signature does not verify") from None
        return self._check_claims(_json_object(payload_raw, "payload"), now)

    def _check_claims(self, claims: dict[str, Any], now: datetime) -> VerifiedClaims:
        if claims.get("iss") != self._issuer:
            raise JwtRejected("wrong_issuer", "token issuer is not the expected issuer")

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
        numbers = self._key.public_key().public_numbers()
        return {
            "keys": [
                {
                    "kty": "RSA",
                    "kid": self._kid,
                    "alg": ALGORITHM,
                    "use": "sig",
                    "n": _b64url_encode(_int_bytes(numbers.n)),
                    "e": _b64url_encode(_int_bytes(numbers.e)),
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
        """Sign arbitrary claims as they are (no claim rules applied)."""
        header = {"kid": self._kid, "alg": ALGORITHM}
        signing_input = f"{_json_segment(header)}.{_json_segment(claims)}"
        signature = self._key.sign(
            signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256()
        )
        return f"{signing_input}.{_b64url_encode(signature)}"


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
            public = rsa.RSAPublicNumbers(
                int.from_bytes(_b64url_decode(e), "big"),
                int.from_bytes(_b64url_decode(n), "big"),
            ).public_key()
        except ValueError as error:
            raise ValueError(f"JWKS key {kid!r} is not a valid RSA key: {error}") from None
        if public.key_size < MIN_KEY_BITS:
            raise ValueError(f"JWKS key {kid!r} is shorter than {MIN_KEY_BITS} bits")
        keys[kid] = public
    if not keys:
        raise ValueError("JWKS has no RS256 signing key")
    return keys


def _split(token: str) -> tuple[str, str, str]:
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
        raise JwtRejected("malformed", "token is not a string of acceptable length")
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtRejected("malformed", "token does not have exactly three segments")
    return parts[0], parts[1], parts[2]


def _segment(text: str, name: str) -> bytes:
    try:
        return _b64url_decode(text)
    except ValueError:
        raise JwtRejected("malformed", f"token {name} is not base64url") from None


def _json_object(raw: bytes, name: str) -> dict[str, Any]:
    try:
        value = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
        )
    # ValueError covers UnicodeDecodeError and JSONDecodeError; deep nesting in the
    # (unauthenticated) header can exhaust the parser's recursion limit.
    except (ValueError, RecursionError):
        raise JwtRejected("malformed", f"token {name} is not valid JSON") from None
    if not isinstance(value, dict):
        raise JwtRejected("malformed", f"token {name} is not a JSON object")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate member")
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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


def _b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    """Strict base64url: the unpadded alphabet only, canonically encoded, so each
    byte string has exactly one accepted spelling."""
    if not text.isascii() or "=" in text or len(text) % 4 == 1:
        raise ValueError("not base64url")
    raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if _b64url_encode(raw) != text:
        raise ValueError("not canonical base64url")
    return raw


def _json_segment(value: Mapping[str, Any]) -> str:
    return _b64url_encode(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def _int_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")
