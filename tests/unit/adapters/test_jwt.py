"""RS256 Cognito-style tokens: round trips, every rejection reason, key persistence."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.hashes import SHA256
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runplane.adapters.jwt import JwtRejected, JwtVerifier, LocalIssuer, VerifiedClaims

ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example"
AUDIENCE = "3n4b5urk1ft4fl3mg5e62d9ado"
NOW = datetime(2025, 3, 14, 15, 9, 26, 535_000, tzinfo=UTC)  # issued times truncate to seconds
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def segment(value: dict[str, Any]) -> str:
    return b64(json.dumps(value).encode())


def rejected(verifier: JwtVerifier, token: str, now: datetime = NOW) -> JwtRejected:
    """Verify expecting rejection; no rejection message may repeat the token."""
    with pytest.raises(JwtRejected) as caught:
        verifier.verify(token, now)
    for part in (p for p in [token, *token.split(".")] if len(p) > 8):
        assert part not in str(caught.value)
        assert part not in repr(caught.value)
    return caught.value


@pytest.fixture(scope="module")
def issuer() -> LocalIssuer:
    return LocalIssuer.create(ISSUER, AUDIENCE)


@pytest.fixture(scope="module")
def other_issuer() -> LocalIssuer:
    return LocalIssuer.create(ISSUER, AUDIENCE)


@pytest.fixture(scope="module")
def verifier(issuer: LocalIssuer) -> JwtVerifier:
    return issuer.verifier()


@pytest.fixture(scope="module")
def token(issuer: LocalIssuer) -> str:
    return issuer.issue(subject="user-1", now=NOW)


def as_issuer(issuer: LocalIssuer, *, iss: str = ISSUER, aud: str = AUDIENCE) -> LocalIssuer:
    """The same key and kid (so signatures verify) with other claim values."""
    return LocalIssuer(issuer=iss, audience=aud, private_key=issuer.private_key, kid=issuer.kid)


# --- round trips -------------------------------------------------------------------------------


def test_an_id_token_round_trips(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    # Given an ID token for a user with an email
    token = issuer.issue(subject="user-1", now=NOW, extra={"email": "a@example.com"})

    # When it is verified
    claims = verifier.verify(token, NOW)

    # Then the Cognito claims come back typed
    assert claims == VerifiedClaims(
        subject="user-1",
        issuer=ISSUER,
        auth_time=NOW.replace(microsecond=0),
        expires_at=NOW.replace(microsecond=0) + timedelta(hours=1),
        groups=(),
        username="user-1",
        email="a@example.com",
        claims=claims.claims,
    )
    assert claims.claims["aud"] == AUDIENCE
    assert claims.claims["token_use"] == "id"
    assert "client_id" not in claims.claims


def test_an_access_token_round_trips_with_client_id(
    issuer: LocalIssuer, verifier: JwtVerifier
) -> None:
    # Given an access token (Cognito puts the app client in client_id, not aud)
    token = issuer.issue(subject="user-2", now=NOW, token_use="access")

    # When it is verified
    claims = verifier.verify(token, NOW)

    # Then it is accepted on client_id
    assert claims.subject == "user-2"
    assert claims.claims["client_id"] == AUDIENCE
    assert claims.claims["token_use"] == "access"
    assert "aud" not in claims.claims


def test_auth_time_and_groups_are_parsed(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    # Given a token from a sign-in ten minutes ago, for a user in two groups
    signed_in = NOW - timedelta(minutes=10)
    token = issuer.issue(
        subject="user-3", now=NOW, groups=["admins", "operators"], auth_time=signed_in
    )

    # When it is verified
    claims = verifier.verify(token, NOW)

    # Then auth_time is an aware UTC datetime and groups a tuple
    assert claims.auth_time == signed_in.replace(microsecond=0)
    assert claims.auth_time.tzinfo is UTC
    assert claims.expires_at.tzinfo is UTC
    assert claims.groups == ("admins", "operators")
    assert claims.claims["cognito:groups"] == ["admins", "operators"]


def test_claims_are_read_only_and_hashable(verifier: JwtVerifier, token: str) -> None:
    # Given verified claims
    claims = verifier.verify(token, NOW)

    # When we try to change the claim mapping, then we cannot; and the claims hash
    with pytest.raises(TypeError):
        claims.claims["sub"] = "someone-else"  # type: ignore[index]
    assert hash(claims) == hash(verifier.verify(token, NOW))


def test_username_falls_back_to_the_username_claim(
    issuer: LocalIssuer, verifier: JwtVerifier
) -> None:
    # Given an access token shaped like Cognito's, with "username" only
    token = issuer.sign(
        {
            "sub": "user-4",
            "iss": ISSUER,
            "client_id": AUDIENCE,
            "token_use": "access",
            "exp": int(NOW.timestamp()) + 60,
            "username": "alice",
        }
    )

    # When it is verified, then the username comes from that claim; auth_time is absent
    claims = verifier.verify(token, NOW)
    assert claims.username == "alice"
    assert claims.auth_time is None


def test_a_key_set_with_several_keys_accepts_either(
    issuer: LocalIssuer, other_issuer: LocalIssuer
) -> None:
    # Given a JWKS during key rotation holding both keys
    jwks = {"keys": issuer.jwks()["keys"] + other_issuer.jwks()["keys"]}
    verifier = JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=jwks)

    # When tokens signed by each are verified, then both are accepted
    assert verifier.verify(issuer.issue(subject="a", now=NOW), NOW).subject == "a"
    assert verifier.verify(other_issuer.issue(subject="b", now=NOW), NOW).subject == "b"


# --- signatures and keys -----------------------------------------------------------------------


def test_a_tampered_payload_is_a_bad_signature(verifier: JwtVerifier, token: str) -> None:
    # Given a valid token whose payload is re-encoded with another subject
    header, payload, signature = token.split(".")
    claims = json.loads(unb64(payload))
    claims["sub"] = "admin"
    claims["cognito:groups"] = ["admins"]
    forged = f"{header}.{segment(claims)}.{signature}"

    # When it is verified, then the signature fails
    assert rejected(verifier, forged).reason == "bad_signature"


def test_another_key_under_the_same_kid_is_a_bad_signature(
    issuer: LocalIssuer, other_issuer: LocalIssuer, verifier: JwtVerifier
) -> None:
    # Given a token signed by another key that claims our kid
    impostor = LocalIssuer(
        issuer=ISSUER, audience=AUDIENCE, private_key=other_issuer.private_key, kid=issuer.kid
    )
    forged = impostor.issue(subject="user-1", now=NOW)

    # When it is verified, then the signature fails
    assert rejected(verifier, forged).reason == "bad_signature"


def test_an_unknown_kid_is_refused(other_issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    # Given a token signed by a key that is not in the JWKS
    token = other_issuer.issue(subject="user-1", now=NOW)

    # When it is verified, then the key is unknown
    assert rejected(verifier, token).reason == "unknown_key"


def test_a_missing_kid_is_an_unknown_key(verifier: JwtVerifier, token: str) -> None:
    # Given a token whose header has no kid
    _, payload, signature = token.split(".")
    forged = f"{segment({'alg': 'RS256'})}.{payload}.{signature}"

    # When it is verified, then no key is found
    assert rejected(verifier, forged).reason == "unknown_key"


# --- algorithms --------------------------------------------------------------------------------


def test_alg_none_is_refused(verifier: JwtVerifier, token: str, issuer: LocalIssuer) -> None:
    # Given an unsigned token (alg none, empty signature) with valid claims
    _, payload, _ = token.split(".")
    unsigned = f"{segment({'alg': 'none', 'kid': issuer.kid})}.{payload}."

    # When it is verified, then the algorithm is refused
    assert rejected(verifier, unsigned).reason == "unsupported_algorithm"


@pytest.mark.parametrize("alg", ["HS256", "RS384", "PS256", "ES256", "rs256", "RS256 ", ""])
def test_other_algorithms_are_refused(
    verifier: JwtVerifier, token: str, issuer: LocalIssuer, alg: str
) -> None:
    # Given a token that names another algorithm (signature left as RS256)
    _, payload, signature = token.split(".")
    forged = f"{segment({'alg': alg, 'kid': issuer.kid})}.{payload}.{signature}"

    # When it is verified, then the algorithm is refused
    assert rejected(verifier, forged).reason == "unsupported_algorithm"


@pytest.mark.parametrize("encoding", [serialization.Encoding.PEM, serialization.Encoding.DER])
def test_hs256_with_the_public_key_as_secret_is_refused(
    verifier: JwtVerifier, token: str, issuer: LocalIssuer, encoding: serialization.Encoding
) -> None:
    # Given the classic confusion attack: HS256 keyed with the (public) RSA key bytes
    public = issuer.private_key.public_key().public_bytes(
        encoding, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _, payload, _ = token.split(".")
    signing_input = f"{segment({'alg': 'HS256', 'kid': issuer.kid})}.{payload}"
    mac = hmac.new(public, signing_input.encode(), hashlib.sha256).digest()

    # When it is verified, then the algorithm is refused
    assert rejected(verifier, f"{signing_input}.{b64(mac)}").reason == "unsupported_algorithm"


def test_a_critical_header_extension_is_refused(issuer: LocalIssuer, token: str) -> None:
    # Given a header listing a critical extension we do not understand
    _, payload, signature = token.split(".")
    header = segment({"alg": "RS256", "kid": issuer.kid, "crit": ["exp"]})

    # When it is verified, then it is malformed
    assert rejected(issuer.verifier(), f"{header}.{payload}.{signature}").reason == "malformed"


def test_the_b64_extension_pyjwt_understands_is_refused_too(issuer: LocalIssuer) -> None:
    # Given a token our key signed whose header declares b64 critical (with its
    # default value: PyJWT would accept it)
    claims = {"sub": "u", "iss": ISSUER, "aud": AUDIENCE, "exp": int(NOW.timestamp()) + 60}
    header = segment({"alg": "RS256", "kid": issuer.kid, "crit": ["b64"], "b64": True})
    signing_input = f"{header}.{segment(claims)}"
    signature = issuer.private_key.sign(signing_input.encode(), PKCS1v15(), SHA256())

    # When it is verified, then it is malformed: no critical extension is accepted
    assert rejected(issuer.verifier(), f"{signing_input}.{b64(signature)}").reason == "malformed"


# --- time --------------------------------------------------------------------------------------


def test_expired_beyond_leeway_is_refused(verifier: JwtVerifier, token: str) -> None:
    # Given a token that expired 61 seconds ago (leeway 60)
    later = NOW + timedelta(hours=1, seconds=61)

    # When it is verified, then it has expired
    assert rejected(verifier, token, later).reason == "expired"


def test_expiry_at_exactly_the_leeway_is_refused(verifier: JwtVerifier, token: str) -> None:
    # Given the instant exp + leeway (NOW has microseconds; exp was truncated to seconds)
    exp = NOW.replace(microsecond=0) + timedelta(hours=1)

    # When it is verified, then it has expired (now must be strictly before exp + leeway)
    assert rejected(verifier, token, exp + timedelta(seconds=60)).reason == "expired"
    assert verifier.verify(token, exp + timedelta(seconds=59, microseconds=999_000))


def test_expired_within_leeway_is_accepted(verifier: JwtVerifier, token: str) -> None:
    # Given a token that expired 59 seconds ago (leeway 60)
    later = NOW.replace(microsecond=0) + timedelta(hours=1, seconds=59)

    # When it is verified, then it is still accepted
    assert verifier.verify(token, later).subject == "user-1"


def test_zero_leeway_is_strict(issuer: LocalIssuer, token: str) -> None:
    # Given a verifier without leeway, when a token is checked one second after exp
    strict = issuer.verifier(leeway_seconds=0)
    exp = NOW.replace(microsecond=0) + timedelta(hours=1)

    # Then it has expired, and a second before exp it is accepted
    assert rejected(strict, token, exp).reason == "expired"
    assert strict.verify(token, exp - timedelta(seconds=1)).subject == "user-1"


def test_nbf_in_the_future_is_refused(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    # Given a token not valid until two minutes from now
    nbf = int((NOW + timedelta(minutes=2)).timestamp())
    token = issuer.issue(subject="user-1", now=NOW, extra={"nbf": nbf})

    # When it is verified now, then it is not yet valid; within leeway of nbf it is
    assert rejected(verifier, token).reason == "not_yet_valid"
    assert verifier.verify(token, NOW + timedelta(minutes=1, seconds=30)).subject == "user-1"


def test_iat_in_the_future_is_refused(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    # Given a token issued ten minutes in the future (a skewed or forged clock)
    token = issuer.issue(subject="user-1", now=NOW + timedelta(minutes=10))

    # When it is verified now, then it is not yet valid
    assert rejected(verifier, token).reason == "not_yet_valid"


def test_iat_slightly_in_the_future_is_within_leeway(
    issuer: LocalIssuer, verifier: JwtVerifier
) -> None:
    # Given a token issued 30 seconds ahead of our clock
    token = issuer.issue(subject="user-1", now=NOW + timedelta(seconds=30))

    # When it is verified, then clock skew within leeway is tolerated
    assert verifier.verify(token, NOW).subject == "user-1"


def test_a_naive_now_is_a_programming_error(verifier: JwtVerifier, token: str) -> None:
    # Given a naive datetime, when verifying, then it is a ValueError, not a rejection
    with pytest.raises(ValueError, match="timezone-aware"):
        verifier.verify(token, NOW.replace(tzinfo=None))


# --- claims ------------------------------------------------------------------------------------


def test_a_wrong_issuer_is_refused(issuer: LocalIssuer, verifier: JwtVerifier) -> None:
    # Given a validly signed token naming another user pool
    token = as_issuer(issuer, iss=ISSUER + "x").issue(subject="user-1", now=NOW)

    # When it is verified, then the issuer is wrong
    assert rejected(verifier, token).reason == "wrong_issuer"


@pytest.mark.parametrize("token_use", ["id", "access"])
def test_a_wrong_audience_is_refused(
    issuer: LocalIssuer, verifier: JwtVerifier, token_use: str
) -> None:
    # Given a validly signed token for another app client
    other = as_issuer(issuer, aud="another-client")
    token = other.issue(subject="user-1", now=NOW, token_use=token_use)

    # When it is verified, then the audience is wrong
    assert rejected(verifier, token).reason == "wrong_audience"


@pytest.mark.parametrize(("token_use", "audience_claim"), [("id", "client_id"), ("access", "aud")])
def test_the_audience_must_be_in_the_claim_cognito_uses(
    issuer: LocalIssuer, verifier: JwtVerifier, token_use: str, audience_claim: str
) -> None:
    # Given a token whose audience sits in the claim its token_use does not use
    token = issuer.sign(
        {
            "sub": "user-1",
            "iss": ISSUER,
            "token_use": token_use,
            audience_claim: AUDIENCE,
            "exp": int(NOW.timestamp()) + 60,
        }
    )

    # When it is verified, then the audience is wrong
    assert rejected(verifier, token).reason == "wrong_audience"


@pytest.mark.parametrize("audience_claim", ["aud", "client_id"])
def test_without_token_use_either_audience_claim_is_accepted(
    issuer: LocalIssuer, verifier: JwtVerifier, audience_claim: str
) -> None:
    # Given a token without token_use
    token = issuer.sign(
        {"sub": "u", "iss": ISSUER, audience_claim: AUDIENCE, "exp": int(NOW.timestamp()) + 60}
    )

    # When it is verified, then either claim may carry the audience
    assert verifier.verify(token, NOW).subject == "u"


@pytest.mark.parametrize("token_use", ["refresh", "ID", "", 1, None])
def test_a_wrong_token_use_is_refused(
    issuer: LocalIssuer, verifier: JwtVerifier, token_use: object
) -> None:
    # Given a validly signed token whose token_use is neither id nor access
    claims: dict[str, Any] = {
        "sub": "user-1",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "client_id": AUDIENCE,
        "exp": int(NOW.timestamp()) + 60,
        "token_use": token_use,
    }
    if token_use is None:
        claims["token_use"] = ["id"]  # present but not a string
    token = issuer.sign(claims)

    # When it is verified, then the token_use is wrong
    assert rejected(verifier, token).reason == "wrong_token_use"


@pytest.mark.parametrize(
    "changes",
    [
        {"exp": None},
        {"exp": "1999999999"},
        {"exp": True},
        {"exp": 10**30},
        {"exp": 10**400},
        {"exp": -(10**30)},
        {"sub": None},
        {"sub": ""},
        {"sub": 7},
        {"cognito:groups": "admins"},
        {"cognito:groups": [1]},
        {"auth_time": "yesterday"},
    ],
)
def test_missing_or_mistyped_claims_are_malformed(
    issuer: LocalIssuer, verifier: JwtVerifier, changes: dict[str, Any]
) -> None:
    # Given a validly signed token with a required claim missing or of the wrong type
    claims: dict[str, Any] = {
        "sub": "user-1",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "token_use": "id",
        "exp": int(NOW.timestamp()) + 60,
    }
    claims.update(changes)
    token = issuer.sign({k: v for k, v in claims.items() if v is not None})

    # When it is verified, then it is malformed
    assert rejected(verifier, token).reason == "malformed"


# --- malformed tokens --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda t: ".".join(t.split(".")[:2]), id="two segments"),
        pytest.param(lambda t: t + ".e30", id="four segments"),
        pytest.param(lambda t: "", id="empty"),
        pytest.param(lambda t: "..", id="three empty segments"),
        pytest.param(lambda t: "!" + t, id="bad base64 in header"),
        pytest.param(lambda t: t.replace(".", ".*", 1), id="bad base64 in payload"),
        pytest.param(lambda t: t + "!", id="bad base64 in signature"),
        pytest.param(lambda t: t + "=", id="padding"),
        pytest.param(lambda t: t[:-1] + "+", id="standard alphabet"),
        pytest.param(lambda t: "A" + t, id="header of impossible length"),
        pytest.param(lambda t: f"{b64(b'not json')}.{t.split('.', 1)[1]}", id="header not json"),
        pytest.param(lambda t: f"{b64(b'[1]')}.{t.split('.', 1)[1]}", id="header not an object"),
        pytest.param(lambda t: f"{b64(bytes([255]))}.{t.split('.', 1)[1]}", id="header not utf-8"),
        pytest.param(lambda t: t + "A" * 20_000, id="too long"),
        pytest.param(lambda t: t.replace("e", "é", 1), id="non-ascii"),
        pytest.param(lambda t: t.replace("e", "\ud800", 1), id="lone surrogate"),
    ],
)
def test_malformed_tokens_are_refused(verifier: JwtVerifier, token: str, mangle: Any) -> None:
    # Given a token mangled out of shape
    mangled = mangle(token)

    # When it is verified, then it is malformed
    assert rejected(verifier, mangled).reason == "malformed"


def test_a_duplicate_header_member_cannot_smuggle_an_algorithm(
    verifier: JwtVerifier, token: str, issuer: LocalIssuer
) -> None:
    # Given headers that name alg twice, one ending on none, one ending on RS256 (the
    # header is read once, last member winning, and the signature covers it as sent)
    _, payload, signature = token.split(".")
    kid = issuer.kid.encode()
    none_last = b64(b'{"alg":"RS256","alg":"none","kid":"%s"}' % kid)
    rs256_last = b64(b'{"alg":"none","alg":"RS256","kid":"%s"}' % kid)

    # When each is verified, then the algorithm checked is the one verified with: the
    # unsigned one is refused for it, the other fails the signature over its header
    assert rejected(verifier, f"{none_last}.{payload}.").reason == "unsupported_algorithm"
    assert rejected(verifier, f"{rs256_last}.{payload}.{signature}").reason == "bad_signature"


def test_a_deeply_nested_header_is_malformed(verifier: JwtVerifier, token: str) -> None:
    # Given a short header nested deeper than the JSON parser's recursion limit
    header = b64(b"[" * 5000 + b"]" * 5000)
    forged = f"{header}.{token.split('.', 1)[1]}"

    # When it is verified, then it is malformed (not a RecursionError)
    assert rejected(verifier, forged).reason == "malformed"


def test_a_non_canonical_signature_encoding_is_malformed(verifier: JwtVerifier, token: str) -> None:
    # Given the signature's last character changed only in its unused low bits
    head, signature = token.rsplit(".", 1)
    last = B64URL.index(signature[-1])
    assert len(unb64(signature)) % 3 == 1  # 256 bytes: the last character has 4 unused bits
    twin = head + "." + signature[:-1] + B64URL[last | 0b0001]
    assert twin != token
    assert unb64(twin.rsplit(".", 1)[1]) == unb64(signature)

    # When it is verified, then the second spelling of the same bytes is refused
    assert rejected(verifier, twin).reason == "malformed"


def test_rejections_never_include_the_token(
    issuer: LocalIssuer, other_issuer: LocalIssuer, verifier: JwtVerifier, token: str
) -> None:
    # Given tokens rejected for several reasons, carrying a marker in fields we control
    marker = "SECRET-MARKER-" + "x" * 40
    cases = [
        (token, "expired"),
        (other_issuer.issue(subject=marker, now=NOW), "unknown_key"),
        (issuer.sign({"sub": marker, "iss": marker, "exp": 1}), "wrong_issuer"),
        (f"{segment({'alg': marker, 'kid': marker})}.e30.", "unsupported_algorithm"),
        (f"{segment({'alg': 'RS256', 'kid': marker})}.e30.", "unknown_key"),
        (marker, "malformed"),
    ]

    # When each is verified a day later
    errors = [(rejected(verifier, t, NOW + timedelta(days=1)), reason) for t, reason in cases]

    # Then each fails for its reason, and neither the token nor the marker appear
    for error, reason in errors:
        assert error.reason == reason
        assert marker not in str(error)
        assert marker not in repr(error.args)


def test_rejections_copy_with_their_reason() -> None:
    # Given a rejection, when it is copied (as pickling would), then it keeps its reason
    error = copy.deepcopy(JwtRejected("expired", "token has expired"))
    assert (error.reason, str(error)) == ("expired", "token has expired")


# --- signature properties ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_single_character_change_in_the_signature_is_refused(
    verifier: JwtVerifier, token: str, data: st.DataObject
) -> None:
    # Given a valid token and a change to one character of its signature segment
    head, signature = token.rsplit(".", 1)
    index = data.draw(st.integers(0, len(signature) - 1), label="index")
    replacement = data.draw(
        st.one_of(st.sampled_from(B64URL + "=+/.! "), st.characters()).filter(
            lambda c: c != signature[index]
        ),
        label="replacement",
    )
    changed = f"{head}.{signature[:index]}{replacement}{signature[index + 1 :]}"

    # When it is verified, then it is refused
    assert rejected(verifier, changed).reason in {"bad_signature", "malformed"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_single_byte_change_in_the_signature_bytes_is_refused(
    verifier: JwtVerifier, token: str, data: st.DataObject
) -> None:
    # Given a valid token whose decoded signature has one byte changed, re-encoded cleanly
    head, signature = token.rsplit(".", 1)
    raw = bytearray(unb64(signature))
    index = data.draw(st.integers(0, len(raw) - 1), label="index")
    raw[index] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[index]), label="byte")
    changed = f"{head}.{b64(bytes(raw))}"

    # When it is verified, then the signature fails
    assert rejected(verifier, changed).reason == "bad_signature"


# --- the local issuer --------------------------------------------------------------------------


def test_save_and_load_round_trip_with_owner_only_mode(issuer: LocalIssuer, tmp_path: Path) -> None:
    # Given an existing world-readable file at the key path
    path = tmp_path / "issuer.json"
    path.write_text("{}")
    os.chmod(path, 0o644)

    # When the issuer is saved over it and loaded back
    issuer.save(path)
    loaded = LocalIssuer.load(path, ISSUER, AUDIENCE)

    # Then the file is owner-only, holds kid and PEM, and the keys are interchangeable
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert set(stored) == {"kid", "pem"}
    assert stored["pem"].startswith("-----BEGIN PRIVATE KEY-----")
    assert loaded.kid == issuer.kid
    assert loaded.jwks() == issuer.jwks()
    assert issuer.verifier().verify(loaded.issue(subject="u", now=NOW), NOW).subject == "u"
    assert loaded.verifier().verify(issuer.issue(subject="v", now=NOW), NOW).subject == "v"
    assert [p.name for p in tmp_path.iterdir()] == ["issuer.json"]  # no temporary left behind


def test_a_new_save_is_owner_only(tmp_path: Path) -> None:
    # Given a fresh issuer, when it is saved to a new path, then the file mode is 0o600
    path = tmp_path / "new.json"
    LocalIssuer.create(ISSUER, AUDIENCE).save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_loading_something_else_fails(tmp_path: Path) -> None:
    # Given a file that is not a saved key, when it is loaded, then it is a ValueError
    path = tmp_path / "not-a-key.json"
    path.write_text(json.dumps({"kid": "k"}))
    with pytest.raises(ValueError, match="not a saved LocalIssuer key"):
        LocalIssuer.load(path, ISSUER, AUDIENCE)


def test_created_issuers_have_distinct_kids(issuer: LocalIssuer, other_issuer: LocalIssuer) -> None:
    # Given two created issuers, then their kids and keys differ, and the JWKS is public-only
    assert issuer.kid != other_issuer.kid
    assert issuer.jwks() != other_issuer.jwks()
    (key,) = issuer.jwks()["keys"]
    assert set(key) == {"kty", "kid", "alg", "use", "n", "e"}
    assert (key["kty"], key["alg"], key["use"], key["e"]) == ("RSA", "RS256", "sig", "AQAB")
    assert len(unb64(key["n"])) == 256


def test_issued_token_header_is_cognito_shaped(issuer: LocalIssuer, token: str) -> None:
    # Given an issued token, then its header names only the kid and RS256
    header = json.loads(unb64(token.split(".")[0]))
    assert header == {"kid": issuer.kid, "alg": "RS256"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"token_use": "refresh"}, "token_use must be"),
        ({"extra": {"iss": "https://elsewhere"}}, "may not replace"),
        ({"extra": {"exp": 1}}, "may not replace"),
        ({"lifetime": timedelta(0)}, "lifetime must be positive"),
        ({"groups": "admins"}, "not a string"),
        ({"now": NOW.replace(tzinfo=None)}, "timezone-aware"),
    ],
)
def test_issue_refuses_bad_arguments(
    issuer: LocalIssuer, kwargs: dict[str, Any], message: str
) -> None:
    # Given arguments that would produce a misleading token, when issuing, then ValueError
    arguments: dict[str, Any] = {"subject": "user-1", "now": NOW, **kwargs}
    with pytest.raises(ValueError, match=message):
        issuer.issue(**arguments)


# --- the key set -------------------------------------------------------------------------------


def test_unusable_key_sets_are_refused(issuer: LocalIssuer) -> None:
    # Given key sets with nothing to verify RS256 with, when building a verifier, then ValueError
    (key,) = issuer.jwks()["keys"]
    unusable: list[dict[str, Any]] = [
        {},
        {"keys": []},
        {"keys": [{**key, "use": "enc"}]},
        {"keys": [{**key, "alg": "RS512"}]},
        {"keys": [{**key, "kty": "EC"}]},
    ]
    for jwks in unusable:
        with pytest.raises(ValueError, match="JWKS"):
            JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=jwks)


def test_broken_keys_are_refused(issuer: LocalIssuer) -> None:
    # Given key sets with a broken RSA key or a duplicate kid, then ValueError
    (key,) = issuer.jwks()["keys"]
    broken: list[dict[str, Any]] = [
        {"keys": [{**key, "n": "!!"}]},
        {"keys": [{k: v for k, v in key.items() if k != "kid"}]},
        {"keys": [key, key]},
        {"keys": [{**key, "n": b64((2**1023 + 1).to_bytes(128, "big"))}]},
    ]
    for jwks in broken:
        with pytest.raises(ValueError, match="JWKS"):
            JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=jwks)


def test_building_a_verifier_leaves_pyjwt_unloaded(issuer: LocalIssuer) -> None:
    # Given a fresh interpreter (the authorizer builds its verifier at every cold start,
    # also when its first caller brings an API token or a runner session)
    code = (
        "import json, sys\n"
        "from runplane.adapters.jwt import JwtVerifier\n"
        "JwtVerifier(issuer='i', audience='a', jwks=json.loads(sys.argv[1]))\n"
        "print(sorted(m for m in sys.modules if m == 'jwt' or m.startswith('jwt.')))\n"
    )

    # When the verifier is built, then PyJWT (some 30-100 ms to import) is not loaded yet
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(issuer.jwks())],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_a_key_set_with_extra_keys_of_other_types_still_works(
    issuer: LocalIssuer, token: str
) -> None:
    # Given a JWKS that also carries an EC key and an encryption key
    (key,) = issuer.jwks()["keys"]
    jwks = {"keys": [{"kty": "EC", "kid": "ec"}, {**key, "kid": "enc", "use": "enc"}, key]}

    # When a token is verified, then the RS256 signing key is found
    verifier = JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks=jwks)
    assert verifier.verify(token, NOW).subject == "user-1"
