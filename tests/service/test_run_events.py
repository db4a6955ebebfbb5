"""Run events over the in-memory outbox: which moves announce an event, each event
written once with the change it announces, relayed once and in commit order, a relay
stopped by the queue resumed from the record it names, and delayed follow-ups (the
table's real stream: tests/integration/test_outbox_relay.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import ConcurrentChange
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType, RunEvent
from runplane.services.event_relay import EventRelay
from runplane.services.run_events import RunEvents, run_event_message
from tests.fakes import FakeClock
from tests.fakes_operations import InMemoryEventOutbox

AT = datetime(2026, 1, 1, tzinfo=UTC)


class ListQueue:
    """The event queue adapter as a list; ``down`` makes the next sends fail."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], int]] = []
        self.down_after: int | None = None

    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        if self.down_after is not None and len(self.sent) >= self.down_after:
            raise ConnectionError("queue unreachable")
        self.sent.append((dict(message), delay_seconds))

    def event_ids(self) -> list[str]:
        return [message["event"]["id"] for message, _ in self.sent]


class Given:
    def __init__(self) -> None:
        self.clock, self.queue, self.outbox = FakeClock(AT), ListQueue(), InMemoryEventOutbox()
        self.events = RunEvents(self.clock, lambda: self.queue, self.outbox)
        self.relay = EventRelay(lambda: self.queue, self.outbox)


def _run(status: RunStatus, run_id: str = "run-1") -> Run:
    return Run(
        id=run_id,
        organization_id="org-acme",
        workspace_id="ws-1",
        kind=RunKind.PLAN_AND_APPLY,
        status=status,
        version=4,
        created_at=AT,
        updated_at=AT,
    )


def _event(event_id: str, run_id: str = "run-1") -> RunEvent:
    return RunEvent(
        id=event_id,
        type=EventType.ENDED,
        run_id=run_id,
        organization_id="org-acme",
        workspace_id="ws-1",
        run_kind=RunKind.PLAN_AND_APPLY,
        status=RunStatus.CANCELED,
        at=AT,
    )


def test_only_a_move_out_of_the_active_path_announces_an_event() -> None:
    given = Given()
    # When a move inside the active path is announced, Then it has no outbox write
    assert given.events.status_moved(_run(RunStatus.PLANNING), RunStatus.PLAN_COMPLETE, 5, AT) == []
    # When a run moves to await approval, Then its event's write is made, named by version
    expires = AT + timedelta(hours=4)
    [write] = given.events.status_moved(
        _run(RunStatus.POLICY_PASSED),
        RunStatus.AWAITING_APPROVAL,
        5,
        AT,
        approval_expires_at=expires,
    )
    write.commit()
    [(_, event_id)] = given.outbox.events
    assert event_id == "run-1.0000000005"
    message = given.outbox.events[("run-1", event_id)]
    assert message["event"]["type"] == EventType.NEEDS_ATTENTION.value
    assert message["event"]["details"]["approval_expires_at"] == expires.isoformat()


def test_nothing_is_written_or_sent_until_the_change_commits() -> None:
    given = Given()
    # When an event's write is made but not committed (its change was refused)
    given.events.announce(_event("run-1.0000000005"))
    # Then nothing is in the outbox, and relaying sends nothing
    assert given.outbox.events == {}
    assert given.relay.relay(given.outbox.stream) is None
    assert given.queue.sent == []


def test_committed_events_are_relayed_once_in_commit_order() -> None:
    given = Given()
    # Given three events committed, one of them announced twice
    for event_id, run_id in [("run-2.0000000003", "run-2"), ("run-1.0000000007", "run-1")]:
        given.events.announce(_event(event_id, run_id)).commit()
    with pytest.raises(ConcurrentChange):
        given.events.announce(_event("run-2.0000000003", "run-2")).commit()
    given.events.announce(_event("run-1.drift")).commit()
    # When the stream's records are relayed
    failed = given.relay.relay(given.outbox.stream)
    # Then each event was queued once, in commit order, with its message
    assert failed is None
    assert given.queue.event_ids() == ["run-2.0000000003", "run-1.0000000007", "run-1.drift"]
    assert given.queue.sent[0] == (run_event_message(_event("run-2.0000000003", "run-2")), 0)


def test_records_of_other_changes_are_not_relayed() -> None:
    given = Given()
    # Given an event committed between two other changes
    given.outbox.other_change()
    given.events.announce(_event("run-1.0000000005")).commit()
    given.outbox.other_change()
    # When they are relayed, Then only the event was queued
    assert given.relay.relay(given.outbox.stream) is None
    assert given.queue.event_ids() == ["run-1.0000000005"]


def test_a_relay_stopped_by_the_queue_resumes_from_the_record_it_names() -> None:
    given = Given()
    # Given three events, and a queue that fails after the first
    for n in range(3):
        given.events.announce(_event(f"run-1.000000000{n}")).commit()
    given.queue.down_after = 1
    # When they are relayed, Then the second is named (it and the rest are not queued)
    failed = given.relay.relay(given.outbox.stream)
    assert failed == given.outbox.position(given.outbox.stream[1])
    assert given.queue.event_ids() == ["run-1.0000000000"]
    # When the queue is back and the relay resumes from that record
    given.queue.down_after = None
    positions = [given.outbox.position(r) for r in given.outbox.stream]
    assert given.relay.relay(given.outbox.stream[positions.index(failed) :]) is None
    # Then each event was queued once, in order
    assert given.queue.event_ids() == [f"run-1.000000000{n}" for n in range(3)]


def test_a_follow_up_is_queued_delayed_until_it_is_due() -> None:
    given = Given()
    # When a follow-up due in ten minutes is published
    due = AT + timedelta(minutes=10)
    given.events.publish(_event("run-1.0000000005.expiring"), not_before=due)
    # Then it is queued now, delayed until then, and says when it is due
    [(message, delay)] = given.queue.sent
    assert message["not_before"] == due.isoformat()
    assert 599 <= delay <= 600
    # And nothing went through the outbox
    assert given.outbox.stream == []
