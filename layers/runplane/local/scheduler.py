"""The embedded stack's EventBridge Scheduler: a thread that fires due schedules.

It reads the schedules registered in (moto's) Scheduler exactly as a deployment
registers them, evaluates their expressions, and delivers each due fire's input,
with the scheduled time substituted, to the same fire-schedule handler the
Lambda runs. ``fire_due(now)`` is the one step, so tests drive it with any clock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from runplane.adapters.scheduler import SCHEDULED_TIME, EventBridgeSchedules
from runplane.domain.clock import Clock
from runplane.domain.schedules import latest_due, parse_aws

logger = logging.getLogger("runplane.local.scheduler")
Deliver = Callable[[dict[str, Any]], Any]


class LocalScheduler:
    def __init__(
        self,
        registry: EventBridgeSchedules,
        deliver: Deliver,
        clock: Clock,
        *,
        poll_seconds: float = 20.0,
    ) -> None:
        self._registry = registry
        self._deliver = deliver
        self._clock = clock
        self._poll = poll_seconds
        self._since = clock.now()
        self._cursors: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fire_due(self, now: datetime | None = None) -> list[Any]:
        """Deliver every fire due up to ``now`` that was not delivered yet; their results.

        Each schedule keeps its own cursor, starting at its creation (or at the
        scheduler's start): a step to any time fires each schedule at most once."""
        with self._lock:
            now = now or self._clock.now()
            results = []
            cursors: dict[str, datetime] = {}
            for held in self._registry.registered():
                name = str(held["Name"])
                created = _utc(held.get("CreationDate")) or self._since
                since = self._cursors.get(name, max(self._since, created))
                cursors[name] = max(since, now)
                if held.get("State") != "ENABLED":
                    continue
                spec = parse_aws(str(held["ScheduleExpression"]))
                due = latest_due(spec, since, now, anchor=created)
                if due is None:
                    continue
                text = str(held["Target"]["Input"]).replace(SCHEDULED_TIME, due.isoformat())
                try:
                    results.append(self._deliver(json.loads(text)))
                except Exception:
                    # As EventBridge would retry it: the next step does not, the next fire will.
                    logger.exception("schedule fire failed", extra={"schedule": name})
            # Deleted schedules drop out.
            self._cursors = cursors
            return results

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="runplane-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.fire_due()
            except Exception:
                logger.exception("the scheduler step failed")


def _utc(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return None
