"""In-flight delivery slots across worker invocations (store/delivery_slots.py,
docs/notifications.md "Fairness between organizations"): taken by conditional writes,
freed by their holder or, when it stopped, by their lease; a delivery refused a slot
is queued again unclaimed and delivered once later; and, with the worker Lambda's
entry point invoked on threads from an SQS queue, one organization's trickling
endpoints leave invocations for another's.

Timings are never asserted: latencies are compared with each other (ratios), and
the bounds are counted at the endpoints."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from runplane import wiring
from runplane.adapters.event_queue import SqsEventQueue
from runplane.domain import notifications as rules
from runplane.domain.entities import Organization
from runplane.local.moto_serial import serialize_requests
from runplane.services.notifications import Notifications
from runplane.store.delivery_slots import (
    DeliverySlotItem,
    DynamoDeliverySlots,
    destination_slot_key,
    organization_slot_key,
)
from runplane.store.notification_store import DynamoNotificationStore
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from runplane.wiring import Services
from tests.integration.conftest import Stack
from tests.integration.notification_load import (
    Endpoints,
    Invocations,
    admin_of,
    errored,
)
from tests.integration.test_run_events import ListQueue, Receiver

PATIENCE = 60.0  # seconds: only a broken bound waits this long
# A slow endpoint's pace: one byte per PACE seconds (a request takes len(HEAD) * PACE).
# Faster than a byte a second, so the suite stays quick; the shape is the same.
PACE = 0.12
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _slot_items() -> list[DeliverySlotItem]:
    return list(DeliverySlotItem.scan(DeliverySlotItem.pk.startswith("DELIVERYSLOTS#")))


# -- the slots themselves -------------------------------------------------------------


def test_racing_holders_get_at_most_the_bounds_by_conditional_writes(stack: Stack) -> None:
    # Given eight deliveries of one organization to four destinations, all at once
    slots = DynamoDeliverySlots(per_organization=2, per_destination=1)
    until = T0 + timedelta(seconds=rules.SLOT_LEASE_SECONDS)
    start = threading.Barrier(8)
    taken: list[tuple[str, object]] = []
    lock = threading.Lock()

    def take(n: int) -> None:
        destination = f"nd-{n % 4}"
        start.wait()
        lease = slots.acquire("org-b", destination, T0, until)
        with lock:
            taken.append((destination, lease))

    threads = [threading.Thread(target=take, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    # Then exactly two got slots, for two different destinations
    held = [(destination, lease) for destination, lease in taken if lease is not None]
    assert len(taken) == 8
    assert len(held) == 2
    assert len({destination for destination, _ in held}) == 2
    # And the table holds exactly their four slot items, nothing of the refused
    assert len(_slot_items()) == 4
    # And another organization is not held back by it
    assert slots.acquire("org-a", "nd-a", T0, until) is not None


def test_a_slot_left_by_a_stopped_holder_frees_itself_after_its_lease(stack: Stack) -> None:
    slots = DynamoDeliverySlots(per_organization=1, per_destination=1)
    lease_seconds = timedelta(seconds=rules.SLOT_LEASE_SECONDS)
    # Given a holder that took its slots and stopped (never released them)
    stopped = slots.acquire("org-b", "nd-1", T0, T0 + lease_seconds)
    assert stopped is not None
    # Then its organization's slot stays held while its lease runs
    later = T0 + lease_seconds - timedelta(seconds=1)
    assert slots.acquire("org-b", "nd-2", later, later + lease_seconds) is None
    # And is taken once the lease has run out
    after = T0 + lease_seconds + timedelta(seconds=1)
    taker = slots.acquire("org-b", "nd-1", after, after + lease_seconds)
    assert taker is not None
    # And the stopped holder, coming back, frees nothing of the new holder's
    slots.release(stopped)
    assert {(item.pk, item.sk, item.holder) for item in _slot_items()} == {
        (*organization_slot_key("org-b", 0), taker.holder),
        (*destination_slot_key("nd-1", 0), taker.holder),
    }
    # And the leftover items go with DynamoDB's TTL once long past their lease
    assert all(item.expires_at and item.expires_at > item.lease_until for item in _slot_items())
    # When the new holder releases, every slot is free again
    slots.release(taker)
    assert _slot_items() == []
    assert slots.acquire("org-b", "nd-2", after, after + lease_seconds) is not None


def test_a_busy_destination_does_not_take_an_organization_slot(stack: Stack) -> None:
    slots = DynamoDeliverySlots(per_organization=2, per_destination=1)
    until = T0 + timedelta(seconds=rules.SLOT_LEASE_SECONDS)
    first = slots.acquire("org-b", "nd-1", T0, until)
    assert first is not None
    # When a second delivery to the same destination asks
    assert slots.acquire("org-b", "nd-1", T0, until) is None
    # Then it took nothing: the organization's other slot serves another destination
    assert slots.acquire("org-b", "nd-2", T0, until) is not None


# -- the service: a delivery refused a slot ---------------------------------------------


@dataclass
class Deliveries:
    notifications: Notifications
    queue: ListQueue
    receiver: Receiver
    slots: DynamoDeliverySlots


@pytest.fixture
def deliveries(stack: Stack) -> Iterator[Deliveries]:
    queue = ListQueue()
    receiver = Receiver([])
    slots = DynamoDeliverySlots(per_organization=2, per_destination=1)
    notifications = Notifications(
        stack.clock,
        stack.ids,
        stack.workspaces,
        stack.keys,
        queue,
        allow_http=True,
        retry_base_seconds=5,
        control_plane_url="http://127.0.0.1:1",
        address_policy=rules.AddressPolicy(allow_loopback=True),
        slots=slots,
        jitter=lambda: 0.0,
        destinations=DynamoNotificationStore(),
        directory=DynamoWorkspaceDirectory(),
    )
    yield Deliveries(notifications, queue, receiver, slots)
    receiver.close()


def _one_delivery(stack: Stack, org: Organization, d: Deliveries) -> tuple[str, str]:
    """A destination of ``org`` for errored events, and its delivery's queued message."""
    workspace = stack.tenancy.create_workspace(org.id, "payments")
    made = d.notifications.create(
        admin_of(org.id),
        workspace.id,
        name="ops",
        kind="webhook",
        url=d.receiver.url,
        events=["errored"],
    )
    d.notifications.on_event(errored(org.id, workspace.id, "run-b1", stack.clock.now()))
    return workspace.id, made.view["id"]


def test_a_delivery_refused_a_slot_is_queued_again_unclaimed_and_delivered_once_later(
    stack: Stack, org: Organization, deliveries: Deliveries
) -> None:
    d = deliveries
    workspace_id, destination_id = _one_delivery(stack, org, d)
    [(message, _)] = d.queue.sent
    d.queue.sent.clear()
    # Given two of the organization's deliveries in flight elsewhere (another invocation)
    now = stack.clock.now()
    until = now + timedelta(seconds=rules.SLOT_LEASE_SECONDS)
    elsewhere = [d.slots.acquire(org.id, f"nd-other-{n}", now, until) for n in range(2)]
    assert all(elsewhere)
    # When the delivery's message is handled
    d.notifications.attempt(message)
    # Then nothing is sent, no attempt is used, and the message is queued again a
    # little later (not at once: no hot loop)
    assert d.receiver.received == []
    [delivery] = d.notifications.deliveries(admin_of(org.id), workspace_id, destination_id)
    assert (delivery["status"], delivery["attempts"]) == ("pending", [])
    [(again, delay)] = d.queue.sent
    d.queue.sent.clear()
    assert again == {**message, "deferred": 1}
    assert 1 <= delay <= rules.DEFERRAL_CAP_SECONDS
    # When it is refused again, it waits longer
    d.notifications.attempt(again)
    [(third, longer)] = d.queue.sent
    d.queue.sent.clear()
    assert third["deferred"] == 2
    assert longer > delay
    # When the deliveries elsewhere end and the re-queued message comes back
    for lease in elsewhere:
        assert lease is not None
        d.slots.release(lease)
    d.notifications.attempt(third)
    # Then it is delivered, with its first attempt, and gives its slots back
    [delivery] = d.notifications.deliveries(admin_of(org.id), workspace_id, destination_id)
    assert delivery["status"] == "delivered"
    assert [(a["attempt"], a["outcome"]) for a in delivery["attempts"]] == [(1, "delivered")]
    assert _slot_items() == []
    # And the earlier copies, coming back late, send nothing more: delivered exactly once
    d.notifications.attempt(message)
    d.notifications.attempt(again)
    assert len(d.receiver.received) == 1
    assert d.queue.sent == []


def test_a_slot_of_a_crashed_invocation_holds_deliveries_back_only_until_its_lease(
    stack: Stack, org: Organization, deliveries: Deliveries
) -> None:
    d = deliveries
    workspace_id, destination_id = _one_delivery(stack, org, d)
    [(message, _)] = d.queue.sent
    d.queue.sent.clear()
    # Given an invocation that took the destination's slot, then crashed
    now = stack.clock.now()
    crashed = d.slots.acquire(
        org.id, destination_id, now, now + timedelta(seconds=rules.SLOT_LEASE_SECONDS)
    )
    assert crashed is not None
    # When the delivery is handled while that lease runs: it is deferred
    d.notifications.attempt(message)
    [(again, _)] = d.queue.sent
    d.queue.sent.clear()
    assert d.receiver.received == []
    # When it comes back after the lease ran out
    stack.clock.advance(timedelta(seconds=rules.SLOT_LEASE_SECONDS + 1))
    d.notifications.attempt(again)
    # Then it is delivered, once, with its first attempt
    [delivery] = d.notifications.deliveries(admin_of(org.id), workspace_id, destination_id)
    assert delivery["status"] == "delivered"
    assert len(delivery["attempts"]) == 1
    assert len(d.receiver.received) == 1


# -- the worker Lambda, invoked concurrently from an SQS queue -------------------------


@dataclass
class Fleet:
    services: Services
    queue_url: str
    endpoints: Endpoints


@pytest.fixture
def fleet(stack: Stack) -> Iterator[Fleet]:
    serialize_requests("sqs")
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="run-events", Attributes={"VisibilityTimeout": "720"})[
        "QueueUrl"
    ]
    services = stack.rewired(
        event_queue_url=url,
        notification_allow_http=True,
        notification_allow_loopback=True,
    )
    wiring.install(services)
    endpoints = Endpoints(PACE)
    try:
        yield Fleet(services, url, endpoints)
    finally:
        wiring._installed.clear()
        endpoints.close()


def _destinations(
    fleet: Fleet, stack: Stack, org: Organization, paths: list[str]
) -> tuple[str, list[str]]:
    workspace = stack.tenancy.create_workspace(org.id, f"ws-{len(paths)}-{paths[0][1:5]}")
    made = [
        fleet.services.notifications.create(
            admin_of(org.id),
            workspace.id,
            name=path,
            kind="webhook",
            url=fleet.endpoints.url(path),
            events=["errored"],
        ).view["id"]
        for path in paths
    ]
    return workspace.id, made


def _all_delivered_once(fleet: Fleet, org: Organization, workspace_id: str, ids: list[str]) -> None:
    for destination_id in ids:
        [delivery] = fleet.services.notifications.deliveries(
            admin_of(org.id), workspace_id, destination_id
        )
        assert delivery["status"] == "delivered", delivery
        # Refusals used no attempt: the first attempt was the one delivered
        assert [(a["attempt"], a["outcome"]) for a in delivery["attempts"]] == [(1, "delivered")]


def test_one_organizations_trickling_destinations_leave_invocations_for_another(
    stack: Stack, org: Organization, fleet: Fleet
) -> None:
    a = org
    b = stack.tenancy.create_organization("bravo")
    slow = [f"/slow/{b.id}/{n}" for n in range(1, 5)]
    b_workspace, b_destinations = _destinations(fleet, stack, b, slow)
    a_workspace, a_destinations = _destinations(fleet, stack, a, [f"/{a.id}/ops"])
    # Given four invocations at most at once, one record each (so the shares within a
    # batch cannot help), and B's errored event fanned out to its four trickling
    # endpoints: without a bound across invocations they would take all four
    invocations = Invocations(fleet.queue_url, concurrency=4, batch=1)
    with invocations.running():
        fleet.services.notifications.on_event(
            errored(b.id, b_workspace, "run-b", stack.clock.now())
        )
        assert fleet.endpoints.wait_for(lambda e: e.in_flight(b.id) == 2, PATIENCE)
        # When A's errored event comes while B's deliveries trickle
        a_sent_at = time.monotonic()
        fleet.services.notifications.on_event(
            errored(a.id, a_workspace, "run-a", stack.clock.now())
        )
        assert fleet.endpoints.wait_for(lambda e: bool(e.to(f"/{a.id}/")), PATIENCE)
        # Then A's delivery arrived before any of B's first two was answered
        [a_request] = fleet.endpoints.to(f"/{a.id}/")
        assert a_request.answered_before[b.id] == 0
        # And B finishes every delivery, one request each
        assert fleet.endpoints.wait_for(
            lambda e: sum(1 for r in e.to("/slow/") if r.done) == len(slow), PATIENCE
        )
        assert fleet.endpoints.wait_for(lambda e: e.in_flight("*") == 0, PATIENCE)
    assert invocations.errors == []
    # A's latency beside how long one of B's deliveries is held: reported, not asserted
    # (wall-clock figures on a shared machine); the order above is what proves it.
    b_held = [r.done - r.arrived for r in fleet.endpoints.to("/slow/") if r.done]
    a_latency = a_request.arrived - a_sent_at
    print(f"A answered after {a_latency:.2f} s; B's deliveries held {min(b_held):.2f} s at least")
    # And B never had more than two deliveries in flight, nor a destination more than one
    assert fleet.endpoints.most_in_flight[b.id] == 2
    assert all(fleet.endpoints.most_in_flight[path] == 1 for path in slow)
    assert sorted(r.path for r in fleet.endpoints.to("/slow/")) == sorted(slow)
    # And each delivery was made once, with its first attempt (refusals cost none)
    _all_delivered_once(fleet, b, b_workspace, b_destinations)
    _all_delivered_once(fleet, a, a_workspace, a_destinations)
    # And B's refused deliveries came back (more records handled than deliveries), and
    # every message named its organization as its fair-queue group
    assert invocations.handled > len(slow) + 1
    assert set(invocations.groups) == {a.id, b.id}
    # And no slot is left held, no message left behind
    assert _slot_items() == []
    assert invocations.queue_is_empty()


def test_two_organizations_deliver_at_their_share_at_the_same_time(
    stack: Stack, org: Organization, fleet: Fleet
) -> None:
    a = org
    b = stack.tenancy.create_organization("bravo")
    a_paths = [f"/slow/{a.id}/{n}" for n in range(1, 4)]
    b_paths = [f"/slow/{b.id}/{n}" for n in range(1, 4)]
    a_workspace, a_destinations = _destinations(fleet, stack, a, a_paths)
    b_workspace, b_destinations = _destinations(fleet, stack, b, b_paths)
    # Given six invocations at most at once and both organizations' events at once
    invocations = Invocations(fleet.queue_url, concurrency=6, batch=1)
    with invocations.running():
        fleet.services.notifications.on_event(
            errored(a.id, a_workspace, "run-a", stack.clock.now())
        )
        fleet.services.notifications.on_event(
            errored(b.id, b_workspace, "run-b", stack.clock.now())
        )
        # Then both are at their share at the same time: four in flight
        assert fleet.endpoints.wait_for(lambda e: e.in_flight("*") == 4, PATIENCE)
        assert fleet.endpoints.in_flight(a.id) == fleet.endpoints.in_flight(b.id) == 2
        assert fleet.endpoints.wait_for(
            lambda e: sum(1 for r in e.to("/slow/") if r.done) == 6, PATIENCE
        )
    assert invocations.errors == []
    # And neither ever had more than two in flight, yet each delivered all three, once
    assert fleet.endpoints.most_in_flight[a.id] == fleet.endpoints.most_in_flight[b.id] == 2
    assert fleet.endpoints.most_in_flight["*"] == 4
    _all_delivered_once(fleet, a, a_workspace, a_destinations)
    _all_delivered_once(fleet, b, b_workspace, b_destinations)
    assert _slot_items() == []


def test_every_message_sent_names_its_organization_as_its_group(stack: Stack) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="grouped")["QueueUrl"]
    queue = SqsEventQueue(sqs, url)
    # A run event (relay, follow-ups), a delivery and a trigger retry
    queue.send({"kind": "run_event", "event": {"id": "run-1.1", "organization_id": "org-a"}})
    queue.send({"kind": "deliver", "organization_id": "org-b", "destination_id": "nd-1"}, 3)
    queue.send({"kind": "trigger", "event": {"id": "run-2.1", "organization_id": "org-c"}})
    groups = set()
    for _ in range(20):
        for message in sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
        ).get("Messages", []):
            groups.add(message["Attributes"]["MessageGroupId"])
        if len(groups) == 3:
            break
        threading.Event().wait(0.5)
    assert groups == {"org-a", "org-b", "org-c"}
