"""RS256 JSON Web Tokens signed by a KMS asymmetric key (RSA_2048, SIGN_VERIFY).

The private key never leaves KMS: a token's signing input (``header.payload``) is sent
as a RAW message with ``RSASSA_PKCS1_V1_5_SHA_256`` (KMS hashes it), which is exactly
JWS RS256 (RFC 7518 §3.3). KMS signs RAW messages up to 4096 bytes; a token's claims
are far smaller (names, IDs and an audience of bounded length), and a larger one is
refused rather than signed another way.

Each key's public half (``GetPublicKey``: a DER SubjectPublicKeyInfo) becomes a JWK
whose ``kid`` is its RFC 7638 thumbprint: stable for the key, the same wherever it is
computed, and revealing nothing of the key's ARN or account. Public keys never change
for a key ID, so each is read once per process (keys are named by ID or ARN, never by
an alias, which could be pointed at another key: the settings refuse aliases). Every
signature is checked against that public key before a token leaves, so a token never
carries a ``kid`` other than its signer's.

``create_signing_key`` provisions a key for the embedded stack and tests (CDK creates
it in AWS).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from runplane.domain.errors import SigningKeyUnavailable, TooLarge

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient

ALGORITHM: Final = "RS256"
KMS_ALGORITHM: Final = "RSASSA_PKCS1_V1_5_SHA_256"
KEY_SPEC: Final = "RSA_2048"
MIN_KEY_BITS: Final = 2048
# KMS signs a RAW message of at most this many bytes.
MAX_SIGNING_INPUT: Final = 4096


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _uint(value: int) -> str:
    """A JWK integer: big-endian, no leading zero octets (RFC 7518 §6.3.1)."""
    return b64url(value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big"))


def thumbprint(jwk: Mapping[str, str]) -> str:
    """The RFC 7638 SHA-256 thumbprint of an RSA JWK: its required members (``e``,
    ``kty``, ``n``) in lexicographic order, no whitespace, base64url."""
    canonical = json.dumps(
        {"e": jwk["e"], "kty": jwk["kty"], "n": jwk["n"]}, separators=(",", ":"), sort_keys=True
    )
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def rsa_jwk(key: rsa.RSAPublicKey) -> dict[str, str]:
    """An RS256 signing key as a JWK, its ``kid`` the key's thumbprint."""
    numbers = key.public_numbers()
    jwk = {"kty": "RSA", "n": _uint(numbers.n), "e": _uint(numbers.e)}
    return {**jwk, "use": "sig", "alg": ALGORITHM, "kid": thumbprint(jwk)}


def public_key_from_der(der: bytes) -> rsa.RSAPublicKey:
    """A DER SubjectPublicKeyInfo's RSA key of at least 2048 bits, else a ValueError."""
    key = serialization.load_der_public_key(der)
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("not an RSA public key")
    if key.key_size < MIN_KEY_BITS:
        raise ValueError(f"an RSA key shorter than {MIN_KEY_BITS} bits")
    return key


def jwk_from_der(der: bytes) -> dict[str, str]:
    """``GetPublicKey``'s DER SubjectPublicKeyInfo as an RS256 JWK."""
    return rsa_jwk(public_key_from_der(der))


def signing_input(header: Mapping[str, Any], claims: Mapping[str, Any]) -> bytes:
    """``BASE64URL(header) '.' BASE64URL(claims)``, each compact JSON."""
    parts = (json.dumps(part, separators=(",", ":")).encode("utf-8") for part in (header, claims))
    return b".".join(b64url(part).encode("ascii") for part in parts)


@dataclass(frozen=True)
class _PublicKey:
    jwk: Mapping[str, str]
    key: rsa.RSAPublicKey


class KmsTokenSigner:
    """Signs JWTs with KMS keys and publishes their public halves (see the module
    docstring). Safe to share between threads."""

    def __init__(self, client: KMSClient) -> None:
        self._kms = client
        self._keys: dict[str, _PublicKey] = {}
        self._lock = threading.Lock()

    def public_jwk(self, key_id: str) -> Mapping[str, str]:
        """The key's public JWK, read from KMS on first use only."""
        return self._public(key_id).jwk

    def sign_jwt(self, key_id: str, claims: Mapping[str, Any]) -> str:
        """``claims`` as a compact JWS signed by the key (RS256, its thumbprint as kid)."""
        public = self._public(key_id)
        header = {"alg": ALGORITHM, "typ": "JWT", "kid": public.jwk["kid"]}
        message = signing_input(header, claims)
        if len(message) > MAX_SIGNING_INPUT:
            raise TooLarge(
                f"a token's header and claims are over the {MAX_SIGNING_INPUT} bytes "
                "KMS signs; nothing was signed"
            )
        try:
            signature = self._kms.sign(
                KeyId=key_id,
                Message=message,
                MessageType="RAW",
                SigningAlgorithm=KMS_ALGORITHM,
            )["Signature"]
        except (BotoCoreError, ClientError) as error:
            raise _unavailable("sign with", error) from None
        try:
            public.key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            raise SigningKeyUnavailable(
                "KMS signed with another key than the one it published for this key ID; "
                "no token was issued"
            ) from None
        return f"{message.decode('ascii')}.{b64url(signature)}"

    def _public(self, key_id: str) -> _PublicKey:
        with self._lock:
            found = self._keys.get(key_id)
        if found is not None:
            return found
        try:
            reply = self._kms.get_public_key(KeyId=key_id)
        except (BotoCoreError, ClientError) as error:
            raise _unavailable("read", error) from None
        if reply.get("KeyUsage") != "SIGN_VERIFY" or KMS_ALGORITHM not in reply.get(
            "SigningAlgorithms", []
        ):
            raise SigningKeyUnavailable(
                "a configured token signing key is not an RSA signing key "
                f"(KeySpec {KEY_SPEC}, KeyUsage SIGN_VERIFY)"
            )
        try:
            key = public_key_from_der(reply["PublicKey"])
        except ValueError as error:
            raise SigningKeyUnavailable(
                f"a configured token signing key is not usable for RS256: {error}"
            ) from None
        found = _PublicKey(rsa_jwk(key), key)
        with self._lock:
            return self._keys.setdefault(key_id, found)


def _unavailable(doing: str, error: BotoCoreError | ClientError) -> SigningKeyUnavailable:
    code = (
        error.response.get("Error", {}).get("Code", "error")
        if isinstance(error, ClientError)
        else type(error).__name__
    )
    return SigningKeyUnavailable(
        f"KMS could not {doing} a configured token signing key ({code}); check that the key "
        "is enabled and this function may use it"
    )


def create_signing_key(client: KMSClient, alias: str, description: str) -> str:
    """The ARN of the RSA_2048 SIGN_VERIFY key ``alias`` names, created (with the alias)
    if there is none: provisioning the embedded stack again finds the same key."""
    try:
        found = client.describe_key(KeyId=alias)["KeyMetadata"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "NotFoundException":
            raise
    else:
        return str(found["Arn"])
    created = client.create_key(Description=description, KeySpec=KEY_SPEC, KeyUsage="SIGN_VERIFY")[
        "KeyMetadata"
    ]
    client.create_alias(AliasName=alias, TargetKeyId=created["KeyId"])
    return str(created["Arn"])
