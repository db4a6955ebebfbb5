"""The run creation contract: a run written with its input and its caller's records (a
schedule's fire, a run trigger's claim), the claims' skips, and configuration versions,
the same cases against the DynamoDB store (on moto) and the in-memory fakes the service
tier uses (tests/service), so the fakes cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactStatus
from runplane.domain.auto_destroy import AutoDestroy, AutoDestroySettings, launched
from runplane.domain.creation import (
    AutoDestroyLaunch,
    ConfigurationVersion,
    ScheduleFire,
    TriggerClaim,
)
from runplane.domain.entities import Run
from runplane.domain.errors import (
    AlreadyTriggered,
    ConcurrentChange,
    Conflict,
    RunAlreadyExists,
    ScheduleAlreadyFired,
    ScheduleMoved,
)
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus
from runplane.domain.run_triggers import Triggered
from runplane.domain.schedules import Fire, Schedule
from runplane.services.repositories import RunReader, ScheduleStore
from runplane.services.repositories.auto_destroy import AutoDestroyStore
from runplane.services.repositories.creation import (
    ConfigurationVersions,
    RunCreations,
    TriggerClaims,
)
from runplane.store import audit
from runplane.store.auto_destroy import DynamoAutoDestroyStore
from runplane.store.configuration_versions import DynamoConfigurationVersions
from runplane.store.run_creations import DynamoRunCreations
from runplane.store.run_reader import DynamoRunReader
from runplane.store.run_trigger_store import DynamoTriggerClaims
from runplane.store.runs import RunRepository
from runplane.store.schedule_store import DynamoScheduleStore
from runplane.store.transaction import Transaction
from tests.builders import run_record
from tests.fakes import FakeClock, InMemoryRunLedger, InMemorySchedules, SeededIds
from tests.fakes_auto_destroy import InMemoryAutoDestroys
from tests.fakes_creation import (
    InMemoryConfigurationVersions,
    InMemoryRunCreations,
    InMemoryTriggerClaims,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG = "org-acme"
INPUT = {"configuration_version_id": "cv-1", "engine_version": "1.0.3"}
TEN = datetime(2026, 1, 1, 10, tzinfo=UTC)


def _run(run_id: str = "run-1", workspace_id: str = "ws-1") -> Run:
    return run_record(run_id, workspace_id, ORG, RunKind.PLAN_ONLY, AT)


def _schedule(schedule_id: str = "sch-1") -> Schedule:
    return Schedule(
        id=schedule_id,
        organization_id=ORG,
        workspace_id="ws-1",
        expression="@hourly",
        aws_expression="rate(1 hour)",
        kind="plan_only",
        state="active",
        created_at=AT,
        created_by="user:ada",
        updated_at=AT,
        active_run_id=None,
        last_fire_at=None,
        last_outcome=None,
    )


@dataclass
class Store:
    creations: RunCreations[Any]
    reader: RunReader
    schedules: ScheduleStore
    claims: TriggerClaims
    configurations: ConfigurationVersions[Any]
    # A write not yet made, made; and the audit events (type, actor) of a run, and the
    # organization's of one type.
    commit: Callable[[Any], None]
    audit: Callable[[str], list[tuple[str, str]]]
    org_audit: Callable[[str], list[tuple[str, str, dict[str, str]]]]
    auto_destroys: AutoDestroyStore


@pytest.fixture(params=["dynamodb", "memory"])
def store(request: pytest.FixtureRequest) -> Store:
    clock, ids = FakeClock(), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        repository = RunRepository(clock, ids)

        def made(write: Transaction) -> None:
            write.commit()

        return Store(
            DynamoRunCreations(repository),
            DynamoRunReader(repository),
            DynamoScheduleStore(),
            DynamoTriggerClaims(),
            DynamoConfigurationVersions(),
            made,
            lambda run_id: [(e.type, e.actor) for e in repository.audit_trail(run_id)],
            lambda type: [
                (e.id, e.subject_id, dict(e.details))
                for e in audit.events_in(f"ORG#{ORG}")
                if e.type == type
            ],
            DynamoAutoDestroyStore(),
        )
    ledger, schedules = InMemoryRunLedger(clock, ids), InMemorySchedules()
    claims, auto_destroys = InMemoryTriggerClaims(), InMemoryAutoDestroys(schedules)

    def apply(write: Callable[[], None]) -> None:
        write()

    return Store(
        InMemoryRunCreations(ledger, schedules, claims, auto_destroys),
        ledger,
        schedules,
        claims,
        InMemoryConfigurationVersions(),
        apply,
        lambda run_id: [(e.type, e.actor) for e in ledger.audit if e.subject_id == run_id],
        lambda type: [
            (e.event_id, e.subject_id, e.details) for e in claims.audit if e.type == type
        ],
        auto_destroys,
    )


def _exists(store: Store, run_id: str) -> bool:
    try:
        store.reader.get_run(run_id)
    except Exception:
        return False
    return True


def test_a_run_created_alone_reads_back_with_its_stages_input_and_creation_event(
    store: Store,
) -> None:
    # When a run is created with no caller's records
    store.creations.create(replace(_run(), created_by=None), actor="user:ada", input=INPUT)
    # Then it is whole, its four stages pending, its input recorded, its creation audited
    assert store.reader.get_run("run-1") == _run()
    assert sorted(store.reader.stages("run-1")) == sorted(Stage)
    assert {s.status for s in store.reader.stages("run-1").values()} == {StageStatus.PENDING}
    assert store.reader.parts("run-1")["input"].body == INPUT
    assert store.audit("run-1") == [("run.created", "user:ada")]


def test_a_fire_creates_its_run_records_itself_and_moves_the_schedules_active_run(
    store: Store,
) -> None:
    # Given a schedule that never fired
    store.schedules.create(_schedule())
    # When its 10:00 fire creates a run
    fire = ScheduleFire(store.schedules.get("sch-1"), TEN, recorded_at=AT)
    store.creations.create(_run(), actor="schedule:sch-1", input=INPUT, records=[fire])
    # Then the run, the fire's record and the schedule's active run are written together
    assert store.reader.get_run("run-1").status is RunStatus.DISPATCH_PENDING
    assert store.schedules.fires("sch-1") == [Fire("sch-1", TEN, "created", "run-1", None)]
    schedule = store.schedules.get("sch-1")
    assert (schedule.active_run_id, schedule.last_fire_at, schedule.last_outcome) == (
        "run-1",
        TEN,
        "created",
    )


def test_a_fire_recorded_already_creates_nothing(store: Store) -> None:
    # Given a schedule whose 10:00 fire was recorded (skipped)
    store.schedules.create(_schedule())
    store.schedules.record_fire(_schedule(), TEN, outcome="skipped", now=AT, reason="busy")
    read = store.schedules.get("sch-1")
    # When the same fire would create a run
    with pytest.raises(ScheduleAlreadyFired):
        store.creations.create(
            _run(), actor="schedule:sch-1", input=INPUT, records=[ScheduleFire(read, TEN, AT)]
        )
    # Then no run exists and the schedule and its fires are as they were
    assert not _exists(store, "run-1")
    assert store.schedules.get("sch-1") == read
    assert [f.outcome for f in store.schedules.fires("sch-1")] == ["skipped"]


def test_a_fire_over_a_schedule_moved_meanwhile_creates_nothing(store: Store) -> None:
    # Given a schedule read, then fired for 10:00 by another delivery creating run-1
    store.schedules.create(_schedule())
    stale = store.schedules.get("sch-1")
    store.creations.create(
        _run(), actor="schedule:sch-1", input=INPUT, records=[ScheduleFire(stale, TEN, AT)]
    )
    # When the stale read fires for 11:00
    eleven = TEN + timedelta(hours=1)
    with pytest.raises(ScheduleMoved):
        store.creations.create(
            _run("run-2"),
            actor="schedule:sch-1",
            input=INPUT,
            records=[ScheduleFire(stale, eleven, AT)],
        )
    # Then neither run-2 nor its fire exists, and the active run is still run-1
    assert not _exists(store, "run-2")
    assert [f.scheduled_at for f in store.schedules.fires("sch-1")] == [TEN]
    assert store.schedules.get("sch-1").active_run_id == "run-1"


def test_an_auto_destroy_launch_is_written_with_its_run_and_only_once(store: Store) -> None:
    # Given an armed workspace's auto-destroy, read by two sweeps
    armed = AutoDestroy(
        workspace_id="ws-1",
        organization_id=ORG,
        settings=AutoDestroySettings(destroy_at=AT),
        set_at=AT - timedelta(days=1),
        set_by="user:ada",
    )
    store.auto_destroys.put(armed, previous_version=0)
    read = store.auto_destroys.get("ws-1")
    assert read == armed

    # When the first creates its destroy run with the launch record
    first = AutoDestroyLaunch(armed, launched(armed, "run-1"))
    store.creations.create(_run(), actor="system:auto-destroy", input=INPUT, records=[first])

    # Then the run and the record naming it were written together
    assert _exists(store, "run-1")
    assert store.auto_destroys.get("ws-1") == launched(armed, "run-1")

    # When the second, from the same read, creates another
    second = AutoDestroyLaunch(armed, launched(armed, "run-2"))
    with pytest.raises(ConcurrentChange):
        store.creations.create(
            _run("run-2"), actor="system:auto-destroy", input=INPUT, records=[second]
        )

    # Then neither its run nor its record exists
    assert not _exists(store, "run-2")
    assert store.auto_destroys.get("ws-1") == launched(armed, "run-1")


def test_a_source_run_claims_each_dependent_once(store: Store) -> None:
    # Given run-src's claim on ws-1 made with run-1
    claim = TriggerClaim("run-src", "ws-1", AT)
    store.creations.create(_run(), actor="system:trigger", input=INPUT, records=[claim])
    # When another handling of the same event creates run-2 with the same claim
    with pytest.raises(AlreadyTriggered) as refused:
        store.creations.create(_run("run-2"), actor="system:trigger", input=INPUT, records=[claim])
    # Then it is refused naming run-1, and run-2 was never written
    assert refused.value.run_id == "run-1"
    assert not _exists(store, "run-2")
    # And the claims read back in dependent order, a claim on ws-0 first
    store.creations.create(
        _run("run-3", "ws-0"),
        actor="system:trigger",
        input=INPUT,
        records=[TriggerClaim("run-src", "ws-0", AT)],
    )
    assert store.claims.of_source("run-src") == [
        Triggered("ws-0", "run-3", None),
        Triggered("ws-1", "run-1", None),
    ]
    assert store.claims.of_source("run-other") == []


def test_a_skip_is_recorded_once_with_its_audit_event_and_refuses_a_later_claim(
    store: Store,
) -> None:
    # Given run-src's skip of ws-1
    store.claims.skip(
        "run-src", "ws-1", org_id=ORG, reason="no configuration", event_id="ev-1", now=AT
    )
    # When the skip is recorded again, or a run would be created with the claim
    with pytest.raises(AlreadyTriggered) as again:
        store.claims.skip("run-src", "ws-1", org_id=ORG, reason="later", event_id="ev-1", now=AT)
    with pytest.raises(AlreadyTriggered) as claimed:
        store.creations.create(
            _run(),
            actor="system:trigger",
            input=INPUT,
            records=[TriggerClaim("run-src", "ws-1", AT)],
        )
    # Then both are refused naming no run, no run was written, and one audit event holds
    # the first reason
    assert (again.value.run_id, claimed.value.run_id) == ("", "")
    assert not _exists(store, "run-1")
    assert store.claims.of_source("run-src") == [Triggered("ws-1", None, "no configuration")]
    assert store.org_audit("run_trigger.skipped") == [
        (
            "ev-1.skipped.ws-1",
            "run-src",
            {"dependent_workspace_id": "ws-1", "reason": "no configuration"},
        )
    ]
    # And a skip after a claim is refused naming the claimed run
    store.creations.create(
        _run("run-2"),
        actor="system:trigger",
        input=INPUT,
        records=[TriggerClaim("run-src", "ws-2", AT)],
    )
    with pytest.raises(AlreadyTriggered) as late:
        store.claims.skip("run-src", "ws-2", org_id=ORG, reason="x", event_id="ev-1", now=AT)
    assert late.value.run_id == "run-2"


def test_a_taken_run_id_writes_none_of_the_callers_records(store: Store) -> None:
    # Given run-1, and a schedule that never fired
    store.creations.create(_run(), actor="user:ada", input=INPUT)
    store.schedules.create(_schedule())
    read = store.schedules.get("sch-1")
    # When another run-1 would be created with a fire and a claim
    with pytest.raises(RunAlreadyExists):
        store.creations.create(
            _run(),
            actor="schedule:sch-1",
            input={"other": "x"},
            records=[ScheduleFire(read, TEN, AT), TriggerClaim("run-src", "ws-1", AT)],
        )
    # Then neither record was written and the first run's input stands
    assert store.schedules.fires("sch-1") == []
    assert store.schedules.get("sch-1") == read
    assert store.claims.of_source("run-src") == []
    assert store.reader.parts("run-1")["input"].body == INPUT


def test_a_creations_write_is_made_only_when_committed(store: Store) -> None:
    # Given the write of a run with a claim, not made
    write = store.creations.writes(
        _run(), actor="user:ada", input=INPUT, records=[TriggerClaim("run-src", "ws-1", AT)]
    )
    assert not _exists(store, "run-1")
    assert store.claims.of_source("run-src") == []
    # When it is committed
    store.commit(write)
    # Then the run and its claim exist
    assert store.reader.get_run("run-1").id == "run-1"
    assert store.claims.of_source("run-src") == [Triggered("ws-1", "run-1", None)]


def _pending(cv_id: str = "cv-1") -> ConfigurationVersion:
    return ConfigurationVersion(
        id=cv_id,
        organization_id=ORG,
        workspace_id="ws-1",
        status="pending",
        upload_id="up-1",
        created_at=AT,
        expires_at=AT + timedelta(days=1),
        speculative=True,
        upload_token_hash="hash",
    )


def _artifact() -> Artifact:
    return Artifact(
        id="art-1",
        organization_id=ORG,
        kind=ArtifactKind.CONFIGURATION,
        status=ArtifactStatus.REGISTERED,
        size=42,
        sha256="ab" * 32,
        created_at=AT,
    )


def test_a_configuration_version_is_uploaded_once(store: Store) -> None:
    # Given a pending version (and none under another ID)
    store.configurations.create(_pending())
    assert store.configurations.get("cv-1") == _pending()
    assert store.configurations.get("cv-none") is None
    with pytest.raises(ConcurrentChange):
        store.configurations.create(_pending())
    # When its upload is recorded
    later = AT + timedelta(minutes=1)
    write = store.configurations.record_upload("cv-1", "ws-1", _artifact(), later)
    assert store.configurations.get("cv-1") == _pending()
    store.commit(write)
    # Then it reads as uploaded with the artifact, no longer expiring
    assert store.configurations.get("cv-1") == replace(
        _pending(),
        status="uploaded",
        artifact_id="art-1",
        sha256="ab" * 32,
        size=42,
        uploaded_at=later,
        expires_at=None,
    )
    # And a second upload, or one of an unknown version, is refused writing nothing
    for cv_id in ("cv-1", "cv-none"):
        with pytest.raises(Conflict):
            store.commit(store.configurations.record_upload(cv_id, "ws-1", _artifact(), later))
    assert store.configurations.get("cv-none") is None
