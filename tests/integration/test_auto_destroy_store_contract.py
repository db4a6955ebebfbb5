"""The auto-destroy store's contract: the same cases against the DynamoDB store (on moto)
and the in-memory fake the service tier uses (tests/service/test_auto_destroy.py), so
the fake cannot drift from the table's versions, refusals and audit events; and the
record a destroy run's creation writes with the run, or neither."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.auto_destroy import AutoDestroy, AutoDestroySettings
from runplane.domain.entities import AuditEvent
from runplane.domain.errors import ConcurrentChange
from runplane.services.repositories.auto_destroy import AutoDestroyStore
from runplane.store import audit
from runplane.store.auto_destroy import DynamoAutoDestroyStore
from tests.fakes import InMemorySchedules
from tests.fakes_auto_destroy import InMemoryAutoDestroys

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG = "org-acme"


@pytest.fixture(params=["dynamodb", "memory"])
def store(request: pytest.FixtureRequest) -> AutoDestroyStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoAutoDestroyStore()
    return InMemoryAutoDestroys(InMemorySchedules())


def _record(workspace_id: str = "ws-1", version: int = 1) -> AutoDestroy:
    return AutoDestroy(
        workspace_id=workspace_id,
        organization_id=ORG,
        settings=AutoDestroySettings(
            destroy_at=AT + timedelta(days=2),
            destroy_after_inactivity=timedelta(hours=36),
            auto_apply=True,
        ),
        set_at=AT,
        set_by="user:ada",
        version=version,
        postponed_until=AT + timedelta(days=3),
        postponed_by="user:bob",
        notices=(f"{(AT + timedelta(days=3)).isoformat()}/24h",),
        active_run_id="run-9",
        last_run_id="run-8",
        last_outcome="failed",
        last_reason="destroy run run-8 ended plan_failed",
        attempts=2,
        next_attempt_at=AT + timedelta(hours=1),
        destroyed_at=None,
    )


def _event(tag: str, workspace_id: str = "ws-1") -> AuditEvent:
    return AuditEvent(
        id=f"evt-{tag}",
        organization_id=ORG,
        subject_id=workspace_id,
        type="workspace.auto_destroy_set",
        actor="user:ada",
        at=AT,
        details={"destroy_at": AT.isoformat()},
    )


def _trail(store: AutoDestroyStore) -> list[str]:
    if isinstance(store, InMemoryAutoDestroys):
        return [e.id for e in store.audit]
    return sorted(e.id for e in audit.organization_trail(ORG))


def test_a_record_reads_back_exactly_as_written_with_its_event(store: AutoDestroyStore) -> None:
    # When a record is written for the first time, with its audit event
    store.put(_record(), previous_version=0, event=_event("1"))

    # Then it reads back field for field, is armed, and its event is recorded
    assert store.get("ws-1") == _record()
    assert store.armed() == [_record()]
    assert _trail(store) == ["evt-1"]
    assert store.get("ws-other") is None


def test_a_stale_write_or_delete_is_refused_and_writes_nothing(store: AutoDestroyStore) -> None:
    # Given a record at version 1
    store.put(_record(), previous_version=0, event=_event("1"))
    later = replace(_record(version=2), attempts=3)

    # When writes are built on versions it is not at
    with pytest.raises(ConcurrentChange):
        store.put(later, previous_version=0, event=_event("2"))
    with pytest.raises(ConcurrentChange):
        store.put(later, previous_version=5)
    with pytest.raises(ConcurrentChange):
        store.delete("ws-1", previous_version=2, event=_event("3"))

    # Then neither the record nor the audit trail changed
    assert store.get("ws-1") == _record()
    assert _trail(store) == ["evt-1"]

    # When the right versions are named, then each write lands
    store.put(later, previous_version=1)
    assert store.get("ws-1") == later
    store.delete("ws-1", previous_version=2, event=_event("4"))
    assert store.get("ws-1") is None
    assert store.armed() == []
    assert _trail(store) == ["evt-1", "evt-4"]


def test_every_armed_workspace_is_listed(store: AutoDestroyStore) -> None:
    # Given three armed workspaces
    for workspace_id in ("ws-a", "ws-b", "ws-c"):
        store.put(_record(workspace_id), previous_version=0)

    # Then the sweep lists them all
    assert sorted(r.workspace_id for r in store.armed()) == ["ws-a", "ws-b", "ws-c"]
