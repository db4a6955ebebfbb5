from __future__ import annotations

import base64
import secrets

from runplane.domain.ids import IdKind


class RandomIds:
    """Public IDs from the operating system's CSPRNG: ``<kind>-<26 base32 chars>``."""

    def new(self, kind: IdKind) -> str:
        body = base64.b32encode(secrets.token_bytes(16)).decode("ascii").rstrip("=").lower()
        return f"{kind.value}-{body}"
