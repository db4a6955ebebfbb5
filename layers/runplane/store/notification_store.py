"""The DynamoDB notification store (``services.repositories.NotificationStore``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane.domain.notifications import Delivery, Destination
from runplane.store import notifications as store


class DynamoNotificationStore:
    def destinations(self, workspace_id: str) -> list[Destination]:
        return store.destinations(workspace_id)

    def get_destination(self, workspace_id: str, destination_id: str) -> Destination:
        return store.get_destination(workspace_id, destination_id)

    def put_destination(self, destination: Destination) -> None:
        store.put_destination(destination).commit()

    def delete_destination(self, workspace_id: str, destination_id: str) -> None:
        store.delete_destination(workspace_id, destination_id)

    def new_delivery(
        self,
        delivery_id: str,
        destination: Destination,
        event: Mapping[str, Any],
        now: datetime,
    ) -> None:
        store.new_delivery(delivery_id, destination, event, now).commit()

    def get_delivery(self, destination_id: str, event_id: str) -> Delivery | None:
        return store.get_delivery(destination_id, event_id)

    def deliveries(self, destination_id: str) -> list[Delivery]:
        return store.deliveries(destination_id)

    def claim_attempt(self, delivery: Delivery, now: datetime, lease_until: datetime) -> None:
        store.claim_attempt(delivery, now, lease_until).commit()

    def reclaim_attempt(
        self,
        delivery: Delivery,
        lost: Mapping[str, Any],
        now: datetime,
        lease_until: datetime,
        *,
        give_up: bool,
    ) -> None:
        store.reclaim_attempt(delivery, lost, now, lease_until, give_up=give_up).commit()

    def record_attempt(
        self, delivery: Delivery, attempt: Mapping[str, Any], state: str, now: datetime
    ) -> None:
        store.record_attempt(delivery, attempt, state, now).commit()
