"""The run-event seam: publish after a status move commits, handle asynchronously.

``RunEvents.publish`` is the one entry point (``RunLifecycle.move`` calls
``status_moved``; schedules call ``publish`` with ``drift_detected``). It puts a
message of public IDs on the event queue and never raises: an event that cannot
be queued is logged, and the run it describes is unaffected.

``EventWorker.handle`` consumes one message: run events go to every handler
(run triggers, notifications, and any added with ``subscribe``, such as commit
statuses); delivery messages go to the notifications service. Handlers are
idempotent per event ID, because the queue delivers at least once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from runplane.adapters.event_queue import MAX_DELAY_SECONDS, EventQueue
from runplane.domain.clock import Clock
from runplane.domain.entities import Run
from runplane.domain.errors import NotFound
from runplane.domain.run import RunStatus
from runplane.domain.run_events import EventType, RunEvent, event_for_move, move_event_id

logger = logging.getLogger("runplane.events")

RUN_EVENT = "run_event"
DELIVER = "deliver"
Handler = Callable[[RunEvent], None]


class RunEvents:
    """Publishes run events. ``queue`` is a factory, so a process that never publishes
    never builds a queue client."""

    def __init__(self, clock: Clock, queue: Callable[[], EventQueue]) -> None:
        self._clock = clock
        self._queue = queue

    def status_moved(
        self,
        run: Run,
        target: RunStatus,
        version: int,
        at: datetime,
        *,
        reason: str | None = None,
        approval_expires_at: datetime | None = None,
    ) -> None:
        """Publish the event of a committed move of ``run`` (its snapshot before it)."""
        kind = event_for_move(run.status, target)
        if kind is None:
            return
        details = {"from_status": run.status.value}
        if approval_expires_at is not None:
            details["approval_expires_at"] = approval_expires_at.isoformat()
        self.publish(
            RunEvent(
                id=move_event_id(run.id, version),
                type=kind,
                run_id=run.id,
                organization_id=run.organization_id,
                workspace_id=run.workspace_id,
                run_kind=run.kind,
                status=target,
                at=at,
                reason=reason,
                details=details,
            )
        )

    def publish(self, event: RunEvent, *, not_before: datetime | None = None) -> None:
        """Queue ``event``; never raises (the move it describes has committed)."""
        message: dict[str, Any] = {"kind": RUN_EVENT, "event": event.to_message()}
        delay = 0
        if not_before is not None:
            message["not_before"] = not_before.isoformat()
            delay = max(0, int((not_before - self._clock.now()).total_seconds()))
        try:
            self._queue().send(message, delay)
        except Exception as error:  # a lost event must not fail the run
            logger.error(
                "run event not queued",
                extra={
                    "run_id": event.run_id,
                    "event": event.type.value,
                    "error": type(error).__name__,
                },
            )


class EventWorker:
    def __init__(
        self,
        clock: Clock,
        queue: EventQueue,
        events: RunEvents,
        *,
        deliver: Callable[[Mapping[str, Any]], None],
        approval_lead: timedelta,
        run_status: Callable[[str], RunStatus],
    ) -> None:
        self._clock = clock
        self._queue = queue
        self._events = events
        self._lead = approval_lead
        self._run_status = run_status
        self._handlers: list[Handler] = []
        self._routes: dict[str, Callable[[Mapping[str, Any]], None]] = {DELIVER: deliver}

    def route(self, kind: str, consumer: Callable[[Mapping[str, Any]], None]) -> None:
        """Hand messages of ``kind`` (a follow-up a handler queued) to ``consumer``."""
        self._routes[kind] = consumer

    def subscribe(self, handler: Handler) -> None:
        """Add a handler of every run event (it must be idempotent per ``event.id``)."""
        self._handlers.append(handler)

    def handle(self, message: Mapping[str, Any]) -> None:
        not_before = message.get("not_before")
        if not_before:
            remaining = (
                datetime.fromisoformat(str(not_before)) - self._clock.now()
            ).total_seconds()
            if remaining > 0:
                # Not due: hop again (a queue delays a message by at most 15 minutes).
                self._queue.send(message, min(MAX_DELAY_SECONDS, int(remaining) + 1))
                return
        consumer = self._routes.get(str(message.get("kind")))
        if consumer is not None:
            consumer(message)
            return
        if message.get("kind") != RUN_EVENT:
            logger.warning("unknown event message dropped", extra={"kind": message.get("kind")})
            return
        event = RunEvent.from_message(message["event"])
        if event.type is EventType.APPROVAL_EXPIRING and not self._still_waiting(event.run_id):
            return
        failures: list[Exception] = []
        for handler in [self._schedule_expiring, *self._handlers]:
            try:
                handler(event)
            except Exception as error:
                logger.error(
                    "run event handler failed",
                    extra={
                        "run_id": event.run_id,
                        "event": event.type.value,
                        "error": type(error).__name__,
                    },
                )
                failures.append(error)
        if failures:
            # Redelivered whole: every handler dedupes on the event ID.
            raise failures[0]

    def _still_waiting(self, run_id: str) -> bool:
        try:
            return self._run_status(run_id) is RunStatus.AWAITING_APPROVAL
        except NotFound:
            return False

    def _schedule_expiring(self, event: RunEvent) -> None:
        """A run awaiting approval gets an *approval_expiring* event ``approval_lead``
        before its deadline (at once if the window is shorter than the lead)."""
        deadline = event.details.get("approval_expires_at")
        if event.type is not EventType.NEEDS_ATTENTION or not deadline or not self._lead:
            return
        expires_at = datetime.fromisoformat(deadline)
        due = max(self._clock.now(), expires_at - self._lead)
        expiring = RunEvent(
            id=f"{event.id}.expiring",
            type=EventType.APPROVAL_EXPIRING,
            run_id=event.run_id,
            organization_id=event.organization_id,
            workspace_id=event.workspace_id,
            run_kind=event.run_kind,
            status=event.status,
            at=due,
            details={"approval_expires_at": deadline},
        )
        self._events.publish(expiring, not_before=due)
