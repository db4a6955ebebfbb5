"""Notification destinations and deliveries.

A destination's URL and signing secret are sealed (adapters/sealed.py) before they
are stored; listings show only the URL's scheme and host. Delivery is asynchronous:
``on_event`` records one delivery per matching destination (idempotent per event)
and queues it; ``attempt`` claims and makes one attempt, records it, and queues the
next one with exponential backoff until ``MAX_ATTEMPTS``. Destinations and deliveries
are kept through the ``NotificationStore`` seam; the POST is the ``WebhookClient``.

With ``slots`` (``DeliverySlots``: the SQS worker, where every invocation is its own
process), an attempt first takes an in-flight slot of its organization and of its
destination; one refused a slot is queued again a little later, unclaimed, so it
costs no attempt. The embedded worker bounds the same in memory (``FairLanes``).
"""

from __future__ import annotations

import json
import logging
import random
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from runplane.adapters.event_queue import EventQueue
from runplane.adapters.keys import DataKeys, KeyUnavailable
from runplane.adapters.sealed import Sealed, seal, unseal
from runplane.adapters.webhooks import PostResult, WebhookClient
from runplane.domain import notifications as rules
from runplane.domain.clock import Clock
from runplane.domain.errors import ConcurrentChange, InvalidInput, NotFound
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.notifications import Delivery, Destination
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import NOTIFIABLE, EventType, RunEvent
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.domain.entities import Workspace
    from runplane.domain.notifications import SlotLease
    from runplane.services.repositories import (
        DeliverySlots,
        NotificationStore,
        WorkspaceDirectory,
    )

logger = logging.getLogger("runplane.notifications")


@dataclass(frozen=True)
class CreatedDestination:
    view: dict[str, Any]
    # Shown once, at creation: receivers verify signatures with it.
    signing_secret: str


def _context(destination_id: str, organization_id: str) -> dict[str, str]:
    return {
        "purpose": "notification-destination",
        "destination_id": destination_id,
        "organization_id": organization_id,
    }


def view(destination: Destination) -> dict[str, Any]:
    return {
        "id": destination.id,
        "workspace_id": destination.workspace_id,
        "name": destination.name,
        "kind": destination.kind,
        "events": sorted(destination.events),
        "url": destination.display_url,
        "created_at": destination.created_at.isoformat(),
        "created_by": destination.created_by,
    }


def delivery_view(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.id,
        "destination_id": delivery.destination_id,
        "event": delivery.event_type,
        "event_id": delivery.event_id,
        "run_id": delivery.run_id,
        "status": delivery.state,
        "attempts": [
            {
                "attempt": a.get("attempt"),
                "at": a.get("at"),
                "response_code": a.get("response_code"),
                "error": a.get("error"),
                "outcome": a.get("outcome"),
                "next_attempt_in_seconds": a.get("next_attempt_in_seconds"),
            }
            for a in delivery.history
        ],
        "created_at": delivery.created_at.isoformat(),
        "updated_at": delivery.updated_at.isoformat(),
    }


class Notifications:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        keys: DataKeys,
        queue: EventQueue,
        *,
        allow_http: bool,
        retry_base_seconds: int,
        control_plane_url: str,
        address_policy: rules.AddressPolicy | None = None,
        client: WebhookClient | None = None,
        destinations: NotificationStore,
        directory: WorkspaceDirectory,
        slots: DeliverySlots | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._keys = keys
        self._queue = queue
        self._allow_http = allow_http
        # Which addresses destinations may be on: checked on save (literal hosts) and
        # again by the client at every delivery (resolved names).
        self._policy = address_policy or rules.AddressPolicy()
        self._retry_base = retry_base_seconds
        self._url = control_plane_url.rstrip("/")
        self._client = client or WebhookClient(self._policy)
        self._store = destinations
        # The workspace name a payload shows, read without a caller.
        self._directory = directory
        # None: whoever calls ``attempt`` bounds concurrent deliveries itself (the
        # embedded queue's FairLanes); the SQS worker's processes share these.
        self._slots = slots
        self._jitter = jitter

    # -- destinations (API) -----------------------------------------------------------------

    def create(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        name: str,
        kind: str,
        url: str,
        events: list[str],
    ) -> CreatedDestination:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        try:
            destination_kind = rules.DestinationKind(kind)
        except ValueError:
            raise InvalidInput("kind must be webhook or slack", "/kind") from None
        rules.check_url(url, allow_http=self._allow_http)
        rules.check_destination(url, self._policy)
        chosen = rules.check_events(events)
        if len(self._store.destinations(workspace.id)) >= rules.MAX_DESTINATIONS:
            raise InvalidInput(
                f"a workspace has at most {rules.MAX_DESTINATIONS} notification destinations"
            )
        destination_id = self._ids.new(IdKind.NOTIFICATION_DESTINATION)
        secret = secrets.token_urlsafe(32)
        sealed = seal(
            self._keys,
            _context(destination_id, workspace.organization_id),
            json.dumps({"url": url, "secret": secret}).encode(),
        )
        destination = Destination(
            id=destination_id,
            organization_id=workspace.organization_id,
            workspace_id=workspace.id,
            name=name,
            kind=destination_kind.value,
            events=tuple(sorted(e.value for e in chosen)),
            display_url=rules.display_url(url),
            wrapped_key=sealed.wrapped_key,
            sealed=sealed.ciphertext,
            created_at=self._clock.now(),
            created_by=principal.ref,
        )
        self._store.put_destination(destination)
        return CreatedDestination(view(destination), secret)

    def list_for(self, principal: Principal, workspace_id: str) -> list[dict[str, Any]]:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_READ, workspace.id)
        return [view(d) for d in self._store.destinations(workspace.id)]

    def delete(self, principal: Principal, workspace_id: str, destination_id: str) -> None:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        self._store.delete_destination(workspace.id, destination_id)

    def forget_workspace(self, workspace: Workspace, actor: str) -> None:
        """Delete a deleted workspace's destinations (its deletion, which checked who
        may, has committed: no permission is checked here)."""
        for destination in self._store.destinations(workspace.id):
            try:
                self._store.delete_destination(workspace.id, destination.id)
            except NotFound:
                continue

    def deliveries(
        self, principal: Principal, workspace_id: str, destination_id: str
    ) -> list[dict[str, Any]]:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_READ, workspace.id)
        self._store.get_destination(workspace.id, destination_id)
        return [delivery_view(d) for d in self._store.deliveries(destination_id)[:100]]

    def test(self, principal: Principal, workspace_id: str, destination_id: str) -> dict[str, Any]:
        """Send one signed test event now and say only whether it was delivered: a
        status code, an error or a timing would make this a port scanner."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        destination = self._store.get_destination(workspace.id, destination_id)
        now = self._clock.now()
        event = RunEvent(
            id=f"test.{self._ids.new(IdKind.AUDIT_EVENT)}",
            type=EventType.NEEDS_ATTENTION,
            run_id="run-test",
            organization_id=workspace.organization_id,
            workspace_id=workspace.id,
            run_kind=RunKind.PLAN_AND_APPLY,
            status=RunStatus.AWAITING_APPROVAL,
            at=now,
            reason="a test notification",
            details={"test": "true"},
        )
        result = self._send(destination, event, event.id)
        return {"destination_id": destination.id, "delivered": rules.is_success(result.status)}

    # -- delivery (worker) ------------------------------------------------------------------

    def on_event(self, event: RunEvent) -> None:
        """Record and queue one delivery per destination that subscribes to ``event``."""
        if event.type not in NOTIFIABLE:
            return
        if event.subscribers is not None and not event.subscribers.notifications:
            return  # the workspace had no destination when the run moved: nothing to read
        for destination in self._store.destinations(event.workspace_id):
            if destination.organization_id != event.organization_id:
                continue  # never across organizations, whatever the keys say
            if event.type.value not in destination.events:
                continue
            try:
                self._store.new_delivery(
                    self._ids.new(IdKind.NOTIFICATION_DELIVERY),
                    destination,
                    event.to_message(),
                    self._clock.now(),
                )
            except ConcurrentChange:
                existing = self._store.get_delivery(destination.id, event.id)
                # Recorded by an earlier try that may not have queued it: queue it again
                # (a second message loses the attempt claim and is dropped).
                if existing is None or existing.state != "pending" or existing.attempts:
                    continue
            self._queue.send(_deliver_message(destination, event.id, 1))

    def attempt(self, message: Mapping[str, Any]) -> None:
        """Make one delivery attempt (the message names destination, event, attempt)."""
        delivery = self._store.get_delivery(
            str(message["destination_id"]), str(message["event_id"])
        )
        if delivery is None:
            return
        wanted = int(message.get("attempt", delivery.attempts + 1))
        now = self._clock.now()
        lease_until = now + timedelta(seconds=rules.CLAIM_LEASE_SECONDS)
        if delivery.state == "delivering" and delivery.attempts == wanted:
            # This message's attempt was claimed and never recorded: a worker is sending
            # it now, or stopped mid-way (SQS redelivers once its visibility runs out).
            if delivery.lease_until is not None and delivery.lease_until > now:
                # Still held: look again once the lease has run out.
                wait = (delivery.lease_until - now).total_seconds()
                self._queue.send(dict(message), int(wait) + 1)
                return
            take = self._reclaim
        elif delivery.state in {"pending", "retrying"} and delivery.attempts + 1 == wanted:
            take = self._claim
        else:
            return  # a stale or duplicate message
        slots = self._slots
        held: SlotLease | None = None
        if slots is not None:
            # Before the claim: a delivery that must wait has used no attempt.
            held = slots.acquire(
                delivery.organization_id,
                delivery.destination_id,
                now,
                now + timedelta(seconds=rules.SLOT_LEASE_SECONDS),
            )
            if held is None:
                self._defer(message, delivery)
                return
        try:
            claimed = take(delivery, now, lease_until)
            if claimed is not None:
                self._attempt(claimed)
        finally:
            if slots is not None and held is not None:
                slots.release(held)

    def _defer(self, message: Mapping[str, Any], delivery: Delivery) -> None:
        """Queue ``message`` again a little later: its organization or its destination
        has every in-flight slot taken. If this send fails, the caller's message fails
        and its queue redelivers it: nothing is lost either way."""
        deferrals = int(message.get("deferred", 0))
        delay = rules.deferral_delay(deferrals, self._jitter())
        self._queue.send({**message, "deferred": deferrals + 1}, delay)
        logger.info(
            "notification delivery deferred: its organization or destination is at its share",
            extra={"delivery_id": delivery.id, "deferred": deferrals + 1, "delay": delay},
        )

    def _attempt(self, claimed: Delivery) -> None:
        """Send the claimed attempt (number ``claimed.attempts``) and record what happened."""
        delivery, number = claimed, claimed.attempts
        try:
            destination: Destination | None = self._store.get_destination(
                delivery.workspace_id, delivery.destination_id
            )
        except NotFound:
            destination = None
        if destination is None:
            result = PostResult(None, "destination deleted")
        else:
            result = self._send(destination, RunEvent.from_message(delivery.event), delivery.id)
        now = self._clock.now()
        record: dict[str, Any] = {
            "attempt": number,
            "at": now.isoformat(),
            "response_code": result.status,
            "error": result.error,
        }
        if rules.is_success(result.status):
            record["outcome"] = "delivered"
            self._record(claimed, record, "delivered", now)
            return
        if destination is None or number >= rules.MAX_ATTEMPTS:
            record["outcome"] = "failed"
            self._record(claimed, record, "failed", now)
            logger.warning(
                "notification delivery gave up",
                extra={"delivery_id": delivery.id, "attempts": number},
            )
            return
        delay = rules.retry_delay(number, self._retry_base)
        record["outcome"] = "retrying"
        record["next_attempt_in_seconds"] = delay
        if self._record(claimed, record, "retrying", now):
            self._queue.send(_deliver_message(destination, delivery.event_id, number + 1), delay)

    def _record(
        self, claimed: Delivery, record: Mapping[str, Any], state: str, now: datetime
    ) -> bool:
        try:
            self._store.record_attempt(claimed, record, state, now)
        except ConcurrentChange:
            # This worker outlived its lease and another took the attempt over: its
            # outcome is the other's to record.
            logger.warning(
                "notification attempt outcome dropped: its lease had run out",
                extra={"delivery_id": claimed.id, "attempt": claimed.attempts},
            )
            return False
        return True

    def _claim(self, delivery: Delivery, now: datetime, lease_until: datetime) -> Delivery | None:
        try:
            self._store.claim_attempt(delivery, now, lease_until)
        except ConcurrentChange:
            return None
        return replace(
            delivery, attempts=delivery.attempts + 1, state="delivering", lease_until=lease_until
        )

    def _reclaim(self, delivery: Delivery, now: datetime, lease_until: datetime) -> Delivery | None:
        """Take over a lapsed claim: the delivery with attempt ``attempts + 1`` claimed,
        or None (another worker moved it on, or this was the last attempt: failed)."""
        give_up = delivery.attempts >= rules.MAX_ATTEMPTS
        lost = {
            "attempt": delivery.attempts,
            "at": now.isoformat(),
            "response_code": None,
            "error": "the worker stopped before recording this attempt",
            "outcome": "failed" if give_up else "lost",
        }
        try:
            self._store.reclaim_attempt(delivery, lost, now, lease_until, give_up=give_up)
        except ConcurrentChange:
            return None
        logger.warning(
            "notification attempt reclaimed after its lease ran out",
            extra={"delivery_id": delivery.id, "attempt": delivery.attempts},
        )
        if give_up:
            return None
        return replace(
            delivery,
            attempts=delivery.attempts + 1,
            history=[*delivery.history, lost],
            lease_until=lease_until,
        )

    def _send(self, destination: Destination, event: RunEvent, delivery_id: str) -> PostResult:
        try:
            opened = json.loads(
                unseal(
                    self._keys,
                    _context(destination.id, destination.organization_id),
                    Sealed(destination.wrapped_key, destination.sealed),
                )
            )
        except KeyUnavailable:
            return PostResult(None, "destination secret unavailable")
        try:
            workspace_name = self._directory.get_workspace(destination.workspace_id).name
        except NotFound:
            workspace_name = destination.workspace_id
        run_url = (
            f"{self._url}/ui/runs/{event.run_id}"
            if event.run_id not in {None, "run-test"}
            else None
        )
        kind = rules.DestinationKind(destination.kind)
        body = rules.payload(
            kind, event, delivery_id, workspace_name=workspace_name, run_url=run_url
        )
        headers = {rules.EVENT_HEADER: event.type.value, rules.DELIVERY_HEADER: delivery_id}
        if kind is rules.DestinationKind.WEBHOOK:
            headers[rules.SIGNATURE_HEADER] = rules.signature(opened["secret"].encode(), body)
        return self._client.post(str(opened["url"]), body, headers)


def _deliver_message(destination: Destination, event_id: str, attempt: int) -> dict[str, Any]:
    return {
        "kind": "deliver",
        # The queue's fairness lane (adapters/event_queue.py): shares per organization.
        "organization_id": destination.organization_id,
        "destination_id": destination.id,
        "workspace_id": destination.workspace_id,
        "event_id": event_id,
        "attempt": attempt,
    }
