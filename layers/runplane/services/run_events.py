"""The run-event seam: announce in the move's transaction, relay, handle asynchronously.

``RunEvents`` is the one place events are made. ``status_moved`` (called by
``RunLifecycle.move``) and ``announce`` (the drift finding, services/drift.py)
build the *outbox* write of an event, which commits in the same transaction as the
change it announces (``OutboxWrites``); nothing is sent on the move's path. The
table's stream carries each outbox item to the relay (services/event_relay.py),
which puts its message on the event queue: a committed change is announced even if
the process that committed it dies right after. ``publish`` sends straight to the
queue, for the delayed follow-ups the worker itself queues (it is driven by an
at-least-once queue, so a follow-up it fails to send is retried with its message).

``EventWorker.handle`` consumes one message: run events go to every handler
(run triggers, notifications, and any added with ``subscribe``, such as commit
statuses); delivery messages go to the notifications service. Handlers are
idempotent per event ID, because the queue delivers at least once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from runplane.adapters.event_queue import MAX_DELAY_SECONDS, EventQueue
from runplane.domain.clock import Clock
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import NotFound
from runplane.domain.run import RunStatus
from runplane.domain.run_events import EventType, RunEvent, move_event

if TYPE_CHECKING:
    from runplane.services.repositories.operations import OutboxWrites

logger = logging.getLogger("runplane.events")

RUN_EVENT = "run_event"
DELIVER = "deliver"
Handler = Callable[[RunEvent], None]


def run_event_message(event: RunEvent) -> dict[str, Any]:
    """The queue message of ``event`` (public IDs and statuses only)."""
    return {"kind": RUN_EVENT, "event": event.to_message()}


class RunEvents:
    """Makes run events. ``queue`` is a factory, so a process that never sends a
    follow-up never builds a queue client. The ``outbox``'s writes are the store's own
    kind, committed with the change each announces."""

    def __init__(
        self, clock: Clock, queue: Callable[[], EventQueue], outbox: OutboxWrites[Any]
    ) -> None:
        self._clock = clock
        self._queue = queue
        self._outbox = outbox

    def status_moved(
        self,
        run: Run,
        target: RunStatus,
        version: int,
        at: datetime,
        *,
        reason: str | None = None,
        approval_expires_at: datetime | None = None,
        workspace: Workspace | None = None,
    ) -> list[Any]:
        """The outbox write of the event of ``run``'s move (its snapshot before it) to
        ``target``, producing ``version`` at ``at``; none for a move inside the active path.
        ``workspace``: the run's workspace as the move read it, if it did."""
        event = move_event(
            run,
            target,
            version,
            at,
            reason=reason,
            approval_expires_at=approval_expires_at,
            workspace=workspace,
        )
        return [] if event is None else [self.announce(event)]

    def announce(self, event: RunEvent) -> Any:
        """The outbox write of ``event``: commit it with the change it announces (a
        workspace's own event, of no run, beside its workspace's ID)."""
        return self._outbox.put(
            event.run_id or event.workspace_id, event.id, run_event_message(event), event.at
        )

    def publish(self, event: RunEvent, *, not_before: datetime | None = None) -> None:
        """Queue ``event`` now (delayed until ``not_before``): for follow-ups a queue
        consumer makes, which raise to be retried with the message that made them."""
        message = run_event_message(event)
        delay = 0
        if not_before is not None:
            message["not_before"] = not_before.isoformat()
            delay = max(0, int((not_before - self._clock.now()).total_seconds()))
        self._queue().send(message, delay)


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
        if event.type is EventType.APPROVAL_EXPIRING and not self._still_waiting(event.of_run):
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
