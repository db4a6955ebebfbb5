"""A run's creation with its caller's records, over the in-memory stores: a schedule's
fire creating a run exactly once, a duplicate delivery or a fire while the previous run
is active creating none, a source run queuing one run per dependent however often and
however concurrently its event is handled, a refused creation writing none of the
caller's records, and two organizations kept apart. What the DynamoDB store writes is
held to the fakes by tests/integration/test_run_creations_contract.py."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from runplane.domain.creation import ScheduleFire
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import NotFound, RunAlreadyExists
from runplane.domain.identity import Principal
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType, RunEvent
from runplane.domain.run_triggers import Triggered
from runplane.services.run_triggers import RunTriggers
from tests.fakes import InMemoryRunTriggers
from tests.fakes_creation import InMemoryTriggerClaims
from tests.service.conftest import Tier

FIRE_AT = datetime(2026, 12, 1, 3, tzinfo=UTC)


class _Unsent:
    """The event queue: no launch is refused here, so nothing is retried."""

    def send(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        raise AssertionError(f"a trigger queued a retry: {message}")


@pytest.fixture
def lists() -> InMemoryRunTriggers:
    """The workspaces' trigger sources, shared by every handling a test builds."""
    return InMemoryRunTriggers()


def _triggers(
    tier: Tier, lists: InMemoryRunTriggers, claims: InMemoryTriggerClaims | None = None
) -> RunTriggers:
    return RunTriggers(
        tier.clock,
        tier.ids,
        tier.workspaces,
        tier.runs,
        tier.run_reader,
        tier.workflow,
        _Unsent(),
        triggers=lists,
        directory=tier.directory,
        claims=claims or tier.claims,
    )


def _org(tier: Tier, org_name: str, *names: str) -> tuple[Principal, list[Workspace]]:
    org = tier.tenancy.create_organization(org_name)
    admin = tier.admin(org)
    return admin, [tier.workspaces.create(admin, org_name, name) for name in names]


def _uploaded(tier: Tier, workspace: Workspace) -> str:
    """An uploaded configuration of ``workspace``, the latest a schedule plans."""
    cv_id = f"cv-{workspace.id}"
    tier.configurations.add_uploaded(
        cv_id, workspace.organization_id, workspace.id, tier.clock.now()
    )
    tier.schedule_store.add_configuration(workspace.id, cv_id)
    return cv_id


def _runs_of(tier: Tier, workspace_id: str) -> list[Run]:
    return tier.run_reader.runs_of_workspace(workspace_id)


def _run_in(tier: Tier, admin: Principal, workspace: Workspace) -> Run:
    """A run of ``workspace`` by ``admin``, so a trigger knows its configuration."""
    return tier.runs.create(
        admin,
        workspace.id,
        kind=RunKind.PLAN_AND_APPLY,
        configuration_version_id=_uploaded(tier, workspace),
        engine_version=None,
        variables={},
    )


def _applied(source: Run) -> RunEvent:
    return RunEvent(
        id=f"{source.id}.0000000009",
        type=EventType.APPLIED,
        run_id=source.id,
        organization_id=source.organization_id,
        workspace_id=source.workspace_id,
        run_kind=RunKind.PLAN_AND_APPLY,
        status=RunStatus.SUCCEEDED,
        at=source.created_at,
    )


def _writes(tier: Tier) -> tuple[object, ...]:
    """Every record a creation or a fire may write, to prove none was."""
    ledger, schedules = tier.run_reader, tier.schedule_store
    return copy.deepcopy(
        (
            ledger.runs,
            ledger.audit,
            schedules.schedules,
            schedules.fire_records,
            tier.claims.claims,
            tier.claims.audit,
        )
    )


# -- schedules ---------------------------------------------------------------------------


def test_a_fire_creates_its_run_exactly_once(tier: Tier) -> None:
    # Given a schedule of a workspace with an uploaded configuration
    admin, [ws] = _org(tier, "acme", "network")
    cv_id = _uploaded(tier, ws)
    schedule = tier.schedules.create(admin, ws.id, "0 3 * * *", "plan_only")
    # When its 03:00 fire is delivered
    fired = tier.schedules.fire(schedule.id, FIRE_AT)
    # Then one plan-only run is created by the schedule from that configuration, and
    # started; the fire is recorded with it and the run is the schedule's active one
    assert fired["outcome"] == "created"
    [run] = _runs_of(tier, ws.id)
    assert (run.id, run.kind, run.created_by) == (
        fired["run_id"],
        RunKind.PLAN_ONLY,
        f"schedule:{schedule.id}",
    )
    snapshot = tier.run_reader.parts(run.id)["input"].body
    assert snapshot["configuration_version_id"] == cv_id
    assert snapshot["schedule"] == {
        "schedule_id": schedule.id,
        "scheduled_at": FIRE_AT.isoformat(),
    }
    assert tier.workflow.started == [run.id]
    assert [(f.outcome, f.run_id) for f in tier.schedules.fires(admin, schedule.id)] == [
        ("created", run.id)
    ]
    assert tier.schedules.get(admin, schedule.id).active_run_id == run.id
    # And the run's review says a schedule created it
    assert tier.runs.review(admin, run.id)["schedule"] == snapshot["schedule"]


def test_a_duplicate_delivery_of_a_fire_that_created_a_run_creates_none(tier: Tier) -> None:
    # Given a schedule whose 03:00 fire created a run
    admin, [ws] = _org(tier, "acme", "network")
    _uploaded(tier, ws)
    schedule = tier.schedules.create(admin, ws.id, "0 3 * * *", "plan_only")
    first = tier.schedules.fire(schedule.id, FIRE_AT)
    before = _writes(tier)
    # When the same fire is delivered again
    again = tier.schedules.fire(schedule.id, FIRE_AT)
    # Then it is a duplicate: no run, record or audit event was added, nothing started
    assert again == {"outcome": "duplicate"}
    assert _writes(tier) == before
    assert [r.id for r in _runs_of(tier, ws.id)] == [first["run_id"]]
    assert tier.workflow.started == [first["run_id"]]


def test_a_fire_while_the_previous_run_is_active_is_skipped_until_it_ends(tier: Tier) -> None:
    # Given a schedule whose 03:00 run has not ended
    admin, [ws] = _org(tier, "acme", "network")
    _uploaded(tier, ws)
    schedule = tier.schedules.create(admin, ws.id, "0 * * * *", "plan_only")
    first = tier.schedules.fire(schedule.id, FIRE_AT)
    # When the 04:00 fire arrives
    four = FIRE_AT.replace(hour=4)
    second = tier.schedules.fire(schedule.id, four)
    # Then it is skipped naming the active run, recorded, and no second run exists
    assert second["outcome"] == "skipped"
    assert first["run_id"] in second["reason"]
    assert len(_runs_of(tier, ws.id)) == 1
    # When the first run ends and the 05:00 fire arrives
    run = tier.run_reader.get_run(first["run_id"])
    tier.run_reader.move(run, RunStatus.CANCELED, actor="test")
    third = tier.schedules.fire(schedule.id, FIRE_AT.replace(hour=5))
    # Then a new run is created and the fires read newest first
    assert third["outcome"] == "created"
    assert len(_runs_of(tier, ws.id)) == 2
    fires = tier.schedules.fires(admin, schedule.id)
    assert [(f.scheduled_at.hour, f.outcome, f.run_id) for f in fires] == [
        (5, "created", third["run_id"]),
        (4, "skipped", None),
        (3, "created", first["run_id"]),
    ]


def test_a_workspace_without_configuration_records_a_skip(tier: Tier) -> None:
    # Given a schedule of a workspace with no uploaded configuration
    admin, [ws] = _org(tier, "acme", "empty")
    schedule = tier.schedules.create(admin, ws.id, "0 3 * * *", "plan_only")
    # When it fires, Then the fire is skipped with its reason and no run exists
    fired = tier.schedules.fire(schedule.id, FIRE_AT)
    assert fired == {"outcome": "skipped", "reason": "the workspace has no uploaded configuration"}
    assert _runs_of(tier, ws.id) == []
    assert tier.workflow.started == []


def test_a_fire_whose_schedule_moved_meanwhile_writes_nothing_of_its_own_and_skips(
    tier: Tier,
) -> None:
    # Given a schedule read by its 04:00 fire, and its 03:00 fire creating a run between
    # that read and the 04:00 fire's creation
    admin, [ws] = _org(tier, "acme", "network")
    _uploaded(tier, ws)
    schedule = tier.schedules.create(admin, ws.id, "0 * * * *", "plan_only")
    store = tier.schedule_store
    three: dict[str, Any] = {}
    raced: list[str] = []
    read = store.get

    def read_then_lose_the_race(schedule_id: str) -> Any:
        found = read(schedule_id)
        if not raced:
            raced.append(schedule_id)
            three.update(tier.schedules.fire(schedule_id, FIRE_AT))
        return found

    store.get = read_then_lose_the_race  # type: ignore[method-assign]
    # When the 04:00 fire is delivered
    four = tier.schedules.fire(schedule.id, FIRE_AT.replace(hour=4))
    # Then its creation was refused writing nothing, and its retry skipped it: one run,
    # the 03:00 one, and one record of each fire
    assert three["outcome"] == "created"
    assert four["outcome"] == "skipped"
    assert [r.id for r in _runs_of(tier, ws.id)] == [three["run_id"]]
    assert [(f.scheduled_at.hour, f.outcome) for f in tier.schedules.fires(admin, schedule.id)] == [
        (4, "skipped"),
        (3, "created"),
    ]
    assert tier.workflow.started == [three["run_id"]]


def test_a_creation_refused_for_a_taken_run_id_records_no_fire(tier: Tier) -> None:
    # Given a run, and a schedule that never fired
    admin, [ws] = _org(tier, "acme", "network")
    taken = _run_in(tier, admin, ws)
    schedule = tier.schedules.create(admin, ws.id, "0 3 * * *", "plan_only")
    before = _writes(tier)
    # When a run would be created under the taken ID with the schedule's fire
    with pytest.raises(RunAlreadyExists):
        tier.runs.create(
            admin,
            ws.id,
            kind=RunKind.PLAN_ONLY,
            configuration_version_id=f"cv-{ws.id}",
            engine_version=None,
            variables={},
            records=[ScheduleFire(schedule, FIRE_AT, tier.clock.now())],
            run_id=taken.id,
        )
    # Then neither the fire's record nor the schedule's move was written
    assert _writes(tier) == before
    assert tier.schedules.fires(admin, schedule.id) == []


# -- run triggers -------------------------------------------------------------------------


def test_an_applied_source_run_queues_one_run_per_dependent_even_when_handled_twice(
    tier: Tier,
    lists: InMemoryRunTriggers,
) -> None:
    # Given A a source of B and of C, both of which ran before
    admin, [a, b, c] = _org(tier, "acme", "a", "b", "c")
    source = _run_in(tier, admin, a)
    earlier = {ws.id: _run_in(tier, admin, ws).id for ws in (b, c)}
    triggers = _triggers(tier, lists)
    triggers.add(admin, b.id, a.id)
    triggers.add(admin, c.id, a.id)
    event = _applied(source)
    # When A's applied event is handled twice (a redelivered message)
    triggers.on_event(event)
    triggers.on_event(event)
    # Then each dependent has exactly one new run, from the configuration it ran before
    new = {ws.id: [r for r in _runs_of(tier, ws.id) if r.id != earlier[ws.id]] for ws in (b, c)}
    assert [len(runs) for runs in new.values()] == [1, 1]
    queued = {ws_id: runs[0] for ws_id, runs in sorted(new.items())}
    # And the claims, in dependent order, name them
    assert tier.claims.of_source(source.id) == [
        Triggered(ws_id, run.id, None) for ws_id, run in queued.items()
    ]
    # And the source run's review lists them; each triggered run's names its source
    review = tier.runs.review(admin, source.id)
    assert review["triggered_runs"] == [
        {"workspace_id": ws_id, "run_id": run.id, "skipped": None} for ws_id, run in queued.items()
    ]
    triggered = tier.runs.review(admin, queued[b.id].id)
    assert triggered["trigger"] == {
        "source_run_id": source.id,
        "source_workspace_id": a.id,
        "event_id": event.id,
    }
    assert triggered["input"]["configuration_version_id"] == f"cv-{b.id}"


def test_two_concurrent_handlings_queue_one_run_in_the_dependent(
    tier: Tier, lists: InMemoryRunTriggers
) -> None:
    # Given A a source of B (which ran before), and two handlings of A's applied event,
    # the second running whole between the first's read of the claims and its creation
    admin, [a, b] = _org(tier, "acme", "a", "b")
    source = _run_in(tier, admin, a)
    before = _run_in(tier, admin, b)
    event = _applied(source)
    other = _triggers(tier, lists)
    other.add(admin, b.id, a.id)
    interleaved: list[str | None] = []

    class ReadThenInterleave(InMemoryTriggerClaims):
        def of_source(self, source_run_id: str) -> list[Triggered]:
            read = tier.claims.of_source(source_run_id)
            if not interleaved:
                interleaved.append(other.queue_dependent(event, b.id))
            return read

        def skip(self, *args: Any, **kwargs: Any) -> None:
            tier.claims.skip(*args, **kwargs)

    first = _triggers(tier, lists, ReadThenInterleave())
    # When the first handling queues B's run
    queued = first.queue_dependent(event, b.id)
    # Then its creation was refused by the claim and it adopted the second's run: B has
    # one new run, claimed once, and only that run's workflow was started
    assert queued == interleaved[0]
    assert [r.id for r in _runs_of(tier, b.id) if r.id != before.id] == [queued]
    assert tier.claims.of_source(source.id) == [Triggered(b.id, queued, None)]
    assert set(tier.workflow.started) - {source.id, before.id} == {queued}


def test_only_an_applied_event_queues_runs(tier: Tier, lists: InMemoryRunTriggers) -> None:
    # Given A a source of B (which ran before)
    admin, [a, b] = _org(tier, "acme", "a", "b")
    source = _run_in(tier, admin, a)
    _run_in(tier, admin, b)
    triggers = _triggers(tier, lists)
    triggers.add(admin, b.id, a.id)
    before = _writes(tier)
    # When A's run ends without an apply
    ended = RunEvent(**{**_applied(source).__dict__, "type": EventType.ENDED})
    triggers.on_event(ended)
    # Then nothing is queued or written
    assert _writes(tier) == before


def test_a_dependent_that_never_ran_records_a_skip_once(
    tier: Tier, lists: InMemoryRunTriggers
) -> None:
    # Given A a source of B, which has no run to take a configuration from
    admin, [a, b] = _org(tier, "acme", "a", "b")
    source = _run_in(tier, admin, a)
    triggers = _triggers(tier, lists)
    triggers.add(admin, b.id, a.id)
    event = _applied(source)
    # When A's applied event is handled twice
    triggers.on_event(event)
    triggers.on_event(event)
    # Then B has no run, the skip is recorded once with its organization audit event,
    # and the source run's review shows why
    assert _runs_of(tier, b.id) == []
    reason = "the workspace has no configuration to run yet"
    assert tier.claims.of_source(source.id) == [Triggered(b.id, None, reason)]
    assert [(e.event_id, e.type) for e in tier.claims.audit] == [
        (f"{event.id}.skipped.{b.id}", "run_trigger.skipped")
    ]
    assert tier.runs.review(admin, source.id)["triggered_runs"] == [
        {"workspace_id": b.id, "run_id": None, "skipped": reason}
    ]


# -- two organizations ----------------------------------------------------------------------


def test_a_source_run_of_another_organization_queues_nothing(
    tier: Tier, lists: InMemoryRunTriggers
) -> None:
    # Given acme's B with A as its source, and globex's run whose event names acme's A's
    # workspace (a forged or misrouted event)
    admin, [a, b] = _org(tier, "acme", "a", "b")
    _run_in(tier, admin, b)
    triggers = _triggers(tier, lists)
    triggers.add(admin, b.id, a.id)
    globex, [theirs] = _org(tier, "globex", "theirs")
    their_run = _run_in(tier, globex, theirs)
    forged = RunEvent(**{**_applied(their_run).__dict__, "workspace_id": a.id})
    before = _writes(tier)
    # When it is handled
    queued = triggers.queue_dependent(forged, b.id)
    # Then nothing is queued in acme or written anywhere
    assert queued is None
    assert _writes(tier) == before


def test_each_organizations_schedule_creates_runs_only_in_its_own_workspace(
    tier: Tier,
) -> None:
    # Given a schedule in acme and one in globex, each with its own configuration
    acme, [ours] = _org(tier, "acme", "network")
    globex, [theirs] = _org(tier, "globex", "network")
    for ws in (ours, theirs):
        _uploaded(tier, ws)
    mine = tier.schedules.create(acme, ours.id, "0 3 * * *", "plan_only")
    their = tier.schedules.create(globex, theirs.id, "0 3 * * *", "plan_only")
    # When both fire for 03:00
    created = {s.id: tier.schedules.fire(s.id, FIRE_AT)["run_id"] for s in (mine, their)}
    # Then each created one run in its own workspace, seen only by its organization
    assert [r.id for r in _runs_of(tier, ours.id)] == [created[mine.id]]
    assert [r.id for r in _runs_of(tier, theirs.id)] == [created[their.id]]
    assert tier.runs.get(acme, created[mine.id]).organization_id == ours.organization_id
    with pytest.raises(NotFound):
        tier.runs.get(globex, created[mine.id])
    with pytest.raises(NotFound):
        tier.runs.review(acme, created[their.id])


def test_a_dependent_whose_newest_runs_are_speculative_runs_its_last_configuration(
    tier: Tier, lists: InMemoryRunTriggers
) -> None:
    # Given A a source of B, whose one real run is older than many speculative plans
    admin, [a, b] = _org(tier, "acme", "a", "b")
    source = _run_in(tier, admin, a)
    ran = _run_in(tier, admin, b)
    for _ in range(25):
        tier.runs.create(
            admin,
            b.id,
            kind=RunKind.SPECULATIVE,
            configuration_version_id=f"cv-{b.id}",
            engine_version=None,
            variables={},
        )
    triggers = _triggers(tier, lists)
    triggers.add(admin, b.id, a.id)
    # When A's applied event is handled
    triggers.on_event(_applied(source))
    # Then B runs the configuration of its last real run, found past the newest runs
    (queued,) = [
        r for r in _runs_of(tier, b.id) if r.kind is RunKind.PLAN_AND_APPLY and r.id != ran.id
    ]
    review = tier.runs.review(admin, queued.id)
    assert review["input"]["configuration_version_id"] == f"cv-{b.id}"
