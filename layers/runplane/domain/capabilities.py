"""Capabilities: single-purpose, short-lived authority handed to a sandbox.

A capability is bound to one run attempt, one phase and one sandbox, and
expires. Its handle is a 256-bit random secret shown once; only its SHA-256 is
stored. Bootstrap and secret capabilities are one-time; the seed allows two
exact replays so that lost responses stay recoverable without widening
authority:

- bootstrap: the same handle for the exact attempt, phase and sandbox within
  expiry returns the same runner session (the session store still consumes the
  handle's JTI once);
- apply_start: the same handle with the identical request returns the
  identical stored result; any changed input is refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

# What a capability handle and a runner session token start with: an authenticator
# tells them from other credentials by it, without loading what redeems them.
HANDLE_PREFIX = "rpc_"
SESSION_PREFIX = "rps_"


class CapabilityKind(StrEnum):
    BOOTSTRAP = "bootstrap"
    APPLY_START = "apply_start"
    SECRET = "secret"
    # A phase's cloud credentials (services/run_credentials.py): one-time.
    CREDENTIALS = "credentials"


class Phase(StrEnum):
    PLAN = "plan"
    APPLY = "apply"


@dataclass(frozen=True)
class Binding:
    """What a capability or session may be used for, and by whom."""

    run_id: str
    attempt_id: str
    phase: Phase
    sandbox_id: str


@dataclass(frozen=True)
class CapabilityRecord:
    jti: str
    kind: CapabilityKind
    organization_id: str
    binding: Binding
    inputs: tuple[str, ...]
    valid_until: datetime


@dataclass(frozen=True)
class RunnerSession:
    id: str
    organization_id: str
    jti: str
    binding: Binding
    inputs: tuple[str, ...]
    expires_at: datetime
    revoked: bool = False


class AlreadyRedeemed(Exception):
    """The handle is valid and exactly bound but was redeemed before: its JTI, and the
    request digest and result its redemption stored (for the replay rules)."""

    def __init__(
        self, jti: str, request_digest: str | None = None, result: dict[str, str] | None = None
    ) -> None:
        super().__init__("already redeemed")
        self.jti = jti
        self.request_digest = request_digest
        self.result: dict[str, str] = dict(result or {})


def handle_hash(handle: str) -> str:
    """Handles carry 256 random bits, so a plain SHA-256 is a safe lookup key.

    Any presented string hashes (UTF-8): a malformed credential is simply unknown.
    """
    return hashlib.sha256(handle.encode("utf-8")).hexdigest()


def request_digest(fields: dict[str, str]) -> str:
    """A canonical digest of a redemption request, to recognise an exact retry."""
    canonical = "\n".join(f"{key}={fields[key]}" for key in sorted(fields))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
