"""The issuer's signer without KMS: RSA keys generated in memory, signing exactly as
the KMS signer does (the same JWK, kid and JWS encoding), recording what it signed."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from runplane.adapters.token_signer import ALGORITHM, b64url, rsa_jwk, signing_input
from runplane.domain.errors import SigningKeyUnavailable


@cache
def _generated(name: str) -> rsa.RSAPrivateKey:
    """One RSA key per name for the whole test session (generating one takes time)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class InMemorySigner:
    """``TokenSigner`` over keys named by key ID; ``signed`` lists the key IDs used."""

    def __init__(self, *key_ids: str) -> None:
        self.keys = {key_id: _generated(key_id) for key_id in key_ids}
        self.signed: list[str] = []
        self.published: list[str] = []
        # Keys KMS would refuse (disabled, deleted, not granted).
        self.unavailable: set[str] = set()

    def public_jwk(self, key_id: str) -> Mapping[str, str]:
        if key_id in self.unavailable:
            raise SigningKeyUnavailable("KMS could not read a configured token signing key")
        self.published.append(key_id)
        return rsa_jwk(self.keys[key_id].public_key())

    def sign_jwt(self, key_id: str, claims: Mapping[str, Any]) -> str:
        if key_id in self.unavailable:
            raise SigningKeyUnavailable("KMS could not sign with a configured token signing key")
        key = self.keys[key_id]
        header = {"alg": ALGORITHM, "typ": "JWT", "kid": rsa_jwk(key.public_key())["kid"]}
        message = signing_input(header, claims)
        self.signed.append(key_id)
        signature = key.sign(message, padding.PKCS1v15(), hashes.SHA256())
        return f"{message.decode('ascii')}.{b64url(signature)}"
