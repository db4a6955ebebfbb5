"""Schedules over the in-memory store: create, pause and delete rules, the per-workspace
limit, tenancy, and fires that create nothing (fires that create a run:
tests/service/test_run_creation.py)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from runplane.domain.entities import Workspace
from runplane.domain.errors import InvalidInput, NotFound, TooManySchedules
from runplane.domain.identity import Forbidden, Principal
from runplane.domain.schedules import MAX_SCHEDULES_PER_WORKSPACE
from tests.service.conftest import Tier
from tests.service.scenarios import reader_beside

TEN = datetime(2026, 1, 1, 10, tzinfo=UTC)


def _workspace(tier: Tier, org_name: str = "acme") -> tuple[Principal, Workspace]:
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    return admin, tier.workspaces.create(admin, org_name, "network")


def test_a_created_schedule_is_registered_listed_paused_and_deleted(tier: Tier) -> None:
    # Given a workspace
    admin, ws = _workspace(tier)
    # When a schedule is created
    created = tier.schedules.create(admin, ws.id, "rate(1 hour)", "plan_only")
    # Then it is stored active, registered enabled, and listed for the workspace
    assert created.state == "active"
    assert tier.registry.registered[created.id] == (ws.id, created.aws_expression, True)
    assert tier.schedules.of_workspace(admin, ws.id) == [created]
    # When it is paused, then resumed
    paused = tier.schedules.set_paused(admin, created.id, True)
    assert paused.state == "paused"
    assert tier.registry.registered[created.id][2] is False
    assert tier.schedules.set_paused(admin, created.id, False).state == "active"
    # When it is deleted, then it is unregistered and gone
    tier.schedules.delete(admin, created.id)
    assert tier.registry.registered == {}
    with pytest.raises(NotFound):
        tier.schedules.get(admin, created.id)


def test_a_bad_expression_or_kind_is_invalid_input_and_writes_nothing(tier: Tier) -> None:
    admin, ws = _workspace(tier)
    with pytest.raises(InvalidInput):
        tier.schedules.create(admin, ws.id, "every now and then", "plan_only")
    with pytest.raises(InvalidInput) as refused:
        tier.schedules.create(admin, ws.id, "rate(1 hour)", "apply")
    assert refused.value.pointer == "/kind"
    assert tier.schedule_store.schedules == {}
    assert tier.registry.registered == {}


def test_the_schedule_after_the_limit_is_refused_and_writes_nothing(tier: Tier) -> None:
    # Given a workspace with as many schedules as it may have
    admin, ws = _workspace(tier)
    for _ in range(MAX_SCHEDULES_PER_WORKSPACE):
        tier.schedules.create(admin, ws.id, "rate(1 day)", "plan_only")
    before = copy.deepcopy(tier.schedule_store.schedules)
    # When one more is created
    with pytest.raises(TooManySchedules):
        tier.schedules.create(admin, ws.id, "rate(1 day)", "plan_only")
    # Then nothing was stored or registered
    assert tier.schedule_store.schedules == before
    assert len(tier.registry.registered) == MAX_SCHEDULES_PER_WORKSPACE


def test_a_reader_may_list_but_not_create_pause_or_delete(tier: Tier) -> None:
    admin, ws = _workspace(tier)
    schedule = tier.schedules.create(admin, ws.id, "rate(1 hour)", "plan_only")
    reader = reader_beside(admin)
    before = copy.deepcopy(tier.schedule_store.schedules)
    assert tier.schedules.of_workspace(reader, ws.id) == [schedule]
    with pytest.raises(Forbidden):
        tier.schedules.create(reader, ws.id, "rate(1 hour)", "plan_only")
    with pytest.raises(Forbidden):
        tier.schedules.set_paused(reader, schedule.id, True)
    with pytest.raises(Forbidden):
        tier.schedules.delete(reader, schedule.id)
    assert tier.schedule_store.schedules == before


def test_another_organizations_schedule_is_not_found(tier: Tier) -> None:
    # Given a schedule in another organization's workspace
    admin, _ = _workspace(tier)
    theirs_admin, theirs = _workspace(tier, "other")
    schedule = tier.schedules.create(theirs_admin, theirs.id, "rate(1 hour)", "plan_only")
    before = copy.deepcopy(tier.schedule_store.schedules)
    # When acme's admin reads, pauses or deletes it, or lists that workspace's
    # Then each is NotFound, and nothing changed
    for attempt in (
        lambda: tier.schedules.get(admin, schedule.id),
        lambda: tier.schedules.set_paused(admin, schedule.id, True),
        lambda: tier.schedules.delete(admin, schedule.id),
        lambda: tier.schedules.of_workspace(admin, theirs.id),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert tier.schedule_store.schedules == before
    assert tier.registry.registered[schedule.id][2] is True


def test_a_duplicate_fire_creates_nothing(tier: Tier) -> None:
    # Given a schedule of a workspace with no configuration, fired once for 10:00
    admin, ws = _workspace(tier)
    schedule = tier.schedules.create(admin, ws.id, "rate(1 hour)", "plan_only")
    first = tier.schedules.fire(schedule.id, TEN)
    assert first["outcome"] == "skipped"
    records = copy.deepcopy(tier.schedule_store.fire_records)
    # When the same fire is delivered again
    again = tier.schedules.fire(schedule.id, TEN)
    # Then it is a duplicate and no record was added
    assert again == {"outcome": "duplicate"}
    assert tier.schedule_store.fire_records == records
    assert [f.outcome for f in tier.schedules.fires(admin, schedule.id)] == ["skipped"]


def test_a_paused_or_deleted_schedule_fires_nothing(tier: Tier) -> None:
    admin, ws = _workspace(tier)
    paused = tier.schedules.create(admin, ws.id, "rate(1 hour)", "plan_only")
    tier.schedules.set_paused(admin, paused.id, True)
    gone = tier.schedules.create(admin, ws.id, "rate(1 day)", "plan_only")
    tier.schedules.delete(admin, gone.id)
    assert tier.schedules.fire(paused.id, TEN) == {"outcome": "paused"}
    assert tier.schedules.fire(gone.id, TEN) == {"outcome": "gone"}
    assert tier.schedule_store.fire_records == {}
