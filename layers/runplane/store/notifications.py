"""Notification destinations (beside their workspace) and deliveries (one per event and
destination, with every attempt recorded on it).

- ``WS#<workspace> / NOTIFY#<destination>``: kind, events, the URL shown to people,
  and the sealed URL and signing secret (KMS-wrapped data key, AES-256-GCM).
- ``NOTIFY#<destination> / DELIVERY#<event id>``: put only if absent, so an event
  published or handled twice is delivered once; each attempt is claimed by a
  conditional write on ``attempts``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pynamodb.attributes import (
    BinaryAttribute,
    JSONAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)

from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.notifications import Delivery, Destination
from runplane.store.models import TableItem, WorkspaceItem, workspace_key
from runplane.store.transaction import Item, Transaction
from runplane.store.workspaces import count_change

DESTINATION_PREFIX = "NOTIFY#"
DELIVERY_PREFIX = "DELIVERY#"
# Deliveries are kept for a month, then DynamoDB's TTL removes them.
DELIVERY_RETENTION = timedelta(days=30)


class DestinationItem(TableItem):
    destination_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    name = UnicodeAttribute()
    kind = UnicodeAttribute()
    events: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    display_url = UnicodeAttribute()
    wrapped_key = BinaryAttribute(legacy_encoding=False)
    sealed = BinaryAttribute(legacy_encoding=False)
    created_at = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()


class DeliveryItem(TableItem):
    delivery_id = UnicodeAttribute()
    destination_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    event_id = UnicodeAttribute()
    event_type = UnicodeAttribute()
    run_id = UnicodeAttribute(null=True)
    # The event as published (public IDs and statuses only).
    event = JSONAttribute(default=dict)
    # pending -> delivering -> delivered | retrying -> ... | failed
    state = UnicodeAttribute()
    attempts = NumberAttribute(default=0)
    history = JSONAttribute(default=list)
    # While ``delivering``: until when the claiming worker owns the attempt. A worker
    # that stopped before recording it leaves the lease to run out; a later handling
    # of the message then takes the attempt over (``reclaim_attempt``).
    lease_until = UTCDateTimeAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()


def destination_key(workspace_id: str, destination_id: str) -> tuple[str, str]:
    return workspace_key(workspace_id)[0], f"{DESTINATION_PREFIX}{destination_id}"


def delivery_key(destination_id: str, event_id: str) -> tuple[str, str]:
    return f"{DESTINATION_PREFIX}{destination_id}", f"{DELIVERY_PREFIX}{event_id}"


def _destination(item: DestinationItem) -> Destination:
    """The destination an item holds (the inverse of ``_destination_item``)."""
    return Destination(
        id=item.destination_id,
        organization_id=item.org_id,
        workspace_id=item.workspace_id,
        name=item.name,
        kind=item.kind,
        events=tuple(item.events),
        display_url=item.display_url,
        wrapped_key=bytes(item.wrapped_key),
        sealed=bytes(item.sealed),
        created_at=item.created_at,
        created_by=item.created_by,
    )


def _delivery(item: DeliveryItem) -> Delivery:
    """The delivery an item holds (the inverse of ``_delivery_item``)."""
    return Delivery(
        id=item.delivery_id,
        destination_id=item.destination_id,
        workspace_id=item.workspace_id,
        organization_id=item.org_id,
        event_id=item.event_id,
        event_type=item.event_type,
        run_id=item.run_id,
        event=dict(item.event or {}),
        state=item.state,
        attempts=int(item.attempts),
        history=list(item.history or []),
        created_at=item.created_at,
        updated_at=item.updated_at,
        lease_until=item.lease_until,
    )


def _destination_item(destination: Destination) -> DestinationItem:
    """The item holding ``destination`` (the inverse of ``_destination``)."""
    return DestinationItem(
        *destination_key(destination.workspace_id, destination.id),
        destination_id=destination.id,
        org_id=destination.organization_id,
        workspace_id=destination.workspace_id,
        name=destination.name,
        kind=destination.kind,
        events=list(destination.events),
        display_url=destination.display_url,
        wrapped_key=destination.wrapped_key,
        sealed=destination.sealed,
        created_at=destination.created_at,
        created_by=destination.created_by,
    )


def _delivery_item(delivery: Delivery) -> DeliveryItem:
    """The item holding ``delivery`` (the inverse of ``_delivery``), kept for
    ``DELIVERY_RETENTION`` from its creation."""
    return DeliveryItem(
        *delivery_key(delivery.destination_id, delivery.event_id),
        delivery_id=delivery.id,
        destination_id=delivery.destination_id,
        workspace_id=delivery.workspace_id,
        org_id=delivery.organization_id,
        event_id=delivery.event_id,
        event_type=delivery.event_type,
        run_id=delivery.run_id,
        event=delivery.event,
        state=delivery.state,
        attempts=delivery.attempts,
        history=delivery.history,
        lease_until=delivery.lease_until,
        created_at=delivery.created_at,
        updated_at=delivery.updated_at,
        expires_at=delivery.created_at + DELIVERY_RETENTION,
    )


def put_destination(destination: Destination) -> Transaction:
    """The destination, counted on its workspace in the same write."""
    return (
        Transaction()
        .put_new(_destination_item(destination))
        .extend([count_change(WorkspaceItem.destination_count, destination.workspace_id, 1)])
    )


def get_destination(workspace_id: str, destination_id: str) -> Destination:
    try:
        item = DestinationItem.get(
            *destination_key(workspace_id, destination_id), consistent_read=True
        )
    except DestinationItem.DoesNotExist:
        raise NotFound("notification destination", destination_id) from None
    return _destination(item)


def destinations(workspace_id: str) -> list[Destination]:
    items = DestinationItem.query(
        workspace_key(workspace_id)[0],
        DestinationItem.sk.startswith(DESTINATION_PREFIX),
        consistent_read=True,
    )
    return sorted((_destination(item) for item in items), key=lambda d: d.created_at)


def delete_destination(workspace_id: str, destination_id: str) -> None:
    def refused(current: Item | None) -> Exception:
        return NotFound("notification destination", destination_id)

    Transaction().delete(
        DestinationItem(*destination_key(workspace_id, destination_id)),
        condition=DestinationItem.pk.exists(),
        on_refused=refused,
    ).extend([count_change(WorkspaceItem.destination_count, workspace_id, -1)]).commit()


def new_delivery(
    delivery_id: str,
    destination: Destination,
    event: Mapping[str, Any],
    now: datetime,
) -> Transaction:
    """A delivery of ``event`` to ``destination``: refused (``ConcurrentChange``) if one
    exists already, which makes fan-out idempotent per event and destination."""
    return Transaction().put_new(
        _delivery_item(
            Delivery(
                id=delivery_id,
                destination_id=destination.id,
                workspace_id=destination.workspace_id,
                organization_id=destination.organization_id,
                event_id=str(event["id"]),
                event_type=str(event["type"]),
                run_id=None if event.get("run_id") is None else str(event["run_id"]),
                event=dict(event),
                state="pending",
                attempts=0,
                history=[],
                created_at=now,
                updated_at=now,
            )
        )
    )


def get_delivery(destination_id: str, event_id: str) -> Delivery | None:
    try:
        item = DeliveryItem.get(*delivery_key(destination_id, event_id), consistent_read=True)
    except DeliveryItem.DoesNotExist:
        return None
    return _delivery(item)


def deliveries(destination_id: str) -> list[Delivery]:
    items = DeliveryItem.query(
        f"{DESTINATION_PREFIX}{destination_id}",
        DeliveryItem.sk.startswith(DELIVERY_PREFIX),
        consistent_read=True,
    )
    return sorted((_delivery(item) for item in items), key=lambda d: d.created_at, reverse=True)


def _moved_on(delivery: Delivery) -> Callable[[Item | None], Exception]:
    def refused(current: Item | None) -> Exception:
        return ConcurrentChange(f"delivery {delivery.id} moved on; this attempt is not ours")

    return refused


def claim_attempt(delivery: Delivery, now: datetime, lease_until: datetime) -> Transaction:
    """Claim attempt ``attempts + 1`` until ``lease_until``: two workers holding the same
    message cannot both send it (the loser's write is refused and it drops the message)."""
    return Transaction().update(
        DeliveryItem(*delivery_key(delivery.destination_id, delivery.event_id)),
        [
            DeliveryItem.attempts.set(delivery.attempts + 1),
            DeliveryItem.state.set("delivering"),
            DeliveryItem.lease_until.set(lease_until),
            DeliveryItem.updated_at.set(now),
        ],
        condition=(DeliveryItem.attempts == delivery.attempts)
        & DeliveryItem.state.is_in("pending", "retrying"),
        on_refused=_moved_on(delivery),
    )


def reclaim_attempt(
    delivery: Delivery,
    lost: Mapping[str, Any],
    now: datetime,
    lease_until: datetime,
    *,
    give_up: bool,
) -> Transaction:
    """Take over a ``delivering`` delivery whose lease ran out (its worker stopped before
    recording the attempt): the lost attempt goes into the history, and attempt
    ``attempts + 1`` is claimed, or with ``give_up`` the delivery is ``failed``. Refused
    while the lease holds or once anyone moved the delivery on."""
    updates = [
        DeliveryItem.history.set([*delivery.history, dict(lost)]),
        DeliveryItem.updated_at.set(now),
    ]
    if give_up:
        updates += [DeliveryItem.state.set("failed"), DeliveryItem.lease_until.remove()]
    else:
        updates += [
            DeliveryItem.attempts.set(delivery.attempts + 1),
            DeliveryItem.lease_until.set(lease_until),
        ]
    return Transaction().update(
        DeliveryItem(*delivery_key(delivery.destination_id, delivery.event_id)),
        updates,
        condition=(DeliveryItem.attempts == delivery.attempts)
        & (DeliveryItem.state == "delivering")
        & (DeliveryItem.lease_until < now),
        on_refused=_moved_on(delivery),
    )


def record_attempt(
    delivery: Delivery, attempt: Mapping[str, Any], state: str, now: datetime
) -> Transaction:
    """Record the outcome of the claimed attempt (``delivery.attempts`` is its number)."""
    return Transaction().update(
        DeliveryItem(*delivery_key(delivery.destination_id, delivery.event_id)),
        [
            DeliveryItem.history.set([*delivery.history, dict(attempt)]),
            DeliveryItem.state.set(state),
            DeliveryItem.lease_until.remove(),
            DeliveryItem.updated_at.set(now),
        ],
        condition=(DeliveryItem.attempts == delivery.attempts)
        & (DeliveryItem.state == "delivering"),
    )
