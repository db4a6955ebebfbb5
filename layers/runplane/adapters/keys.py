"""KMS data keys for envelope encryption, bound to an encryption context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient


class KeyUnavailable(Exception):
    """KMS refused to unwrap (wrong context, disabled key): fail closed."""


@dataclass(frozen=True)
class DataKey:
    plaintext: bytes
    wrapped: bytes

    def __repr__(self) -> str:  # never print key material
        return f"DataKey(wrapped={len(self.wrapped)} bytes)"


class DataKeys:
    def __init__(self, client: KMSClient, key_id: str) -> None:
        self._kms = client
        self._key_id = key_id

    def generate(self, context: Mapping[str, str]) -> DataKey:
        made = self._kms.generate_data_key(
            KeyId=self._key_id, KeySpec="AES_256", EncryptionContext=dict(context)
        )
        return DataKey(made["Plaintext"], made["CiphertextBlob"])

    def unwrap(self, wrapped: bytes, context: Mapping[str, str]) -> bytes:
        try:
            return self._kms.decrypt(
                CiphertextBlob=wrapped, EncryptionContext=dict(context), KeyId=self._key_id
            )["Plaintext"]
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "KMS error")
            raise KeyUnavailable(code) from None
