"""The auto-destroy's pure rules: the lengths and times people write, when it is due,
the one step a sweep takes, and how its notices read at a destination."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain import auto_destroy as rules
from runplane.domain.auto_destroy import AutoDestroy, AutoDestroySettings
from runplane.domain.errors import InvalidInput
from runplane.domain.notifications import DestinationKind, payload
from runplane.domain.run import RunStatus
from runplane.domain.run_events import EventType, RunEvent

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _record(**changes: object) -> AutoDestroy:
    base = AutoDestroy(
        workspace_id="ws-1",
        organization_id="org-1",
        settings=AutoDestroySettings(destroy_at=NOW + 48 * HOUR),
        set_at=NOW - HOUR,
        set_by="user:ada",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("90m", timedelta(minutes=90)),
        ("36h", 36 * HOUR),
        ("7d", timedelta(days=7)),
        (7200, 2 * HOUR),
    ],
)
def test_lengths_are_minutes_hours_days_or_seconds(text: object, length: timedelta) -> None:
    assert rules.parse_duration(text, "/by") == length


@pytest.mark.parametrize("text", ["", "7", "7w", "1.5h", "-3h", "3 h", "h", True])
def test_anything_else_is_refused_at_its_field(text: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        rules.parse_duration(text, "/by")
    assert refused.value.pointer == "/by"


def test_a_time_needs_its_zone_and_is_kept_in_utc_to_the_second() -> None:
    parsed = rules.parse_time("2026-12-24T19:00:00.5+01:00", "/destroy_at")
    assert parsed == datetime(2026, 12, 24, 18, tzinfo=UTC)
    for bad in ("2026-12-24T18:00:00", "tomorrow", ""):
        with pytest.raises(InvalidInput):
            rules.parse_time(bad, "/destroy_at")


def test_the_earlier_of_the_time_and_the_inactivity_is_due_never_before_a_postponement() -> None:
    both = AutoDestroySettings(destroy_at=NOW + 48 * HOUR, destroy_after_inactivity=24 * HOUR)
    record = _record(settings=both)
    # The inactivity counts from the setting when no state changed since
    assert record.due_at(None) == NOW - HOUR + 24 * HOUR
    assert record.due_at(NOW + 30 * HOUR) == NOW + 48 * HOUR
    assert _record(settings=both, postponed_until=NOW + 60 * HOUR).due_at(None) == NOW + 60 * HOUR


def test_each_moment_takes_exactly_one_step() -> None:
    record = _record()
    due = NOW + 48 * HOUR
    assert isinstance(
        rules.next_step(record, NOW, last_activity=None, active_status=None), rules.Wait
    )
    # 24 h before, then (once it is recorded) nothing until 1 h before
    step = rules.next_step(record, due - 23 * HOUR, last_activity=None, active_status=None)
    assert step == rules.Notify(due, 24 * HOUR)
    noticed = rules.noticed(record, step)
    assert isinstance(
        rules.next_step(noticed, due - 2 * HOUR, last_activity=None, active_status=None), rules.Wait
    )
    # A setting made within the last hour gets the 1 h notice only, counting both
    late = rules.next_step(
        record, due - 30 * timedelta(minutes=1), last_activity=None, active_status=None
    )
    assert late == rules.Notify(due, HOUR)
    assert len(rules.noticed(record, late).notices) == 2
    assert rules.next_step(record, due, last_activity=None, active_status=None) == rules.Launch(due)
    # A run in flight: approved only with the opt-in, taken in once it ends
    running = _record(active_run_id="run-1")
    assert isinstance(
        rules.next_step(
            running, due, last_activity=None, active_status=RunStatus.AWAITING_APPROVAL
        ),
        rules.Wait,
    )
    opted = _record(active_run_id="run-1", settings=AutoDestroySettings(NOW, None, True))
    assert rules.next_step(
        opted, due, last_activity=None, active_status=RunStatus.AWAITING_APPROVAL
    ) == rules.Approve("run-1")
    assert rules.next_step(
        running, due, last_activity=None, active_status=RunStatus.REJECTED, active_reason="no"
    ) == rules.Ended("run-1", RunStatus.REJECTED, "no")


def test_a_notice_of_no_run_reads_as_the_workspaces_at_a_webhook_and_in_slack() -> None:
    event = RunEvent(
        id="ws-1.auto-destroy.x.24h",
        type=EventType.AUTO_DESTROY_SCHEDULED,
        run_id=None,
        organization_id="org-1",
        workspace_id="ws-1",
        run_kind=None,
        status=None,
        at=NOW,
        details={"destroy_at": "2026-12-05T12:00:00+00:00", "notice": "24h"},
    )
    document = json.loads(
        payload(DestinationKind.WEBHOOK, event, "del-1", workspace_name="preview", run_url=None)
    )
    assert (document["event"], document["run"]) == ("auto_destroy_scheduled", None)
    assert document["details"]["destroy_at"] == "2026-12-05T12:00:00+00:00"
    slack = json.loads(
        payload(DestinationKind.SLACK, event, "del-1", workspace_name="preview", run_url=None)
    )
    assert slack["text"] == (
        "Runplane: workspace preview: destroys itself soon at 2026-12-05T12:00:00+00:00"
    )
    assert RunEvent.from_message(event.to_message()) == event
