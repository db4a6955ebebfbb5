"""Notification destinations: URL rules, signatures, payloads and the retry schedule,
and the entities: a destination, an event's delivery to it, and a delivery's lease on
its in-flight slots.

Pure rules; storage, encryption and HTTP live in store/, adapters/ and services/.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit

from runplane.domain.errors import InvalidInput
from runplane.domain.run_events import NOTIFIABLE, EventType, RunEvent

MAX_URL: Final = 2048
MAX_DESTINATIONS: Final = 20
# Delivery attempts per event and destination: the first and five retries.
MAX_ATTEMPTS: Final = 6
# How long a worker owns a claimed attempt: well past one POST's total deadline. A
# claim older than this was abandoned by a worker that stopped; it may be taken over.
CLAIM_LEASE_SECONDS: Final = 60
# One POST, name lookup to status line, ends by then whatever the endpoint does.
DELIVERY_DEADLINE_SECONDS: Final = 15.0
# In-flight slots (store/delivery_slots.py): a delivery holds one of its organization's
# and one of its destination's from before its claim until its outcome is recorded,
# so for one POST's deadline and the few table calls around it. Twice the deadline
# covers that; a slot whose holder stopped (a crashed or timed-out invocation that
# never released it) is free again once its lease has run out, never held for good.
SLOT_LEASE_SECONDS: Final = 30
# A delivery refused a slot is queued again after ``deferral_delay``: doubling from
# 2 s up to one POST's deadline, by which every current holder has finished.
DEFERRAL_BASE_SECONDS: Final = 2
DEFERRAL_CAP_SECONDS: Final = 15
SIGNATURE_HEADER: Final = "X-Runplane-Signature"
EVENT_HEADER: Final = "X-Runplane-Event"
DELIVERY_HEADER: Final = "X-Runplane-Delivery"


class DestinationKind(StrEnum):
    WEBHOOK = "webhook"
    SLACK = "slack"


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class DestinationNotAllowed(InvalidInput):
    """A destination on an internal address: the worker would carry requests into our
    own network (metadata service, moto, the gateway) on a caller's behalf."""

    code = "DESTINATION_NOT_ALLOWED"


@dataclass(frozen=True)
class Destination:
    """A workspace's notification destination; its URL and signing secret only sealed
    (a wrapped data key and the ciphertext), its URL shown as ``display_url``."""

    id: str
    organization_id: str
    workspace_id: str
    name: str
    kind: str
    events: tuple[str, ...]
    display_url: str
    wrapped_key: bytes
    sealed: bytes
    created_at: datetime
    created_by: str

    def __repr__(self) -> str:  # the sealed fields stay out of logs and tracebacks
        return f"Destination({self.id}, {self.kind}, {self.display_url})"


@dataclass(frozen=True)
class Delivery:
    """One event's delivery to one destination, with every attempt in ``history``:
    pending -> delivering -> delivered | retrying -> ... | failed."""

    id: str
    destination_id: str
    workspace_id: str
    organization_id: str
    event_id: str
    event_type: str
    # None for a workspace's own event (auto_destroy_scheduled).
    run_id: str | None
    event: dict[str, Any]
    state: str
    attempts: int
    history: list[dict[str, Any]]
    created_at: datetime
    updated_at: datetime
    # While ``delivering``: until when the claiming worker owns the attempt.
    lease_until: datetime | None = None


@dataclass(frozen=True)
class SlotLease:
    """The slots one delivery holds until ``until`` (its destination's, then its
    organization's), under a token only this holder knows."""

    holder: str
    keys: tuple[tuple[str, str], ...]
    until: datetime


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses deliveries may reach. Only public (``is_global``) ones, unless
    loopback is allowed (the embedded stack under test, whose receivers are local);
    ``refused_ports`` are never reached (the embedded stack's gateway and moto)."""

    allow_loopback: bool = False
    refused_ports: frozenset[int] = frozenset()

    def allows(self, address: IPAddress, port: int) -> bool:
        if port in self.refused_ports:
            return False
        address = _embedded_ipv4(address)
        if self.allow_loopback and address.is_loopback:
            return True
        return address.is_global and not (
            address.is_private
            or address.is_loopback
            or address.is_link_local
            or address.is_multicast
            or address.is_reserved
            or address.is_unspecified
        )

    def allows_name(self, host: str) -> bool:
        """A host name (not an address): ``localhost`` and ``*.localhost`` are loopback
        whatever DNS says (RFC 6761); others are checked once resolved."""
        return self.allow_loopback or not _is_localhost(host)


def _is_localhost(host: str) -> bool:
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, Teredo, NAT64): it is the
    one a packet ends up at, so it is the one checked."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an address if it spells one, in every form a resolver accepts:
    dotted quad, IPv6 (with a zone), and the integer forms (``2130706433``,
    ``0x7f.1``, ``0177.0.0.1``). A host whose last label is numeric but is no valid
    address raises ``DestinationNotAllowed`` (resolvers disagree on what it means)."""
    name = host.rstrip(".")
    if ":" in name:
        try:
            return ipaddress.IPv6Address(name)
        except ValueError:
            raise DestinationNotAllowed(
                "the destination host is not a valid address", "/url"
            ) from None
    labels = name.split(".")
    if not _numeric_label(labels[-1]):
        return None
    numbers = [_label_value(label) for label in labels]
    if len(labels) > 4 or any(n is None for n in numbers):
        raise DestinationNotAllowed("the destination host is not a valid address", "/url")
    return _inet_aton([n for n in numbers if n is not None])


def _numeric_label(label: str) -> bool:
    lowered = label.lower()
    return lowered.isdigit() or (lowered.startswith("0x") and _is_hex(lowered[2:]))


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _label_value(label: str) -> int | None:
    lowered = label.lower()
    if lowered.startswith("0x"):
        return int(lowered[2:] or "0", 16) if _is_hex(lowered[2:]) else None
    if len(lowered) > 1 and lowered.startswith("0"):
        return int(lowered, 8) if lowered.isdigit() and set(lowered) <= set("01234567") else None
    return int(lowered) if lowered.isdigit() else None


def _inet_aton(numbers: list[int]) -> IPAddress:
    """inet_aton's reading: the last number fills the bytes the others leave."""
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (4 - len(leading)):
        raise DestinationNotAllowed("the destination host is not a valid address", "/url")
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def check_destination(url: str, policy: AddressPolicy) -> None:
    """Refuse a destination URL whose host is, or spells, an internal address (or
    whose port is refused). Names are checked again, resolved, at every delivery."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = literal_address(host)
    allowed = (
        policy.allows_name(host) and port not in policy.refused_ports
        if address is None
        else policy.allows(address, port)
    )
    if not allowed:
        raise DestinationNotAllowed(
            "a destination must be a public address: private, loopback, link-local, "
            "multicast and reserved addresses (and localhost) are refused",
            "/url",
        )


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
    if any(c.isspace() or not c.isprintable() or not c.isascii() for c in url):
        # Sent as written on the request line: nothing that could split it.
        raise InvalidInput("a destination URL must be printable ASCII without spaces", "/url")
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


def deferral_delay(deferrals: int, jitter: float) -> int:
    """Whole seconds (SQS delays by the second) before a delivery refused a slot is
    looked at again, ``deferrals`` being how often it was refused before: 2, 4, 8, then
    15 s at most, spread over the upper half of that by ``jitter`` (in [0, 1)) so the
    deliveries refused together do not all come back together."""
    doubled = DEFERRAL_BASE_SECONDS << min(max(0, deferrals), 8)
    ceiling = min(DEFERRAL_CAP_SECONDS, doubled)
    spread = 0.5 + max(0.0, min(1.0, jitter)) / 2
    return max(1, min(ceiling, math.ceil(ceiling * spread)))


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
        subject = f"run {event.run_id} in " if event.run_id is not None else "workspace "
        text = f"Runplane: {subject}{workspace_name}: {_headline(event)}"
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
        # A workspace's own event (auto_destroy_scheduled) is of no run.
        "run": None
        if event.run_id is None
        else {
            "id": event.run_id,
            "kind": None if event.run_kind is None else event.run_kind.value,
            "status": None if event.status is None else event.status.value,
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
    EventType.AUTO_DESTROY_SCHEDULED: "destroys itself soon",
    EventType.AUTO_DESTROY_FAILED: "auto-destroy failed",
    EventType.ENDED: "ended",
}


def _headline(event: RunEvent) -> str:
    line = _HEADLINES[event.type]
    if event.status is not None:
        line += f" ({event.status.value})"
    if "destroy_at" in event.details:
        line += f" at {event.details['destroy_at']}"
    if "next_attempt_at" in event.details:
        line += f", tried again at {event.details['next_attempt_at']}"
    if event.type is EventType.APPROVAL_EXPIRING and "approval_expires_at" in event.details:
        line += f", deadline {event.details['approval_expires_at']}"
    if event.reason:
        line += f": {event.reason[:200]}"
    return line
