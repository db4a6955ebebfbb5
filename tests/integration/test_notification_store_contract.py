"""The notification store contract: the same cases against the DynamoDB store (on moto)
and the in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.notifications import Delivery, Destination
from runplane.services.repositories import NotificationStore
from runplane.store.notification_store import DynamoNotificationStore
from tests.fakes import InMemoryNotifications

AT = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def _destination(destination_id: str, workspace_id: str = "ws-1", at: datetime = AT) -> Destination:
    return Destination(
        id=destination_id,
        organization_id="org-acme",
        workspace_id=workspace_id,
        name=f"hook {destination_id}",
        kind="webhook",
        events=("applied", "errored"),
        display_url="https://hooks.example",
        wrapped_key=b"wrapped-key",
        sealed=b"sealed-url-and-secret",
        created_at=at,
        created_by="user:ada",
    )


def _event(event_id: str) -> dict[str, Any]:
    return {"id": event_id, "type": "applied", "run_id": "run-1", "workspace_id": "ws-1"}


@pytest.fixture(params=["dynamodb", "memory"])
def notifications(request: pytest.FixtureRequest) -> NotificationStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoNotificationStore()
    return InMemoryNotifications()


def test_destinations_read_back_in_creation_order_per_workspace(
    notifications: NotificationStore,
) -> None:
    # Given two destinations of a workspace, created in turn, and one of another
    notifications.put_destination(_destination("nd-b", at=AT))
    notifications.put_destination(_destination("nd-a", at=AT + timedelta(seconds=1)))
    notifications.put_destination(_destination("nd-c", workspace_id="ws-2"))
    # Then each reads back whole, and the workspace lists its own in creation order
    assert notifications.get_destination("ws-1", "nd-a") == _destination(
        "nd-a", at=AT + timedelta(seconds=1)
    )
    assert [d.id for d in notifications.destinations("ws-1")] == ["nd-b", "nd-a"]
    assert notifications.destinations("ws-none") == []
    # And a destination is not found under another workspace
    with pytest.raises(NotFound):
        notifications.get_destination("ws-2", "nd-a")
    # And a second put of the same ID is refused, changing nothing
    with pytest.raises(ConcurrentChange):
        notifications.put_destination(replace(_destination("nd-a"), name="other"))
    assert notifications.get_destination("ws-1", "nd-a").name == "hook nd-a"


def test_a_deleted_destination_is_gone_and_an_unknown_one_is_not_found(
    notifications: NotificationStore,
) -> None:
    notifications.put_destination(_destination("nd-1"))
    notifications.delete_destination("ws-1", "nd-1")
    assert notifications.destinations("ws-1") == []
    with pytest.raises(NotFound):
        notifications.get_destination("ws-1", "nd-1")
    with pytest.raises(NotFound):
        notifications.delete_destination("ws-1", "nd-1")


def test_an_event_is_recorded_once_per_destination_and_listed_newest_first(
    notifications: NotificationStore,
) -> None:
    # Given a destination and a delivery of event ev-1
    destination = _destination("nd-1")
    notifications.put_destination(destination)
    notifications.new_delivery("nv-1", destination, _event("ev-1"), AT)
    # Then it reads back pending with no attempts
    assert notifications.get_delivery("nd-1", "ev-1") == Delivery(
        id="nv-1",
        destination_id="nd-1",
        workspace_id="ws-1",
        organization_id="org-acme",
        event_id="ev-1",
        event_type="applied",
        run_id="run-1",
        event=_event("ev-1"),
        state="pending",
        attempts=0,
        history=[],
        created_at=AT,
        updated_at=AT,
        lease_until=None,
    )
    # When the same event is recorded again, it is refused and nothing changed
    with pytest.raises(ConcurrentChange):
        notifications.new_delivery("nv-2", destination, _event("ev-1"), AT + LEASE)
    assert notifications.get_delivery("nd-1", "ev-1").id == "nv-1"  # type: ignore[union-attr]
    # And a later event's delivery is listed first
    notifications.new_delivery("nv-3", destination, _event("ev-0"), AT + LEASE)
    assert [d.id for d in notifications.deliveries("nd-1")] == ["nv-3", "nv-1"]
    assert notifications.get_delivery("nd-1", "ev-9") is None
    assert notifications.deliveries("nd-9") == []


def test_an_attempt_is_claimed_once_and_its_outcome_recorded_once(
    notifications: NotificationStore,
) -> None:
    # Given a pending delivery, read by two workers
    destination = _destination("nd-1")
    notifications.new_delivery("nv-1", destination, _event("ev-1"), AT)
    read = notifications.get_delivery("nd-1", "ev-1")
    assert read is not None
    # When the first claims attempt 1
    now = AT + timedelta(seconds=5)
    notifications.claim_attempt(read, now, now + LEASE)
    claimed = notifications.get_delivery("nd-1", "ev-1")
    assert claimed is not None
    assert (claimed.state, claimed.attempts, claimed.lease_until, claimed.updated_at) == (
        "delivering",
        1,
        now + LEASE,
        now,
    )
    # Then the second's claim on the same read is refused, changing nothing
    with pytest.raises(ConcurrentChange):
        notifications.claim_attempt(read, now, now + LEASE)
    assert notifications.get_delivery("nd-1", "ev-1") == claimed
    # When the outcome is recorded
    outcome = {"attempt": 1, "response_code": 500, "outcome": "retrying", "error": None}
    notifications.record_attempt(claimed, outcome, "retrying", now + LEASE)
    recorded = notifications.get_delivery("nd-1", "ev-1")
    assert recorded is not None
    assert (recorded.state, recorded.attempts, recorded.history, recorded.lease_until) == (
        "retrying",
        1,
        [outcome],
        None,
    )
    # Then recording it again, or over a stale read, is refused
    with pytest.raises(ConcurrentChange):
        notifications.record_attempt(claimed, outcome, "delivered", now + LEASE)
    with pytest.raises(ConcurrentChange):
        notifications.record_attempt(read, outcome, "delivered", now + LEASE)
    assert notifications.get_delivery("nd-1", "ev-1") == recorded


def test_a_claim_is_taken_over_only_once_its_lease_ran_out(
    notifications: NotificationStore,
) -> None:
    # Given attempt 1 claimed until AT + LEASE
    destination = _destination("nd-1")
    notifications.new_delivery("nv-1", destination, _event("ev-1"), AT)
    pending = notifications.get_delivery("nd-1", "ev-1")
    assert pending is not None
    lost = {"attempt": 1, "outcome": "lost", "response_code": None}
    # (a pending delivery has no lease to run out)
    with pytest.raises(ConcurrentChange):
        notifications.reclaim_attempt(pending, lost, AT, AT + LEASE, give_up=False)
    notifications.claim_attempt(pending, AT, AT + LEASE)
    claimed = notifications.get_delivery("nd-1", "ev-1")
    assert claimed is not None
    # When another worker takes it over while the lease holds, it is refused
    with pytest.raises(ConcurrentChange):
        notifications.reclaim_attempt(
            claimed, lost, AT + timedelta(seconds=30), AT + 2 * LEASE, give_up=False
        )
    assert notifications.get_delivery("nd-1", "ev-1") == claimed
    # When it does so after the lease, attempt 2 is claimed with attempt 1 lost
    later = AT + LEASE + timedelta(seconds=1)
    notifications.reclaim_attempt(claimed, lost, later, later + LEASE, give_up=False)
    taken = notifications.get_delivery("nd-1", "ev-1")
    assert taken is not None
    assert (taken.state, taken.attempts, taken.history, taken.lease_until) == (
        "delivering",
        2,
        [lost],
        later + LEASE,
    )
    # And a stale take-over is refused; one giving up after the next lease fails it
    with pytest.raises(ConcurrentChange):
        notifications.reclaim_attempt(claimed, lost, later + 2 * LEASE, later, give_up=True)
    end = later + 2 * LEASE
    notifications.reclaim_attempt(taken, lost, end, end + LEASE, give_up=True)
    failed = notifications.get_delivery("nd-1", "ev-1")
    assert failed is not None
    assert (failed.state, failed.attempts, failed.history, failed.lease_until) == (
        "failed",
        2,
        [lost, lost],
        None,
    )
