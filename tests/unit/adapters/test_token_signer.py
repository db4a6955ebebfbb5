"""The KMS token signer against a fake KMS holding locally generated RSA keys: the JWK
a DER public key becomes, its RFC 7638 kid, the JWS it signs, its cache and refusals."""

from __future__ import annotations

import base64
import json
from typing import Any

import jwt
import pytest
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from runplane.adapters.token_signer import (
    KMS_ALGORITHM,
    MAX_SIGNING_INPUT,
    KmsTokenSigner,
    jwk_from_der,
    thumbprint,
)
from runplane.domain.errors import SigningKeyUnavailable, TooLarge

# RFC 7638 §3.1: an RSA key and its SHA-256 thumbprint.
RFC_N = (
    "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECP"
    "ebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2Q"
    "vzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQF"
    "h6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
)
RFC_THUMBPRINT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
KEY_ID = "0b2f6c1e-1111-4a4a-9b9b-123456789abc"
KEY_ARN = f"arn:aws:kms:us-east-1:123456789012:key/{KEY_ID}"
CLAIMS = {"iss": "https://runplane.example.com", "aud": "sts.amazonaws.com", "sub": "x"}


def der(key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class FakeKms:
    """GetPublicKey and Sign (RAW, RSASSA_PKCS1_V1_5_SHA_256) over local keys."""

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.usage = "SIGN_VERIFY"
        self.calls: list[tuple[str, str]] = []
        self.refuse: str | None = None
        self.sign_with: rsa.RSAPrivateKey | None = None

    def add(self, key_id: str, bits: int = 2048) -> rsa.RSAPrivateKey:
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        self.keys[key_id] = key
        return key

    def _key(self, key_id: str, operation: str) -> rsa.RSAPrivateKey:
        self.calls.append((operation, key_id))
        if self.refuse or key_id not in self.keys:
            code = self.refuse or "NotFoundException"
            raise ClientError({"Error": {"Code": code, "Message": f"key {KEY_ARN}"}}, operation)
        return self.keys[key_id]

    def get_public_key(self, KeyId: str) -> dict[str, Any]:
        key = self._key(KeyId, "GetPublicKey")
        return {
            "KeyId": KEY_ARN,
            "PublicKey": der(key.public_key()),
            "KeyUsage": self.usage,
            "SigningAlgorithms": [KMS_ALGORITHM] if self.usage == "SIGN_VERIFY" else [],
        }

    def sign(self, **kwargs: Any) -> dict[str, Any]:
        key = self._key(kwargs["KeyId"], "Sign")
        assert kwargs["MessageType"] == "RAW"
        assert kwargs["SigningAlgorithm"] == KMS_ALGORITHM
        signer = self.sign_with or key
        signature = signer.sign(kwargs["Message"], padding.PKCS1v15(), hashes.SHA256())
        return {"KeyId": KEY_ARN, "Signature": signature}


@pytest.fixture
def kms() -> FakeKms:
    return FakeKms()


def test_the_thumbprint_is_rfc_7638s() -> None:
    assert thumbprint({"kty": "RSA", "n": RFC_N, "e": "AQAB"}) == RFC_THUMBPRINT


def test_the_rfc_key_as_der_becomes_its_jwk_with_its_thumbprint_as_kid() -> None:
    # Given the RFC's key as KMS returns a public key (DER SubjectPublicKeyInfo)
    numbers = rsa.RSAPublicNumbers(65537, int.from_bytes(unb64(RFC_N), "big"))
    # When it is converted
    jwk = jwk_from_der(der(numbers.public_key()))
    # Then it is the RFC's JWK, published for RS256 signatures
    assert jwk == {
        "kty": "RSA",
        "n": RFC_N,
        "e": "AQAB",
        "use": "sig",
        "alg": "RS256",
        "kid": RFC_THUMBPRINT,
    }


def test_a_generated_keys_jwk_is_the_same_key_for_pyjwt() -> None:
    # Given a locally generated RSA key
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    # When its public half is converted
    jwk = jwk_from_der(der(key.public_key()))
    # Then PyJWT reads the same numbers back, unpadded base64url without leading zeros
    loaded = jwt.PyJWK(jwk).key
    assert loaded.public_numbers() == key.public_key().public_numbers()
    assert "=" not in jwk["n"] + jwk["e"]
    assert unb64(jwk["n"])[0] != 0
    assert len(unb64(jwk["n"])) == 256


def test_keys_that_are_not_rsa_or_too_short_are_refused() -> None:
    with pytest.raises(ValueError, match="not an RSA"):
        jwk_from_der(der(ec.generate_private_key(ec.SECP256R1()).public_key()))
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # noqa: S505
    with pytest.raises(ValueError, match="2048"):
        jwk_from_der(der(short.public_key()))


def test_a_signed_token_verifies_with_the_published_key(kms: FakeKms) -> None:
    # Given a signing key in KMS
    kms.add(KEY_ID)
    signer = KmsTokenSigner(kms)  # type: ignore[arg-type]
    # When claims are signed
    token = signer.sign_jwt(KEY_ID, CLAIMS)
    # Then the header names RS256 and the published key's kid
    jwk = signer.public_jwk(KEY_ID)
    header = jwt.get_unverified_header(token)
    assert header == {"alg": "RS256", "typ": "JWT", "kid": jwk["kid"]}
    # And the token verifies with that key alone
    decoded = jwt.decode(
        token, jwt.PyJWK(dict(jwk)).key, algorithms=["RS256"], audience="sts.amazonaws.com"
    )
    assert decoded == CLAIMS


def test_a_public_key_is_read_once_per_key(kms: FakeKms) -> None:
    kms.add(KEY_ID)
    signer = KmsTokenSigner(kms)  # type: ignore[arg-type]
    # When the key is published and signs several times
    first = signer.public_jwk(KEY_ID)
    for _ in range(3):
        signer.sign_jwt(KEY_ID, CLAIMS)
    # Then KMS was asked for its public half once, and signed each time
    assert kms.calls.count(("GetPublicKey", KEY_ID)) == 1
    assert kms.calls.count(("Sign", KEY_ID)) == 3
    assert signer.public_jwk(KEY_ID) == first


def test_nothing_is_asked_of_kms_before_first_use(kms: FakeKms) -> None:
    KmsTokenSigner(kms)  # type: ignore[arg-type]
    assert kms.calls == []


def test_a_signature_by_another_key_never_leaves(kms: FakeKms) -> None:
    # Given a KMS that signs with another key than the one it publishes for the ID
    kms.add(KEY_ID)
    kms.sign_with = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signer = KmsTokenSigner(kms)  # type: ignore[arg-type]
    # Then no token is returned
    with pytest.raises(SigningKeyUnavailable):
        signer.sign_jwt(KEY_ID, CLAIMS)


def test_claims_over_what_kms_signs_raw_are_refused_unsigned(kms: FakeKms) -> None:
    kms.add(KEY_ID)
    signer = KmsTokenSigner(kms)  # type: ignore[arg-type]
    with pytest.raises(TooLarge):
        signer.sign_jwt(KEY_ID, {**CLAIMS, "aud": "a" * MAX_SIGNING_INPUT})
    assert ("Sign", KEY_ID) not in kms.calls


@pytest.mark.parametrize(
    "code", ["DisabledException", "AccessDeniedException", "NotFoundException"]
)
def test_a_key_kms_refuses_is_unavailable_without_naming_it(kms: FakeKms, code: str) -> None:
    kms.add(KEY_ID)
    kms.refuse = code
    signer = KmsTokenSigner(kms)  # type: ignore[arg-type]
    with pytest.raises(SigningKeyUnavailable) as unavailable:
        signer.public_jwk(KEY_ID)
    # Then the error says what KMS said, with a 503 code, and never the key's ARN or ID
    assert code in unavailable.value.message
    assert unavailable.value.http_status == 503
    assert unavailable.value.code == "SIGNING_KEY_UNAVAILABLE"
    assert KEY_ID not in unavailable.value.message
    assert KEY_ARN not in json.dumps(unavailable.value.to_body())


def test_a_key_that_is_not_for_signing_is_refused(kms: FakeKms) -> None:
    kms.add(KEY_ID)
    kms.usage = "ENCRYPT_DECRYPT"
    with pytest.raises(SigningKeyUnavailable, match="SIGN_VERIFY"):
        KmsTokenSigner(kms).public_jwk(KEY_ID)  # type: ignore[arg-type]
