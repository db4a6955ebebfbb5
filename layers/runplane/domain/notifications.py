"""Notification destinations: URL rules, signatures, payloads and the retry schedule.

Pure rules; storage, encryption and HTTP live in store/, adapters/ and services/.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit

from runplane.domain.errors import InvalidInput
from runplane.domain.run_events import NOTIFIABLE, EventType, RunEvent

MAX_URL: Final = 2048
MAX_DESTINATIONS: Final = 20
# Delivery attempts per event and destination: the first and five retries.
MAX_ATTEMPTS: Final = 6
# How long a worker owns a claimed attempt: well past one POST's timeout (10 s). A
# claim older than this was abandoned by a worker that stopped; it may be taken over.
CLAIM_LEASE_SECONDS: Final = 60
SIGNATURE_HEADER: Final = "X-Runplane-Signature"
EVENT_HEADER: Final = "X-Runplane-Event"
DELIVERY_HEADER: Final = "X-Runplane-Delivery"


class DestinationKind(StrEnum):
    WEBHOOK = "webhook"
    SLACK = "slack"


def check_url(url: str, *, allow_http: bool) -> str:
    """The destination URL, or ``InvalidInput``: https (http only in the embedded stack),
    a host, and no credentials in it (they would be echoed by every listing)."""
    if len(url) > MAX_URL:
        raise InvalidInput(f"a destination URL has at most {MAX_URL} characters", "/url")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidInput("the destination URL cannot be parsed", "/url") from None
    schemes = {"https", "http"} if allow_http else {"https"}
    if parts.scheme not in schemes:
        raise InvalidInput("a destination URL must use https", "/url")
    if not parts.hostname:
        raise InvalidInput("a destination URL needs a host", "/url")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(
            "a destination URL must not carry credentials; use the signing secret", "/url"
        )
    if parts.fragment:
        raise InvalidInput("a destination URL must not have a fragment", "/url")
    del port
    return url


def display_url(url: str) -> str:
    """What listings show: scheme, host and port only. Webhook paths and queries often
    are the credential (a Slack incoming-webhook URL is), so they are never echoed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    tail = "/…" if parts.path.strip("/") or parts.query else "/"
    return f"{parts.scheme}://{host}{port}{tail}"


def check_events(names: Iterable[str]) -> frozenset[EventType]:
    chosen: set[EventType] = set()
    for index, name in enumerate(names):
        try:
            event = EventType(name)
        except ValueError:
            event = None
        if event is None or event not in NOTIFIABLE:
            allowed = ", ".join(sorted(e.value for e in NOTIFIABLE))
            raise InvalidInput(f"unknown event {name[:40]!r}; one of {allowed}", f"/events/{index}")
        chosen.add(event)
    if not chosen:
        raise InvalidInput("a destination subscribes to at least one event", "/events")
    return frozenset(chosen)


def signature(secret: bytes, body: bytes) -> str:
    """The signature header's value: HMAC-SHA256 over the exact body sent."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str) -> bool:
    return hmac.compare_digest(signature(secret, body), header)


def retry_delay(attempt: int, base_seconds: int, cap_seconds: int = 900) -> int:
    """Seconds to wait after failed attempt ``attempt`` (1-based): exponential, capped."""
    return int(min(cap_seconds, base_seconds * 2 ** (attempt - 1)))


def is_success(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def payload(
    kind: DestinationKind,
    event: RunEvent,
    delivery_id: str,
    *,
    workspace_name: str,
    run_url: str | None,
) -> bytes:
    """The body sent for ``event``: the generic JSON document, or Slack's ``text``."""
    if kind is DestinationKind.SLACK:
        text = f"Runplane: run {event.run_id} in {workspace_name}: {_headline(event)}"
        if run_url:
            text += f" <{run_url}|open>"
        return json.dumps({"text": text}).encode()
    document: dict[str, Any] = {
        "delivery_id": delivery_id,
        "event": event.type.value,
        "event_id": event.id,
        "at": event.at.isoformat(),
        "organization_id": event.organization_id,
        "workspace": {"id": event.workspace_id, "name": workspace_name},
        "run": {
            "id": event.run_id,
            "kind": event.run_kind.value,
            "status": event.status.value,
            "reason": event.reason,
            "url": run_url,
        },
        "details": dict(event.details),
    }
    return json.dumps(document, sort_keys=True).encode()


_HEADLINES: Mapping[EventType, str] = {
    EventType.NEEDS_ATTENTION: "awaiting approval",
    EventType.APPROVAL_EXPIRING: "approval expires soon",
    EventType.APPLIED: "applied",
    EventType.ERRORED: "errored",
    EventType.EXPIRED: "approval expired",
    EventType.NEEDS_RECOVERY: "needs recovery",
    EventType.DRIFT_DETECTED: "drift detected",
    EventType.ENDED: "ended",
}


def _headline(event: RunEvent) -> str:
    line = f"{_HEADLINES[event.type]} ({event.status.value})"
    if event.type is EventType.APPROVAL_EXPIRING and "approval_expires_at" in event.details:
        line += f", deadline {event.details['approval_expires_at']}"
    if event.reason:
        line += f": {event.reason[:200]}"
    return line
