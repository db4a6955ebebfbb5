"""Fairness of the run-event workers: one organization's slow endpoints never hold
another organization's deliveries (adapters/event_queue.py, docs/notifications.md).

The consumer is a fake whose slow deliveries block on an event until the test
releases them: no sleeps, no timing beyond generous waits for threads to react."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from runplane.adapters.event_queue import FairLanes, InProcessQueue, Lane, lane_of, run_fairly

PATIENCE = 10.0  # seconds: only a broken scheduler waits this long


def _deliver(organization: str, destination: str, event: str = "ev-1") -> dict[str, Any]:
    return {
        "kind": "deliver",
        "organization_id": organization,
        "destination_id": destination,
        "workspace_id": f"ws-{organization}",
        "event_id": event,
        "attempt": 1,
    }


def _run_event(organization: str, event: str) -> dict[str, Any]:
    return {"kind": "run_event", "event": {"id": event, "organization_id": organization}}


class SlowEndpoints:
    """A consumer: organization B's deliveries hang until ``release``; the rest return."""

    def __init__(self, slow_organization: str = "org-b") -> None:
        self._slow = slow_organization
        self.release = threading.Event()
        self._lock = threading.Condition()
        self.started: list[str] = []
        self.finished: list[str] = []
        self.in_flight: dict[str, int] = {}
        self.most_in_flight: dict[str, int] = {}

    @staticmethod
    def _name(message: Mapping[str, Any]) -> str:
        if message.get("kind") == "deliver":
            return f"{message['organization_id']}/{message['destination_id']}/{message['event_id']}"
        return str(message["event"]["id"])

    def __call__(self, message: Mapping[str, Any]) -> None:
        name, key = self._name(message), str(lane_of(message))
        with self._lock:
            self.started.append(name)
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
            self.most_in_flight[key] = max(self.most_in_flight.get(key, 0), self.in_flight[key])
            self._lock.notify_all()
        try:
            if message.get("kind") == "deliver" and message["organization_id"] == self._slow:
                assert self.release.wait(PATIENCE), "never released"
        finally:
            with self._lock:
                self.in_flight[key] -= 1
                self.finished.append(name)
                self._lock.notify_all()

    def wait_for(self, predicate: Callable[[SlowEndpoints], bool]) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout=PATIENCE)


def _settles(queue: InProcessQueue) -> bool:
    """The queue goes idle (its last worker returns just after the consumer)."""
    pause = threading.Event()
    for _ in range(int(PATIENCE * 100)):
        if queue.idle():
            return True
        pause.wait(0.01)
    return False


def _b_started(endpoints: SlowEndpoints) -> list[str]:
    return [n for n in endpoints.started if n.startswith("org-b/")]


def test_a_slow_organization_does_not_delay_another_organizations_delivery() -> None:
    # Given four worker threads (as many as organization B has slow destinations)
    endpoints = SlowEndpoints()
    queue = InProcessQueue(endpoints, workers=4)
    try:
        # When B's four deliveries, to four trickling destinations, are queued first
        for n in range(1, 5):
            queue.send(_deliver("org-b", f"dest-b{n}"))
        assert endpoints.wait_for(lambda e: len(_b_started(e)) == 2)
        # And then A's delivery
        queue.send(_deliver("org-a", "dest-a1"))
        # Then A's delivery completes while every one of B's is still hanging
        assert endpoints.wait_for(lambda e: "org-a/dest-a1/ev-1" in e.finished)
        assert not [n for n in endpoints.finished if n.startswith("org-b/")]
        # And B never has more than its share (two) in flight; the rest wait, not dropped
        assert len(_b_started(endpoints)) == 2
        # When B's endpoints answer at last
        endpoints.release.set()
        # Then all four of B's deliveries were made, none lost, each once
        assert endpoints.wait_for(lambda e: len(_b_started(e)) == 4 and len(e.finished) == 5)
        assert sorted(_b_started(endpoints)) == [f"org-b/dest-b{n}/ev-1" for n in range(1, 5)]
        assert endpoints.most_in_flight[str(Lane("org-b", "dest-b1"))] == 1
        assert _settles(queue)
    finally:
        endpoints.release.set()
        queue.stop()


def test_one_destination_has_one_delivery_in_flight_and_others_of_its_organization_proceed() -> (
    None
):
    endpoints = SlowEndpoints()
    queue = InProcessQueue(endpoints, workers=4)
    try:
        # Given two of B's events for one destination, then one for another destination
        queue.send(_deliver("org-b", "dest-b1", "ev-1"))
        assert endpoints.wait_for(lambda e: len(_b_started(e)) == 1)
        queue.send(_deliver("org-b", "dest-b1", "ev-2"))
        queue.send(_deliver("org-b", "dest-b2", "ev-3"))
        # Then the other destination's delivery starts, the second to dest-b1 waits
        assert endpoints.wait_for(lambda e: "org-b/dest-b2/ev-3" in e.started)
        assert "org-b/dest-b1/ev-2" not in endpoints.started
        # And B's run events (no outside request) are not held back by B's share
        queue.send(_run_event("org-b", "run-1.3"))
        assert endpoints.wait_for(lambda e: "run-1.3" in e.finished)
        # When the endpoints answer, the waiting delivery is made after its predecessor
        endpoints.release.set()
        assert endpoints.wait_for(lambda e: "org-b/dest-b1/ev-2" in e.finished)
        assert endpoints.started.index("org-b/dest-b1/ev-2") > endpoints.finished.index(
            "org-b/dest-b1/ev-1"
        )
    finally:
        endpoints.release.set()
        queue.stop()


def test_a_failed_delivery_frees_its_share_and_is_redelivered() -> None:
    calls: list[str] = []
    done = threading.Event()

    def flaky(message: Mapping[str, Any]) -> None:
        calls.append(str(message["event_id"]))
        if len(calls) == 1:
            raise RuntimeError("first receive fails")
        done.set()

    queue = InProcessQueue(flaky, workers=1, redelivery_seconds=0.01, per_organization=1)
    try:
        queue.send(_deliver("org-a", "dest-a1"))
        assert done.wait(PATIENCE)
        assert calls == ["ev-1", "ev-1"]
        assert queue.dead_letters == []
    finally:
        queue.stop()


def test_a_lambda_batch_runs_its_records_fairly() -> None:
    # Given a batch of B's four slow deliveries and then A's one
    endpoints = SlowEndpoints()
    batch = [_deliver("org-b", f"dest-b{n}") for n in range(1, 5)] + [_deliver("org-a", "dest-a1")]
    outcomes: list[Exception | None] = []
    runner = threading.Thread(
        target=lambda: outcomes.extend(
            run_fairly(batch, [lane_of(m) for m in batch], endpoints, workers=4)
        )
    )
    runner.start()
    try:
        # Then A's record is done while B's are still hanging, B at its share
        assert endpoints.wait_for(lambda e: "org-a/dest-a1/ev-1" in e.finished)
        assert not [n for n in endpoints.finished if n.startswith("org-b/")]
        assert endpoints.wait_for(lambda e: len(_b_started(e)) == 2)
    finally:
        endpoints.release.set()
        runner.join(PATIENCE)
    # And every record ran, once
    assert not runner.is_alive()
    assert outcomes == [None] * 5
    assert len(endpoints.finished) == 5


def test_a_batch_reports_each_records_failure_in_place() -> None:
    def consumer(message: Mapping[str, Any]) -> None:
        if message["destination_id"] == "bad":
            raise ValueError("no")

    batch = [_deliver("org-a", "ok"), _deliver("org-a", "bad"), _deliver("org-b", "ok2")]
    outcomes = run_fairly(batch, [lane_of(m) for m in batch], consumer, workers=4)
    assert [type(o).__name__ if o else None for o in outcomes] == [None, "ValueError", None]
    assert run_fairly([], [], consumer, workers=4) == []


def test_organizations_are_served_round_robin() -> None:
    lanes = FairLanes[str]()
    for n in range(1, 4):
        lanes.put(f"b{n}", Lane("org-b"))
    lanes.put("a1", Lane("org-a"))
    lanes.put("c1", Lane("org-c"))
    order = []
    while (taken := lanes.take()) is not None:
        order.append(taken[0])
    assert order == ["b1", "a1", "c1", "b2", "b3"]
    assert lanes.waiting() == 0


def test_a_share_is_held_until_released() -> None:
    lanes = FairLanes[str](per_organization=2, per_destination=1)
    for name, destination in (("1", "d1"), ("2", "d1"), ("3", "d2"), ("4", "d3")):
        lanes.put(name, Lane("org-b", destination))
    first, third = lanes.take(), lanes.take()
    assert (first and first[0], third and third[0]) == ("1", "3")
    assert lanes.take() is None  # B's share (two) is taken
    assert first is not None
    lanes.release(first[1])
    second = lanes.take()
    assert second is not None
    assert second[0] == "2"  # d1 free again; before d3 (order kept)
    assert lanes.waiting() == 1


def test_lanes_of_messages() -> None:
    assert lane_of(_deliver("org-a", "dest-1")) == Lane("org-a", "dest-1")
    assert lane_of(_run_event("org-a", "run-1.2")) == Lane("org-a")
    # A delivery queued before messages named their organization: kept apart per workspace
    legacy = {"kind": "deliver", "destination_id": "dest-1", "workspace_id": "ws-1"}
    assert lane_of(legacy) == Lane("workspace:ws-1", "dest-1")
