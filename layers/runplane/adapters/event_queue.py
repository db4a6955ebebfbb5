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
from collections.abc import Callable, Mapping
from typing import Any, Protocol

logger = logging.getLogger("runplane.events")

# SQS delays a message at most 15 minutes; longer waits hop (see EventWorker).
MAX_DELAY_SECONDS = 900

Message = dict[str, Any]


class EventQueue(Protocol):
    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None: ...


class SqsEventQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps(dict(message), sort_keys=True),
            DelaySeconds=max(0, min(MAX_DELAY_SECONDS, int(delay_seconds))),
        )


class InProcessQueue:
    """A delay queue served by a few daemon threads, started on the first send."""

    def __init__(
        self,
        consumer: Callable[[Message], None],
        *,
        workers: int = 4,
        max_receives: int = 5,
        redelivery_seconds: float = 1.0,
    ) -> None:
        self._consumer = consumer
        self._workers = workers
        self._max_receives = max_receives
        self._redelivery = redelivery_seconds
        self._heap: list[tuple[float, int, int, str]] = []
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

    def _take(self) -> tuple[int, str] | None:
        with self._ready:
            while not self._stopped:
                now = time.monotonic()
                if self._heap and self._heap[0][0] <= now:
                    _, _, receive, body = heapq.heappop(self._heap)
                    self._busy += 1
                    return receive, body
                wait = self._heap[0][0] - now if self._heap else None
                self._ready.wait(timeout=wait)
            return None

    def _serve(self) -> None:
        while (taken := self._take()) is not None:
            receive, body = taken
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
                    self._busy -= 1
                    self._ready.notify_all()

    def idle(self) -> bool:
        """Nothing due or being handled (messages delayed into the future still count)."""
        with self._ready:
            return not self._heap and self._busy == 0

    def stop(self) -> None:
        with self._ready:
            self._stopped = True
            self._heap.clear()
            self._ready.notify_all()
