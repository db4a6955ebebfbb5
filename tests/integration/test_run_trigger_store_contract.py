"""The run-trigger store contract: the same cases against the DynamoDB store (on moto)
and the in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runplane.domain.errors import ConcurrentChange
from runplane.domain.run import RunKind
from runplane.domain.run_triggers import Triggers
from runplane.services.repositories import RunTriggerStore
from runplane.store.run_trigger_store import DynamoRunTriggerStore
from tests.fakes import InMemoryRunTriggers

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG = "org-acme"


@pytest.fixture(params=["dynamodb", "memory"])
def triggers(request: pytest.FixtureRequest) -> RunTriggerStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoRunTriggerStore()
    return InMemoryRunTriggers()


def _add(store: RunTriggerStore, dependent: str, source: str, kind: RunKind | None = None) -> None:
    current = store.get(dependent)
    store.add_source(current, source, org_id=ORG, run_kind=kind or current.run_kind, now=AT)


def test_a_workspace_never_configured_has_no_sources(triggers: RunTriggerStore) -> None:
    assert triggers.get("ws-b") == Triggers("ws-b", (), RunKind.PLAN_AND_APPLY, 0)
    assert triggers.dependents("ws-a") == []


def test_sources_keep_their_order_and_each_source_lists_its_dependents(
    triggers: RunTriggerStore,
) -> None:
    # Given ws-c and then ws-a added as sources of ws-b, and ws-c as a source of ws-a
    _add(triggers, "ws-b", "ws-c")
    _add(triggers, "ws-b", "ws-a")
    _add(triggers, "ws-a", "ws-c")
    # Then ws-b reads its sources in the order added, at version 2
    assert triggers.get("ws-b") == Triggers("ws-b", ("ws-c", "ws-a"), RunKind.PLAN_AND_APPLY, 2)
    # And ws-c's dependents are in ID order
    assert triggers.dependents("ws-c") == ["ws-a", "ws-b"]
    assert triggers.dependents("ws-a") == ["ws-b"]
    # When ws-c is added again with another run kind, it stays where it is
    _add(triggers, "ws-b", "ws-c", RunKind.PLAN_ONLY)
    assert triggers.get("ws-b") == Triggers("ws-b", ("ws-c", "ws-a"), RunKind.PLAN_ONLY, 3)


def test_a_source_added_over_a_stale_list_writes_nothing(triggers: RunTriggerStore) -> None:
    # Given ws-b's list read, then changed by another writer
    stale = triggers.get("ws-b")
    _add(triggers, "ws-b", "ws-a")
    # When a source is added over the list as first read
    with pytest.raises(ConcurrentChange):
        triggers.add_source(stale, "ws-c", org_id=ORG, run_kind=RunKind.PLAN_AND_APPLY, now=AT)
    # Then nothing of it was written
    assert triggers.get("ws-b").sources == ("ws-a",)
    assert triggers.dependents("ws-c") == []


def test_a_source_added_after_an_upstream_list_changed_writes_nothing(
    triggers: RunTriggerStore,
) -> None:
    # Given ws-a's list read by a cycle check (never configured, then one source),
    # and ws-b's list at version 1
    _add(triggers, "ws-b", "ws-x")
    upstream_unset = triggers.get("ws-a")
    _add(triggers, "ws-a", "ws-y")
    upstream_set = triggers.get("ws-a")
    _add(triggers, "ws-a", "ws-z")
    current = triggers.get("ws-b")
    # When ws-a is added to ws-b on either stale read of ws-a
    for stale in (upstream_unset, upstream_set):
        with pytest.raises(ConcurrentChange):
            triggers.add_source(
                current,
                "ws-a",
                org_id=ORG,
                run_kind=RunKind.PLAN_AND_APPLY,
                now=AT,
                unchanged=[stale],
            )
    # Then nothing was written
    assert triggers.get("ws-b") == current
    assert triggers.dependents("ws-a") == []
    # And with ws-a's list as it is, the same add is written
    triggers.add_source(
        current,
        "ws-a",
        org_id=ORG,
        run_kind=RunKind.PLAN_AND_APPLY,
        now=AT,
        unchanged=[triggers.get("ws-a")],
    )
    assert triggers.get("ws-b").sources == ("ws-x", "ws-a")
    assert triggers.dependents("ws-a") == ["ws-b"]


def test_a_removed_source_loses_its_link_and_a_stale_removal_writes_nothing(
    triggers: RunTriggerStore,
) -> None:
    # Given ws-a and ws-c sources of ws-b
    _add(triggers, "ws-b", "ws-a")
    _add(triggers, "ws-b", "ws-c")
    stale = triggers.get("ws-b")
    # When ws-a is removed
    triggers.remove_source(stale, "ws-a", org_id=ORG, now=AT)
    # Then ws-b keeps ws-c only and ws-a has no dependents
    assert triggers.get("ws-b") == Triggers("ws-b", ("ws-c",), RunKind.PLAN_AND_APPLY, 3)
    assert triggers.dependents("ws-a") == []
    # And removing ws-c over the stale read is refused, writing nothing
    with pytest.raises(ConcurrentChange):
        triggers.remove_source(stale, "ws-c", org_id=ORG, now=AT)
    assert triggers.get("ws-b").sources == ("ws-c",)
    assert triggers.dependents("ws-c") == ["ws-b"]
