"""Public identifiers: a type prefix and 128 random bits, so they are unguessable."""

from __future__ import annotations

import base64
import hashlib
import re
from enum import StrEnum
from typing import Protocol


class IdKind(StrEnum):
    ORGANIZATION = "org"
    WORKSPACE = "ws"
    RUN = "run"
    STATE_VERSION = "sv"
    AUDIT_EVENT = "evt"
    LOCK = "lck"
    WAITER = "wtr"
    ARTIFACT = "art"
    UPLOAD = "upl"
    CAPABILITY = "cap"
    SESSION = "ses"
    SANDBOX = "sbx"
    ATTEMPT = "att"
    API_TOKEN = "tok"
    CONFIGURATION_VERSION = "cv"
    POLICY_CHECK = "pol"
    RECOVERY = "rcv"
    USER = "user"
    WEB_SESSION = "web"
    NOTIFICATION_DESTINATION = "ntf"
    NOTIFICATION_DELIVERY = "dlv"
    SOURCE_INGESTION = "src"
    SCHEDULE = "sch"
    # A workload identity token's ``jti`` (docs/credentials.md).
    WORKLOAD_IDENTITY_TOKEN = "wit"
    VARIABLE_SET = "varset"
    TEAM = "team"


# 26 characters of lowercase base32 carry 128 bits (the last 2 bits are zero).
PUBLIC_ID_PATTERN = re.compile(r"(?P<kind>[a-z]+)-(?P<body>[a-z2-7]{26})")


class IdGenerator(Protocol):
    def new(self, kind: IdKind) -> str:
        """A fresh public ID such as ``run-3xk...``."""
        ...


def derived_id(kind: IdKind, *parts: str) -> str:
    """The one ID of ``kind`` that ``parts`` name, in the public ID format: a step
    retried after a crash derives the same ID, so its conditional put refuses a second
    record. Unguessable as long as one part is (e.g. a random public ID)."""
    digest = hashlib.sha256("\x1f".join((kind.value, *parts)).encode()).digest()[:16]
    return f"{kind.value}-{base64.b32encode(digest).decode('ascii').rstrip('=').lower()}"


def kind_of(public_id: str) -> IdKind | None:
    """The kind a well-formed public ID names, or None for anything else."""
    match = PUBLIC_ID_PATTERN.fullmatch(public_id)
    if match is None:
        return None
    try:
        return IdKind(match["kind"])
    except ValueError:
        return None
