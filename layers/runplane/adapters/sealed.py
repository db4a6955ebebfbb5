"""Small secrets sealed the way artifacts are: a KMS data key per secret, bound by
encryption context to what owns it, and AES-256-GCM over the secret with that context
as associated data. Only the wrapped key and the ciphertext are stored."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runplane.adapters.keys import DataKeys, KeyUnavailable

_NONCE = 12


@dataclass(frozen=True)
class Sealed:
    wrapped_key: bytes
    ciphertext: bytes

    def __repr__(self) -> str:
        return f"Sealed({len(self.ciphertext)} bytes)"


def _aad(context: Mapping[str, str]) -> bytes:
    return json.dumps(dict(context), sort_keys=True).encode()


def seal(keys: DataKeys, context: Mapping[str, str], plaintext: bytes) -> Sealed:
    data_key = keys.generate(context)
    nonce = os.urandom(_NONCE)
    body = AESGCM(data_key.plaintext).encrypt(nonce, plaintext, _aad(context))
    return Sealed(data_key.wrapped, nonce + body)


def unseal(keys: DataKeys, context: Mapping[str, str], sealed: Sealed) -> bytes:
    """The plaintext, or ``KeyUnavailable`` when KMS or the tag refuses this context."""
    key = keys.unwrap(sealed.wrapped_key, context)
    nonce, body = sealed.ciphertext[:_NONCE], sealed.ciphertext[_NONCE:]
    try:
        return AESGCM(key).decrypt(nonce, body, _aad(context))
    except InvalidTag:
        raise KeyUnavailable("sealed secret does not match its context") from None
