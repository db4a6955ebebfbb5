"""The schedule store contract: the same cases against the DynamoDB store (on moto) and
the in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.errors import ConcurrentChange, NotFound, ScheduleAlreadyFired, ScheduleMoved
from runplane.domain.schedules import Fire, Schedule
from runplane.services.repositories import ScheduleStore
from runplane.store.schedule_store import DynamoScheduleStore
from tests.fakes import InMemorySchedules

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _schedule(schedule_id: str, workspace_id: str = "ws-1", at: datetime = AT) -> Schedule:
    return Schedule(
        id=schedule_id,
        organization_id="org-acme",
        workspace_id=workspace_id,
        expression="@hourly",
        aws_expression="rate(1 hour)",
        kind="plan_only",
        state="active",
        created_at=at,
        created_by="user:ada",
        updated_at=at,
        active_run_id=None,
        last_fire_at=None,
        last_outcome=None,
    )


@pytest.fixture(params=["dynamodb", "memory"])
def schedules(request: pytest.FixtureRequest) -> ScheduleStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoScheduleStore()
    return InMemorySchedules()


def test_schedules_read_back_in_creation_order_per_workspace(schedules: ScheduleStore) -> None:
    # Given two schedules of a workspace, created in turn, and one of another
    schedules.create(_schedule("sch-b", at=AT))
    schedules.create(_schedule("sch-a", at=AT + timedelta(seconds=1)))
    schedules.create(_schedule("sch-c", workspace_id="ws-2"))
    # Then each reads back whole, and the workspace lists its own in creation order
    assert schedules.get("sch-a") == _schedule("sch-a", at=AT + timedelta(seconds=1))
    assert [s.id for s in schedules.list_for_workspace("ws-1")] == ["sch-b", "sch-a"]
    assert schedules.list_for_workspace("ws-none") == []
    # And a second create of the same ID is refused
    with pytest.raises(ConcurrentChange):
        schedules.create(_schedule("sch-a"))


def test_state_and_delete_change_a_known_schedule_and_refuse_an_unknown_one(
    schedules: ScheduleStore,
) -> None:
    # Given a schedule, paused
    schedules.create(_schedule("sch-1"))
    later = AT + timedelta(minutes=1)
    schedules.set_state("sch-1", "paused", later)
    assert (schedules.get("sch-1").state, schedules.get("sch-1").updated_at) == ("paused", later)
    # When it is deleted
    schedules.delete("sch-1")
    # Then it is gone, and pausing, deleting or reading it is NotFound
    with pytest.raises(NotFound):
        schedules.get("sch-1")
    with pytest.raises(NotFound):
        schedules.set_state("sch-1", "active", later)
    with pytest.raises(NotFound):
        schedules.delete("sch-1")


def test_a_fire_is_recorded_once_and_not_over_a_moved_schedule(
    schedules: ScheduleStore,
) -> None:
    # Given a schedule and a fire recorded for 10:00
    schedules.create(_schedule("sch-1"))
    read = schedules.get("sch-1")
    ten = AT.replace(hour=10)
    schedules.record_fire(read, ten, outcome="skipped", now=ten, reason="no configuration")
    # When the same fire is delivered again
    with pytest.raises(ScheduleAlreadyFired):
        schedules.record_fire(read, ten, outcome="skipped", now=ten, reason="again")
    # Then there is one record, and the schedule shows it
    assert schedules.fires("sch-1") == [Fire("sch-1", ten, "skipped", None, "no configuration")]
    assert (schedules.get("sch-1").last_fire_at, schedules.get("sch-1").last_outcome) == (
        ten,
        "skipped",
    )
    # And a fire recorded with a state the schedule no longer has writes nothing
    eleven = AT.replace(hour=11)
    schedules.set_state("sch-1", "paused", eleven)
    with pytest.raises(ScheduleMoved):
        schedules.record_fire(replace(read, state="active"), eleven, outcome="skipped", now=eleven)
    assert [f.scheduled_at for f in schedules.fires("sch-1")] == [ten]


def test_fires_are_newest_first_and_limited(schedules: ScheduleStore) -> None:
    schedules.create(_schedule("sch-1"))
    for hour in (3, 1, 2):
        at = AT.replace(hour=hour)
        schedules.record_fire(schedules.get("sch-1"), at, outcome="skipped", now=at)
    assert [f.scheduled_at.hour for f in schedules.fires("sch-1", limit=2)] == [3, 2]


def test_a_workspace_without_configurations_has_no_latest(schedules: ScheduleStore) -> None:
    assert schedules.latest_configuration_id("ws-1") is None
