"""Run-trigger configuration over the in-memory stores: add, show and remove sources,
the 20-source limit, self and cycles refused, a race that would close a cycle, who may,
and another organization's workspace not found. A source run queuing its dependents
(a claim per dependent, written with the triggered run): tests/service/test_run_creation.py."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import boto3
import pytest

from runplane.adapters.workflow import Workflow
from runplane.domain.entities import Workspace
from runplane.domain.errors import ConcurrentChange, NotFound, RunTriggerRefused
from runplane.domain.identity import Forbidden, Principal
from runplane.domain.run import RunKind
from runplane.domain.run_triggers import MAX_SOURCES
from runplane.services.run_triggers import RunTriggers
from tests.fakes import InMemoryRunTriggers
from tests.service.conftest import Tier
from tests.service.scenarios import reader_beside


class _Unsent:
    """The event queue: configuring triggers never sends."""

    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        raise AssertionError("a trigger configuration sent an event")


@pytest.fixture
def store() -> InMemoryRunTriggers:
    return InMemoryRunTriggers()


@pytest.fixture
def triggers(tier: Tier, store: InMemoryRunTriggers) -> RunTriggers:
    region = "us-east-1"
    return RunTriggers(
        tier.clock,
        tier.ids,
        tier.workspaces,
        tier.runs,
        tier.run_reader,
        # Never called here (the tier's guard fails a test that reaches AWS).
        Workflow(
            boto3.client("stepfunctions", region_name=region),
            f"arn:aws:states:{region}:000000000000:stateMachine:runs",
        ),
        _Unsent(),
        triggers=store,
        directory=tier.directory,
        claims=tier.claims,
    )


def _org(tier: Tier, org_name: str, *names: str) -> tuple[Principal, list[Workspace]]:
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    return admin, [tier.workspaces.create(admin, org_name, name) for name in names]


def _snapshot(store: InMemoryRunTriggers) -> tuple[object, object]:
    return copy.deepcopy(store.triggers), copy.deepcopy(store.links)


def test_sources_are_added_shown_on_both_sides_and_removed(
    tier: Tier, triggers: RunTriggers
) -> None:
    # Given three workspaces
    admin, (network, database, app) = _org(tier, "acme", "network", "database", "app")
    # When network and database become sources of app, queuing plan-only runs
    triggers.add(admin, app.id, network.id, RunKind.PLAN_ONLY)
    shown = triggers.add(admin, app.id, database.id)
    # Then app shows both sources by name, in the order added, with the kind kept
    assert shown == {
        "workspace_id": app.id,
        "run_kind": "plan_only",
        "sources": [
            {"id": network.id, "name": "network"},
            {"id": database.id, "name": "database"},
        ],
        "dependents": [],
    }
    # And network shows app as its dependent
    assert triggers.show(admin, network.id)["dependents"] == [{"id": app.id, "name": "app"}]
    # When network is removed
    after = triggers.remove(admin, app.id, network.id)
    # Then app keeps database only and network has no dependents
    assert after["sources"] == [{"id": database.id, "name": "database"}]
    assert triggers.show(admin, network.id)["dependents"] == []


def test_a_workspace_cannot_trigger_itself_and_the_refusal_writes_nothing(
    tier: Tier, triggers: RunTriggers, store: InMemoryRunTriggers
) -> None:
    admin, (app,) = _org(tier, "acme", "app")
    with pytest.raises(RunTriggerRefused) as refused:
        triggers.add(admin, app.id, app.id)
    assert refused.value.pointer == "/source_workspace_id"
    assert _snapshot(store) == ({}, set())


def test_the_source_after_the_limit_is_refused_and_writes_nothing(
    tier: Tier, triggers: RunTriggers, store: InMemoryRunTriggers
) -> None:
    # Given a workspace with as many sources as it may have
    admin, (app, *sources) = _org(
        tier, "acme", "app", *(f"source-{n}" for n in range(MAX_SOURCES + 1))
    )
    for source in sources[:MAX_SOURCES]:
        triggers.add(admin, app.id, source.id)
    before = _snapshot(store)
    # When one more is added
    with pytest.raises(RunTriggerRefused):
        triggers.add(admin, app.id, sources[MAX_SOURCES].id)
    # Then nothing was written; adding one it has already is no new source and is kept
    assert _snapshot(store) == before
    assert len(triggers.add(admin, app.id, sources[0].id)["sources"]) == MAX_SOURCES


def test_a_source_that_would_close_a_cycle_is_refused_and_writes_nothing(
    tier: Tier, triggers: RunTriggers, store: InMemoryRunTriggers
) -> None:
    # Given network -> database -> app (each a source of the next)
    admin, (network, database, app) = _org(tier, "acme", "network", "database", "app")
    triggers.add(admin, database.id, network.id)
    triggers.add(admin, app.id, database.id)
    before = _snapshot(store)
    # When app is made a source of network
    with pytest.raises(RunTriggerRefused) as refused:
        triggers.add(admin, network.id, app.id)
    # Then it is refused as a cycle and nothing was written
    assert "cycle" in refused.value.message
    assert _snapshot(store) == before


def test_a_cycle_closed_by_another_writer_meanwhile_is_refused_and_writes_nothing(
    tier: Tier, triggers: RunTriggers, store: InMemoryRunTriggers
) -> None:
    # Given network -> database, and app about to be made a dependent of database
    admin, (network, database, app) = _org(tier, "acme", "network", "database", "app")
    triggers.add(admin, database.id, network.id)
    # When, after the cycle check read network's (empty) sources, another writer makes
    # app a source of network
    tier.clock.on_next_reading(lambda: triggers.add(admin, network.id, app.id))
    with pytest.raises(ConcurrentChange):
        triggers.add(admin, app.id, database.id)
    # Then app -> network -> database stands and database -> app was not written
    assert store.get(app.id).sources == ()
    assert store.dependents(database.id) == []
    assert store.get(network.id).sources == (app.id,)


def test_a_reader_may_show_but_not_add_or_remove(
    tier: Tier, triggers: RunTriggers, store: InMemoryRunTriggers
) -> None:
    admin, (network, app) = _org(tier, "acme", "network", "app")
    triggers.add(admin, app.id, network.id)
    reader = reader_beside(admin)
    before = _snapshot(store)
    assert [s["id"] for s in triggers.show(reader, app.id)["sources"]] == [network.id]
    with pytest.raises(Forbidden):
        triggers.add(reader, network.id, app.id)
    with pytest.raises(Forbidden):
        triggers.remove(reader, app.id, network.id)
    assert _snapshot(store) == before


def test_another_organizations_workspace_is_not_found_either_side(
    tier: Tier, triggers: RunTriggers, store: InMemoryRunTriggers
) -> None:
    # Given acme's workspace and another organization's
    admin, (app,) = _org(tier, "acme", "app")
    _, (theirs,) = _org(tier, "other", "theirs")
    # When acme's admin names theirs as a source, as a dependent, or shows it
    with pytest.raises(NotFound) as as_source:
        triggers.add(admin, app.id, theirs.id)
    with pytest.raises(NotFound):
        triggers.add(admin, theirs.id, app.id)
    with pytest.raises(NotFound):
        triggers.show(admin, theirs.id)
    # Then each is not found (the source named by its field) and nothing was written
    assert as_source.value.pointer == "/source_workspace_id"
    assert _snapshot(store) == ({}, set())


def test_removing_a_workspace_that_is_not_a_source_is_not_found(
    tier: Tier, triggers: RunTriggers, store: InMemoryRunTriggers
) -> None:
    admin, (network, app) = _org(tier, "acme", "network", "app")
    with pytest.raises(NotFound):
        triggers.remove(admin, app.id, network.id)
    assert _snapshot(store) == ({}, set())
