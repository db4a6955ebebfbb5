"""Notification destinations and deliveries over the in-memory store: the checks made
before anything is sealed, the 20-destination limit, listing, deleting, who may, another
organization's workspace not found, the fan-out of an event, and attempts that send
nothing (a claim still held, a deleted destination).

No fake key service exists, so nothing here seals or unseals (the tier refuses any AWS
call): a created destination, the signed POST and its retries are covered on moto
(tests/integration/test_run_events.py). Destinations a test needs are put in the store
as it holds them, with their sealed fields opaque."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import boto3
import pytest

from runplane.adapters.keys import DataKeys
from runplane.domain import notifications as rules
from runplane.domain.entities import Workspace
from runplane.domain.errors import InvalidInput, NotFound
from runplane.domain.identity import Forbidden, Principal
from runplane.domain.ids import IdKind
from runplane.domain.notifications import Destination
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType, RunEvent, Subscribers
from runplane.services.notifications import Notifications
from tests.fakes import InMemoryNotifications
from tests.service.conftest import Tier
from tests.service.scenarios import reader_beside


@dataclass
class ListQueue:
    """The event queue, keeping what was sent (message, delay)."""

    sent: list[tuple[dict[str, Any], int]] = field(default_factory=list)

    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        self.sent.append((json.loads(json.dumps(dict(message))), delay_seconds))


@pytest.fixture
def store() -> InMemoryNotifications:
    return InMemoryNotifications()


@pytest.fixture
def queue() -> ListQueue:
    return ListQueue()


@pytest.fixture
def notifications(tier: Tier, store: InMemoryNotifications, queue: ListQueue) -> Notifications:
    return Notifications(
        tier.clock,
        tier.ids,
        tier.workspaces,
        # Never called here (the tier's guard fails a test that reaches KMS).
        DataKeys(boto3.client("kms", region_name="us-east-1"), "alias/notifications"),
        queue,
        allow_http=False,
        retry_base_seconds=60,
        control_plane_url="https://runplane.example",
        destinations=store,
        directory=tier.directory,
    )


def _workspace(tier: Tier, org_name: str = "acme") -> tuple[Principal, Workspace]:
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    return admin, tier.workspaces.create(admin, org_name, "network")


def _stored(
    tier: Tier,
    store: InMemoryNotifications,
    workspace: Workspace,
    events: tuple[str, ...] = ("applied",),
    organization_id: str | None = None,
) -> Destination:
    destination = Destination(
        id=tier.ids.new(IdKind.NOTIFICATION_DESTINATION),
        organization_id=organization_id or workspace.organization_id,
        workspace_id=workspace.id,
        name="hook",
        kind="webhook",
        events=events,
        display_url="https://hooks.example",
        wrapped_key=b"opaque wrapped key",
        sealed=b"opaque sealed url and secret",
        created_at=tier.clock.now(),
        created_by="user:ada",
    )
    store.put_destination(destination)
    return destination


def _event(tier: Tier, workspace: Workspace, kind: EventType = EventType.APPLIED) -> RunEvent:
    return RunEvent(
        id="run-1.0000000009",
        type=kind,
        run_id="run-1",
        organization_id=workspace.organization_id,
        workspace_id=workspace.id,
        run_kind=RunKind.PLAN_AND_APPLY,
        status=RunStatus.SUCCEEDED,
        at=tier.clock.now(),
    )


def test_a_bad_kind_url_or_event_is_invalid_input_and_writes_nothing(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications
) -> None:
    admin, ws = _workspace(tier)
    attempts: list[dict[str, Any]] = [
        {"kind": "email", "url": "https://hooks.example/a", "events": ["applied"]},
        {"kind": "webhook", "url": "http://hooks.example/a", "events": ["applied"]},
        {"kind": "webhook", "url": "https://ada:pw@hooks.example/a", "events": ["applied"]},
        {"kind": "webhook", "url": "https://hooks.example/a", "events": ["exploded"]},
    ]
    for given in attempts:
        with pytest.raises(InvalidInput):
            notifications.create(admin, ws.id, name="hook", **given)
    assert store.destinations_by_key == {}


def test_the_destination_after_the_limit_is_refused_before_anything_is_sealed(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications
) -> None:
    # Given a workspace with as many destinations as it may have
    admin, ws = _workspace(tier)
    for _ in range(rules.MAX_DESTINATIONS):
        _stored(tier, store, ws)
    before = copy.deepcopy(store.destinations_by_key)
    # When one more is created (sealing it would reach KMS, which the tier refuses)
    with pytest.raises(InvalidInput) as refused:
        notifications.create(
            admin,
            ws.id,
            name="one more",
            kind="webhook",
            url="https://h.example",
            events=["applied"],
        )
    # Then it is refused for the limit and nothing was written
    assert str(rules.MAX_DESTINATIONS) in refused.value.message
    assert store.destinations_by_key == before


def test_destinations_are_listed_in_creation_order_showing_the_host_only(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications
) -> None:
    admin, ws = _workspace(tier)
    first = _stored(tier, store, ws, ("errored", "applied"))
    second = _stored(tier, store, ws)
    listed = notifications.list_for(admin, ws.id)
    assert [d["id"] for d in listed] == [first.id, second.id]
    assert listed[0] == {
        "id": first.id,
        "workspace_id": ws.id,
        "name": "hook",
        "kind": "webhook",
        "events": ["applied", "errored"],
        "url": "https://hooks.example",
        "created_at": first.created_at.isoformat(),
        "created_by": "user:ada",
    }
    assert notifications.deliveries(admin, ws.id, first.id) == []


def test_a_deleted_destination_is_gone_and_an_unknown_one_is_not_found(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications
) -> None:
    admin, ws = _workspace(tier)
    kept, gone = _stored(tier, store, ws), _stored(tier, store, ws)
    notifications.delete(admin, ws.id, gone.id)
    assert [d["id"] for d in notifications.list_for(admin, ws.id)] == [kept.id]
    with pytest.raises(NotFound):
        notifications.delete(admin, ws.id, gone.id)
    with pytest.raises(NotFound):
        notifications.deliveries(admin, ws.id, gone.id)


def test_a_reader_may_list_but_not_create_or_delete(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications
) -> None:
    admin, ws = _workspace(tier)
    destination = _stored(tier, store, ws)
    reader = reader_beside(admin)
    before = copy.deepcopy(store.destinations_by_key)
    assert [d["id"] for d in notifications.list_for(reader, ws.id)] == [destination.id]
    with pytest.raises(Forbidden):
        notifications.create(
            reader, ws.id, name="x", kind="webhook", url="https://h.example", events=["applied"]
        )
    with pytest.raises(Forbidden):
        notifications.delete(reader, ws.id, destination.id)
    assert store.destinations_by_key == before


def test_another_organizations_workspace_is_not_found(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications
) -> None:
    # Given a destination of another organization's workspace
    admin, _ = _workspace(tier)
    _, theirs = _workspace(tier, "other")
    destination = _stored(tier, store, theirs)
    before = copy.deepcopy(store.destinations_by_key)
    # When acme's admin lists, creates, deletes or reads its deliveries
    # Then each is not found, and nothing changed
    for attempt in (
        lambda: notifications.list_for(admin, theirs.id),
        lambda: notifications.create(
            admin, theirs.id, name="x", kind="webhook", url="https://h.example", events=["applied"]
        ),
        lambda: notifications.delete(admin, theirs.id, destination.id),
        lambda: notifications.deliveries(admin, theirs.id, destination.id),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert store.destinations_by_key == before


def test_an_event_is_recorded_once_for_each_subscribed_destination_and_queued(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications, queue: ListQueue
) -> None:
    # Given destinations for applied, for errored, and one keyed under the workspace
    # but naming another organization
    admin, ws = _workspace(tier)
    applied = _stored(tier, store, ws, ("applied",))
    _stored(tier, store, ws, ("errored",))
    _stored(tier, store, ws, ("applied",), organization_id="org-other")
    # When an applied event is handled, and an ended one (never notified)
    event = _event(tier, ws)
    notifications.on_event(event)
    notifications.on_event(_event(tier, ws, EventType.ENDED))
    # Then one delivery is recorded, pending, and its first attempt queued
    [delivery] = store.deliveries_by_key.values()
    assert (delivery.destination_id, delivery.event_id, delivery.state, delivery.attempts) == (
        applied.id,
        event.id,
        "pending",
        0,
    )
    first = {
        "kind": "deliver",
        "organization_id": ws.organization_id,
        "destination_id": applied.id,
        "workspace_id": ws.id,
        "event_id": event.id,
        "attempt": 1,
    }
    assert queue.sent == [(first, 0)]
    # When the event is handled again before any attempt
    notifications.on_event(event)
    # Then no second delivery is recorded; the attempt is queued again (a duplicate
    # message loses the claim)
    assert list(store.deliveries_by_key.values()) == [delivery]
    assert queue.sent == [(first, 0), (first, 0)]
    view = notifications.deliveries(admin, ws.id, applied.id)
    assert [(d["id"], d["status"], d["attempts"]) for d in view] == [(delivery.id, "pending", [])]


def test_an_attempt_for_a_deleted_destination_fails_without_sending(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications, queue: ListQueue
) -> None:
    # Given a queued delivery whose destination was then deleted
    admin, ws = _workspace(tier)
    destination = _stored(tier, store, ws)
    notifications.on_event(_event(tier, ws))
    notifications.delete(admin, ws.id, destination.id)
    [(message, _)] = queue.sent
    # When its attempt is made
    notifications.attempt(message)
    # Then the delivery failed at once, without a retry queued
    [delivery] = store.deliveries_by_key.values()
    assert (delivery.state, delivery.attempts, delivery.lease_until) == ("failed", 1, None)
    assert [(a["attempt"], a["outcome"], a["error"]) for a in delivery.history] == [
        (1, "failed", "destination deleted")
    ]
    assert len(queue.sent) == 1
    # And the same message again changes nothing
    notifications.attempt(message)
    assert list(store.deliveries_by_key.values()) == [delivery]


def test_a_claimed_attempt_waits_for_its_lease_then_is_taken_over(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications, queue: ListQueue
) -> None:
    # Given a delivery whose attempt 1 another worker claimed, and its destination deleted
    admin, ws = _workspace(tier)
    destination = _stored(tier, store, ws)
    notifications.on_event(_event(tier, ws))
    [(message, _)] = queue.sent
    [pending] = store.deliveries_by_key.values()
    now = tier.clock.now()
    store.claim_attempt(pending, now, now + timedelta(seconds=rules.CLAIM_LEASE_SECONDS))
    notifications.delete(admin, ws.id, destination.id)
    claimed = copy.deepcopy(store.deliveries_by_key)
    # When the message is handled again while the claim holds
    notifications.attempt(message)
    # Then nothing changed and the message is queued again for when the lease ends
    assert store.deliveries_by_key == claimed
    again, delay = queue.sent[-1]
    assert again == message
    assert 0 < delay <= rules.CLAIM_LEASE_SECONDS + 1
    # When it is handled after the lease ran out
    tier.clock.advance(timedelta(seconds=rules.CLAIM_LEASE_SECONDS + 1))
    notifications.attempt(message)
    # Then attempt 1 is recorded lost and attempt 2 made (and failed: no destination)
    [delivery] = store.deliveries_by_key.values()
    assert (delivery.state, delivery.attempts) == ("failed", 2)
    assert [(a["attempt"], a["outcome"]) for a in delivery.history] == [
        (1, "lost"),
        (2, "failed"),
    ]


def test_an_event_whose_workspace_had_no_destination_looks_for_none(
    tier: Tier, notifications: Notifications, store: InMemoryNotifications, queue: ListQueue
) -> None:
    # Given a destination added after the run moved, its move's event saying the
    # workspace had no destination then
    _, ws = _workspace(tier)
    _stored(tier, store, ws, ("applied",))
    event = replace(
        _event(tier, ws), subscribers=Subscribers(notifications=False, dependents=False)
    )
    # When the event is handled
    notifications.on_event(event)
    # Then nothing is delivered for it: a destination hears of moves after its creation
    assert store.deliveries_by_key == {}
    assert queue.sent == []
    # And an event that says the workspace had one is delivered
    notifications.on_event(replace(event, subscribers=Subscribers(True, False)))
    assert len(store.deliveries_by_key) == 1
