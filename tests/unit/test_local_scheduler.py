"""The embedded stack's scheduler step: each due fire delivered once, with its time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from runplane.adapters.scheduler import target_input
from runplane.local.scheduler import LocalScheduler
from tests.fakes import FakeClock

START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


class FakeRegistry:
    """What Scheduler's GetSchedule answers for each registered schedule."""

    def __init__(self) -> None:
        self.held: list[dict[str, Any]] = []

    def add(self, name: str, expression: str, *, enabled: bool = True) -> None:
        self.held.append(
            {
                "Name": name,
                "ScheduleExpression": expression,
                "State": "ENABLED" if enabled else "DISABLED",
                "CreationDate": START,
                "Target": {"Input": target_input(name, "ws-1")},
            }
        )

    def registered(self) -> list[dict[str, Any]]:
        return self.held


def _scheduler() -> tuple[LocalScheduler, FakeRegistry, list[dict[str, Any]]]:
    registry, delivered = FakeRegistry(), []

    def deliver(payload: dict[str, Any]) -> dict[str, Any]:
        delivered.append(payload)
        return {"outcome": "created"}

    scheduler = LocalScheduler(
        registry,  # type: ignore[arg-type]
        deliver,
        FakeClock(START),
    )
    return scheduler, registry, delivered


def test_a_due_fire_is_delivered_once_with_its_scheduled_time() -> None:
    # Given a daily 03:00 schedule and a disabled one
    scheduler, registry, delivered = _scheduler()
    registry.add("sch-a", "cron(0 3 * * ? *)")
    registry.add("sch-b", "cron(0 3 * * ? *)", enabled=False)

    # When the scheduler steps past 03:00, and again to the same time
    scheduler.fire_due(START.replace(hour=3, minute=1))
    scheduler.fire_due(START.replace(hour=3, minute=1))

    # Then the enabled schedule's fire was delivered once, naming its scheduled time
    assert delivered == [
        {
            "schedule_id": "sch-a",
            "workspace_id": "ws-1",
            "scheduled_time": "2026-12-01T03:00:00+00:00",
        }
    ]


def test_a_scheduler_away_for_days_delivers_only_the_latest_missed_fire() -> None:
    # Given a daily schedule and a scheduler that did not step for three days
    scheduler, registry, delivered = _scheduler()
    registry.add("sch-a", "cron(0 3 * * ? *)")

    # When it steps
    scheduler.fire_due(START + timedelta(days=3))

    # Then one fire is delivered, for the latest missed time
    assert [p["scheduled_time"] for p in delivered] == ["2026-12-03T03:00:00+00:00"]
