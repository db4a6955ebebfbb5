"""The run-event queue: SQS in AWS, an in-process queue in the embedded stack.

Both take the same messages (small JSON documents of public IDs) and hand them
to the same consumer (``services.run_events.EventWorker.handle``). The
in-process queue imitates what the consumer relies on in SQS: a delay per
message, redelivery when the consumer raises, and a dead-letter list after
``max_receives`` failed receives.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

logger = logging.getLogger("runplane.events")

# SQS delays a message at most 15 minutes; longer waits hop (see EventWorker).
MAX_DELAY_SECONDS = 900
# The longest MessageGroupId SQS accepts.
MAX_GROUP_ID = 128

Message = dict[str, Any]
T = TypeVar("T")

# In-flight deliveries at once: per organization, and per destination (the defaults
# of the settings notification_organization_slots and notification_destination_slots,
# which the SQS worker's DynamoDB slots also hold to across invocations).
PER_ORGANIZATION = 2
PER_DESTINATION = 1
# The embedded stack's worker threads: four organizations' slow endpoints at their
# share to take them all (deliveries), against one before the shares.
WORKERS = 8


@dataclass(frozen=True)
class Lane:
    """Whose a message is: its organization and, for a delivery, its destination."""

    organization: str
    destination: str | None = None


def lane_of(message: Mapping[str, Any]) -> Lane:
    """A ``deliver`` message's organization and destination; a run event's
    organization. A message naming no organization (queued before they did) is
    kept apart per workspace."""
    event = message.get("event")
    event = event if isinstance(event, Mapping) else {}
    organization = message.get("organization_id") or event.get("organization_id")
    if not organization:
        workspace = message.get("workspace_id") or event.get("workspace_id") or ""
        organization = f"workspace:{workspace}"
    destination = message.get("destination_id") if message.get("kind") == "deliver" else None
    return Lane(str(organization), str(destination) if destination else None)


class FairLanes(Generic[T]):
    """Per-organization queues served round-robin within per-organization and
    per-destination bounds on deliveries in flight. Not thread-safe: its owner
    holds a lock around every call."""

    def __init__(
        self, *, per_organization: int = PER_ORGANIZATION, per_destination: int = PER_DESTINATION
    ) -> None:
        self._per_organization = per_organization
        self._per_destination = per_destination
        self._queues: dict[str, deque[tuple[T, Lane]]] = {}
        # Organizations with waiting items, the next to serve first.
        self._order: deque[str] = deque()
        self._organizations: dict[str, int] = {}
        self._destinations: dict[str, int] = {}

    def put(self, item: T, lane: Lane) -> None:
        queue = self._queues.get(lane.organization)
        if queue is None:
            queue = self._queues[lane.organization] = deque()
            self._order.append(lane.organization)
        queue.append((item, lane))

    def take(self) -> tuple[T, Lane] | None:
        """The next item allowed to start (its lane counted in flight until
        ``release``), or None when every waiting item is over its share."""
        for organization in list(self._order):
            queue = self._queues[organization]
            for index, (item, lane) in enumerate(queue):
                if not self._allowed(lane):
                    continue
                del queue[index]
                self._order.remove(organization)
                if queue:
                    self._order.append(organization)  # served: to the back of the round
                else:
                    del self._queues[organization]
                if lane.destination is not None:
                    self._organizations[organization] = self._organizations.get(organization, 0) + 1
                    self._destinations[lane.destination] = (
                        self._destinations.get(lane.destination, 0) + 1
                    )
                return item, lane
        return None

    def _allowed(self, lane: Lane) -> bool:
        if lane.destination is None:
            return True
        return (
            self._organizations.get(lane.organization, 0) < self._per_organization
            and self._destinations.get(lane.destination, 0) < self._per_destination
        )

    def release(self, lane: Lane) -> None:
        """``lane``'s item is done: its share is free again."""
        if lane.destination is None:
            return
        for counts, key in (
            (self._organizations, lane.organization),
            (self._destinations, lane.destination),
        ):
            left = counts.get(key, 0) - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)

    def waiting(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def clear(self) -> None:
        self._queues.clear()
        self._order.clear()


def run_fairly(
    items: Sequence[T],
    lanes: Sequence[Lane],
    consumer: Callable[[T], None],
    *,
    workers: int,
    per_organization: int = PER_ORGANIZATION,
    per_destination: int = PER_DESTINATION,
) -> list[Exception | None]:
    """Run ``consumer`` on every item on up to ``workers`` threads, fairly across
    organizations (``FairLanes``); each item's exception, or None, in order."""
    lanes_ = FairLanes[int](per_organization=per_organization, per_destination=per_destination)
    for index, lane in enumerate(lanes):
        lanes_.put(index, lane)
    outcomes: list[Exception | None] = [None] * len(items)
    changed = threading.Condition()

    def serve() -> None:
        while True:
            with changed:
                while (taken := lanes_.take()) is None:
                    if not lanes_.waiting():
                        return
                    changed.wait()
            index, lane = taken
            try:
                consumer(items[index])
            except Exception as error:  # reported per item
                outcomes[index] = error
            finally:
                with changed:
                    lanes_.release(lane)
                    changed.notify_all()

    threads = [
        threading.Thread(target=serve, name="runplane-events", daemon=True)
        for _ in range(max(1, min(workers, len(items))))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


class EventQueue(Protocol):
    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None: ...


class SqsEventQueue:
    """The SQS queue. Every message names its organization as its ``MessageGroupId``:
    on a standard queue that makes it a fair queue (SQS serves the messages of other
    organizations first while one organization's take a disproportionate share of
    the consumers' time), with no ordering and no change for the consumer."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps(dict(message), sort_keys=True),
            DelaySeconds=max(0, min(MAX_DELAY_SECONDS, int(delay_seconds))),
            MessageGroupId=message_group(message),
        )


def message_group(message: Mapping[str, Any]) -> str:
    """The fair queue's tenant of ``message``: its organization (``lane_of``); SQS takes
    at most 128 characters."""
    return lane_of(message).organization[:MAX_GROUP_ID] or "unknown"


class InProcessQueue:
    """A delay queue served by a few daemon threads, started on the first send: a
    message waits in the delay heap until due, then in its organization's lane
    (``FairLanes``) until its share allows it."""

    def __init__(
        self,
        consumer: Callable[[Message], None],
        *,
        workers: int = WORKERS,
        max_receives: int = 5,
        redelivery_seconds: float = 1.0,
        per_organization: int = PER_ORGANIZATION,
        per_destination: int = PER_DESTINATION,
    ) -> None:
        self._consumer = consumer
        self._workers = workers
        self._max_receives = max_receives
        self._redelivery = redelivery_seconds
        self._heap: list[tuple[float, int, int, str]] = []
        self._lanes = FairLanes[tuple[int, str]](
            per_organization=per_organization, per_destination=per_destination
        )
        self._seq = itertools.count()
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stopped = False
        self._busy = 0
        self.dead_letters: list[Message] = []

    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        body = json.dumps(dict(message), sort_keys=True)
        due = time.monotonic() + max(0, min(MAX_DELAY_SECONDS, int(delay_seconds)))
        self._push(due, 1, body)

    def _push(self, due: float, receive: int, body: str) -> None:
        with self._ready:
            if self._stopped:
                return
            heapq.heappush(self._heap, (due, next(self._seq), receive, body))
            self._start_locked()
            self._ready.notify()

    def _start_locked(self) -> None:
        while len(self._threads) < self._workers:
            thread = threading.Thread(target=self._serve, name="runplane-events", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _take(self) -> tuple[int, str, Lane] | None:
        with self._ready:
            while not self._stopped:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, _, receive, body = heapq.heappop(self._heap)
                    self._lanes.put((receive, body), _lane_of_body(body))
                taken = self._lanes.take()
                if taken is not None:
                    (receive, body), lane = taken
                    self._busy += 1
                    return receive, body, lane
                # Nothing due, or all that is due is over its share: wait for the next
                # due message or a finished one (which frees a share).
                wait = self._heap[0][0] - now if self._heap else None
                self._ready.wait(timeout=wait)
            return None

    def _serve(self) -> None:
        while (taken := self._take()) is not None:
            receive, body, lane = taken
            try:
                self._consumer(json.loads(body))
            except Exception as error:  # the consumer's failure is the queue's redelivery
                if receive >= self._max_receives:
                    logger.error(
                        "event message dead-lettered", extra={"error": type(error).__name__}
                    )
                    self.dead_letters.append(json.loads(body))
                else:
                    self._push(time.monotonic() + self._redelivery * receive, receive + 1, body)
            finally:
                with self._ready:
                    self._lanes.release(lane)
                    self._busy -= 1
                    self._ready.notify_all()

    def idle(self) -> bool:
        """Nothing due or being handled (messages delayed into the future still count)."""
        with self._ready:
            return not self._heap and not self._lanes.waiting() and self._busy == 0

    def stop(self) -> None:
        with self._ready:
            self._stopped = True
            self._heap.clear()
            self._lanes.clear()
            self._ready.notify_all()


def _lane_of_body(body: str) -> Lane:
    try:
        message = json.loads(body)
    except ValueError:
        return Lane("")
    return lane_of(message) if isinstance(message, Mapping) else Lane("")
