"""Rules of run events, run triggers and notification destinations."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from runplane.domain import notifications as rules
from runplane.domain import run_triggers as trigger_rules
from runplane.domain.entities import Workspace
from runplane.domain.errors import InvalidInput, RunTriggerRefused
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import (
    EventType,
    RunEvent,
    Subscribers,
    event_for_move,
    move_event,
)
from runplane.domain.run_triggers import MAX_SOURCES, check_new_source, find_cycle
from tests.builders import run_record

S = RunStatus


@pytest.mark.parametrize(
    ("source", "target", "event"),
    [
        (S.POLICY_PASSED, S.AWAITING_APPROVAL, EventType.NEEDS_ATTENTION),
        (S.APPLYING, S.SUCCEEDED, EventType.APPLIED),
        (S.POLICY_PASSED, S.SUCCEEDED, EventType.ENDED),
        (S.PLANNING, S.PLAN_FAILED, EventType.ERRORED),
        (S.APPLYING, S.APPLY_FAILED, EventType.ERRORED),
        (S.AWAITING_APPROVAL, S.EXPIRED, EventType.EXPIRED),
        (S.APPLYING, S.NEEDS_RECOVERY, EventType.NEEDS_RECOVERY),
        (S.APPLYING, S.APPLY_INTERRUPTED, EventType.NEEDS_RECOVERY),
        (S.QUEUED, S.CANCELED, EventType.ENDED),
        (S.QUEUED, S.PLANNING, None),
    ],
)
def test_each_move_publishes_its_event(
    source: RunStatus, target: RunStatus, event: EventType | None
) -> None:
    assert event_for_move(source, target) is event


def test_a_source_list_is_bounded_and_never_names_itself() -> None:
    full = [f"ws-{n}" for n in range(MAX_SOURCES)]
    with pytest.raises(RunTriggerRefused):
        check_new_source("ws-x", "ws-new", full)
    with pytest.raises(RunTriggerRefused):
        check_new_source("ws-x", "ws-x", [])
    check_new_source("ws-x", full[0], full)  # already a source: no growth


def test_cycles_are_found_through_the_sources_of_sources() -> None:
    # b's source is a, c's source is b: making c a source of a closes a -> b -> c -> a
    graph = {"a": [], "b": ["a"], "c": ["b"]}
    assert find_cycle("a", "c", lambda w: graph[w])[0] is True
    assert find_cycle("c", "a", lambda w: graph[w])[0] is False


@pytest.mark.parametrize(
    "url",
    ["http://example.com/x", "https://u:p@example.com/x", "https:///nohost", "https://e.com/#f"],
)
def test_destination_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidInput):
        rules.check_url(url, allow_http=False)


def test_listings_never_echo_the_path_or_query() -> None:
    shown = rules.display_url("https://hooks.slack.com/services/T0/B0/secretpart?x=1")
    assert shown == "https://hooks.slack.com/…"


def test_signatures_cover_the_exact_body_and_backoff_doubles_to_a_cap() -> None:
    sig = rules.signature(b"k", b"{}")
    assert rules.verify(b"k", b"{}", sig)
    assert not rules.verify(b"k", b"{} ", sig)
    assert [rules.retry_delay(n, 30) for n in range(1, 7)] == [30, 60, 120, 240, 480, 900]


def test_only_known_notifiable_events_are_accepted() -> None:
    with pytest.raises(InvalidInput):
        rules.check_events(["ended"])
    with pytest.raises(InvalidInput):
        rules.check_events([])
    assert rules.check_events(["applied", "drift_detected"]) == {
        EventType.APPLIED,
        EventType.DRIFT_DETECTED,
    }


def test_refused_trigger_launches_back_off_within_the_queues_delay_limit() -> None:
    # Given the bounded retries of a trigger refused by launch controls
    delays = [
        trigger_rules.launch_retry_delay(n, trigger_rules.LAUNCH_RETRY_BASE_SECONDS)
        for n in range(1, trigger_rules.MAX_LAUNCH_TRIES)
    ]
    # Then they double from a minute, and none exceeds what SQS can delay (15 minutes)
    assert delays == [60, 120, 240, 480]
    assert trigger_rules.launch_retry_delay(10, 60) == 900


def test_a_moves_event_says_whether_a_repositorys_source_created_the_run() -> None:
    # Given a run a push created and one a person created, both policy_passed
    at = datetime(2026, 1, 1, tzinfo=UTC)
    runs = [
        replace(
            run_record("run-1", "ws-1", "org-1", RunKind.PLAN_AND_APPLY, at, created_by=who),
            status=RunStatus.POLICY_PASSED,
        )
        for who in ("source:ing-1", "user:ada")
    ]
    # When each awaits approval
    events = [move_event(run, RunStatus.AWAITING_APPROVAL, 4, at) for run in runs]
    # Then each event says so, through its queue message too
    assert [e.created_by_source for e in events if e] == [True, False]
    assert [RunEvent.from_message(e.to_message()).created_by_source for e in events if e] == [
        True,
        False,
    ]
    # And a message queued before the field existed says it does not know
    assert events[0] is not None
    old = {k: v for k, v in events[0].to_message().items() if k != "created_by_source"}
    assert RunEvent.from_message(old).created_by_source is None


def test_a_moves_event_carries_its_workspaces_subscribers_when_it_counts_them() -> None:
    # Given a run moving to awaiting_approval, and its workspace as the move read it
    at = datetime(2026, 1, 1, tzinfo=UTC)
    run = replace(
        run_record("run-1", "ws-1", "org-1", RunKind.PLAN_AND_APPLY, at),
        status=RunStatus.POLICY_PASSED,
    )
    counted = Workspace(
        id="ws-1",
        organization_id="org-1",
        name="network",
        created_at=at,
        fence=0,
        writer_run_id=None,
        lock_id=None,
        lock_run_id=None,
        queue_length=0,
        destination_count=2,
        dependent_count=0,
    )

    def subscribers(workspace: Workspace | None) -> Subscribers | None:
        event = move_event(run, RunStatus.AWAITING_APPROVAL, 4, at, workspace=workspace)
        assert event is not None
        # (and the queue's message says the same)
        assert RunEvent.from_message(event.to_message()).subscribers == event.subscribers
        return event.subscribers

    # Then a counted workspace's event says what it has
    assert subscribers(counted) == Subscribers(notifications=True, dependents=False)
    # And an uncounted one's, another workspace's, or no workspace's says nothing
    assert subscribers(replace(counted, dependent_count=None)) is None
    assert subscribers(replace(counted, id="ws-2")) is None
    assert subscribers(None) is None
