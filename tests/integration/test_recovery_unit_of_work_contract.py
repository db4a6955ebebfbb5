"""The unit of work's recovery repositories: a run's recovery operation, the workspace
writer's end after recovery, pending state versions, runner sessions and audit events,
committed all or nothing. The same cases run against the DynamoDB unit of work (on moto)
and the in-memory one the service tier uses (tests/service/test_recovery.py), so the
fake cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.capabilities import Binding, Phase, RunnerSession
from runplane.domain.entities import AuditEvent, Run, Workspace
from runplane.domain.errors import ConcurrentChange, Conflict, NotWriter
from runplane.domain.publications import Publication, publication_of
from runplane.domain.recovery import Recovery, RecoveryRefused, RecoveryState
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.state import FINALIZED, PENDING, StateVersion
from runplane.services.repositories import RunLedger
from runplane.services.unit_of_work import UnitOfWork
from runplane.store import audit, state_versions
from runplane.store import capabilities as capability_store
from runplane.store.models import WorkspaceItem, workspace_key
from runplane.store.runs import RunRepository
from runplane.store.unit_of_work import DynamoUnitOfWork
from runplane.store.workspaces import publication_record
from runplane.store.writer import DynamoWriterAuthority
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import (
    InMemoryRecoveries,
    InMemorySandboxes,
    InMemoryUnitOfWork,
    InMemoryWriterQueue,
    empty_workspace,
)
from tests.fakes import (
    FakeClock,
    InMemoryRunLedger,
    InMemoryStateVersions,
    InMemoryWorkspaces,
    SeededIds,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)
LATER = AT + timedelta(minutes=5)
ORG = "org-acme"


@dataclass
class Units:
    new: Callable[[], UnitOfWork]
    ledger: RunLedger
    workspace_id: str
    # Reserve the workspace writer for a run (queued, with its wait's token, if held).
    reserve: Callable[[Run, str], None]
    add_version: Callable[[StateVersion], None]
    start_session: Callable[[str, str], None]
    revoked: Callable[[str], bool]
    # The organization's audit events other than runs' creations.
    org_events: Callable[[], list[tuple[str, str, str]]]
    # Make a version current with its publication facts, as a publication leaves it.
    make_current: Callable[[Publication], None]

    def run(self, run_id: str = "run-1") -> Run:
        run = Run(
            id=run_id,
            organization_id=ORG,
            workspace_id=self.workspace_id,
            kind=RunKind.PLAN_AND_APPLY,
            status=RunStatus.APPLYING,
            version=1,
            created_at=AT,
            updated_at=AT,
        )
        self.ledger.create(run, actor="user:ada", input={})
        with self.new() as uow:
            return uow.runs.get(run_id)


def _recovery(run: Run, generation: int = 1, lease: timedelta = timedelta(minutes=15)) -> Recovery:
    return Recovery(
        id="rec-1",
        run_id=run.id,
        organization_id=run.organization_id,
        workspace_id=run.workspace_id,
        state=RecoveryState.PREPARED,
        holder="user:ada",
        generation=generation,
        fingerprint="fp-1",
        lease_expires_at=AT + lease,
        target_artifact_id=None,
        body={"resolution": "keep_current_state"},
        created_at=AT,
        updated_at=AT,
    )


def _version(
    units: Units, sv_id: str, run_id: str = "run-1", status: str = PENDING
) -> StateVersion:
    return StateVersion(
        id=sv_id,
        workspace_id=units.workspace_id,
        organization_id=ORG,
        serial=3,
        lineage="lin-1",
        md5="0" * 32,
        status=status,
        created_at=AT,
        created_by="runner",
        provenance={"run_id": run_id},
    )


def _session(key: str, attempt_id: str) -> RunnerSession:
    return RunnerSession(
        id=f"rs-{key}",
        organization_id=ORG,
        jti=f"jti-{key}",
        binding=Binding("run-1", attempt_id, Phase.APPLY, "sbx-1"),
        inputs=(),
        expires_at=AT + timedelta(hours=1),
    )


def _dynamo_events() -> list[tuple[str, str, str]]:
    found: list[AuditEvent] = audit.organization_trail(ORG)
    return [(e.type, e.subject_id, e.actor) for e in found if e.type != "run.created"]


@pytest.fixture(params=["dynamodb", "memory"])
def units(request: pytest.FixtureRequest) -> Units:
    clock, ids = FakeClock(), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        workspace: Workspace = request.getfixturevalue("workspace")
        lifecycle = run_lifecycle(clock, ids)
        writer = DynamoWriterAuthority(clock, ids)
        return Units(
            lambda: DynamoUnitOfWork(RunRepository(clock, ids), lifecycle.mover.move),
            lifecycle.ledger,
            workspace.id,
            lambda run, token: (writer.reserve(run, token), None)[1],
            lambda version: state_versions.put_pending(version).commit(),
            lambda key, attempt_id: capability_store.create_session(
                key, _session(key, attempt_id), AT
            ).commit(),
            lambda key: bool((found := capability_store.get_session(key)) and found.revoked),
            _dynamo_events,
            lambda facts: _dynamo_make_current(workspace.id, facts),
        )
    ledger, queue, sandboxes = (
        InMemoryRunLedger(clock, ids),
        InMemoryWriterQueue(),
        InMemorySandboxes(),
    )
    directory, versions, recoveries = (
        InMemoryWorkspaces(),
        InMemoryStateVersions(),
        InMemoryRecoveries(),
    )
    directory.workspaces["ws-1"] = empty_workspace("ws-1", ORG, AT)

    def make_current(facts: Publication) -> None:
        directory.workspaces["ws-1"] = replace(
            directory.workspaces["ws-1"],
            current_state_version_id=facts.id,
            current_serial=facts.serial,
            current_lineage=facts.lineage,
            current_publication=facts,
        )

    def start_session(key: str, attempt_id: str) -> None:
        sandboxes.sessions[key] = None
        sandboxes.of_attempt.setdefault(attempt_id, set()).add(key)

    return Units(
        lambda: InMemoryUnitOfWork(
            ledger,
            queue,
            sandboxes,
            directory=directory,
            versions=versions,
            recoveries=recoveries,
        ),
        ledger,
        "ws-1",
        queue.reserve,
        versions.add,
        start_session,
        lambda key: sandboxes.sessions.get(key) is not None,
        lambda: [(e.type, e.subject_id, e.actor) for e in recoveries.org_audit],
        make_current,
    )


def _dynamo_make_current(workspace_id: str, facts: Publication) -> None:
    WorkspaceItem(*workspace_key(workspace_id)).update(
        actions=[
            WorkspaceItem.current_sv_id.set(facts.id),
            WorkspaceItem.current_serial.set(facts.serial),
            WorkspaceItem.current_lineage.set(facts.lineage),
            WorkspaceItem.current_publication.set(publication_record(facts)),
        ]
    )


def test_a_recovery_is_prepared_once(units: Units) -> None:
    # Given a run with a prepared recovery
    run = units.run()
    with units.new() as uow:
        uow.recoveries.prepare(_recovery(run))
        uow.commit()
    # When another submission prepares one too
    with units.new() as uow:
        uow.recoveries.prepare(replace(_recovery(run), id="rec-2", holder="user:bob"))
        with pytest.raises(ConcurrentChange):
            uow.commit()
        # Then the first stands
        held = uow.recoveries.get(run.id)
    assert held is not None
    assert (held.id, held.holder, held.generation) == ("rec-1", "user:ada", 1)


def test_a_lease_moves_the_generation_so_a_stale_holder_can_no_longer_write(
    units: Units,
) -> None:
    # Given a prepared recovery leased again to bob
    run = units.run()
    stale = _recovery(run)
    with units.new() as uow:
        uow.recoveries.prepare(stale)
        uow.commit()
    with units.new() as uow:
        uow.recoveries.lease(stale, "user:bob", LATER + timedelta(minutes=15), {"n": 2}, LATER)
        uow.commit()
        leased = uow.recoveries.get(run.id)
    assert leased is not None
    assert (leased.holder, leased.generation, leased.body) == ("user:bob", 2, {"n": 2})
    # When ada, holding the generation she read, records a target or completes
    writes: list[Callable[[UnitOfWork], None]] = [
        lambda uow: uow.recoveries.record_target(stale, "art-1", LATER),
        lambda uow: uow.recoveries.complete(stale, {"done": True}, LATER),
        lambda uow: uow.recoveries.lease(stale, "user:ada", LATER, {}, LATER),
    ]
    for write in writes:
        with units.new() as uow:
            write(uow)
            # Then each is refused and nothing changes
            with pytest.raises(ConcurrentChange):
                uow.commit()
    with units.new() as uow:
        assert uow.recoveries.get(run.id) == leased


def test_a_target_is_recorded_once_and_a_completion_needs_a_lease_not_run_out(
    units: Units,
) -> None:
    # Given a prepared recovery whose lease runs out 15 minutes after AT
    run = units.run()
    recovery = _recovery(run)
    with units.new() as uow:
        uow.recoveries.prepare(recovery)
        uow.commit()
    # When the target is recorded, then recorded again
    with units.new() as uow:
        uow.recoveries.record_target(recovery, "art-1", LATER)
        uow.commit()
    with units.new() as uow:
        uow.recoveries.record_target(recovery, "art-2", LATER)
        with pytest.raises(ConcurrentChange):
            uow.commit()
        # Then the first target stands
        held = uow.recoveries.get(run.id)
    assert held is not None
    assert held.target_artifact_id == "art-1"
    # And a completion after the lease ran out is refused; within it, it completes
    with units.new() as uow:
        uow.recoveries.complete(recovery, {"late": True}, AT + timedelta(minutes=16))
        with pytest.raises(ConcurrentChange):
            uow.commit()
    with units.new() as uow:
        uow.recoveries.complete(recovery, {"result": "ok"}, LATER)
        uow.commit()
        done = uow.recoveries.get(run.id)
    assert done is not None
    assert (done.state, done.body) == (RecoveryState.COMPLETED, {"result": "ok"})


def test_recovering_the_writer_advances_the_fence_and_hands_it_to_the_oldest_waiter(
    units: Units,
) -> None:
    # Given run-1 holding the writer reservation, run-2 and run-3 waiting in that order
    holder, second, third = units.run(), units.run("run-2"), units.run("run-3")
    units.reserve(holder, "t-1")
    units.reserve(second, "t-2")
    units.reserve(third, "t-3")
    with units.new() as uow:
        observed = uow.writer.workspace(units.workspace_id)
        oldest = uow.writer.oldest_waiter(units.workspace_id)
    assert (observed.writer_run_id, observed.queue_length) == ("run-1", 2)
    assert oldest is not None
    assert (oldest.run_id, oldest.token) == ("run-2", "t-2")
    # When recovery ends run-1's authority with a new current state
    with units.new() as uow:
        uow.writer.recover(observed, "run-1", oldest, LATER, ("sv-9", 9, "lin-9"))
        uow.commit()
    # Then the fence moved, the state is current and run-2 holds the reservation
    with units.new() as uow:
        after = uow.writer.workspace(units.workspace_id)
        next_in_line = uow.writer.oldest_waiter(units.workspace_id)
    assert next_in_line is not None
    assert (next_in_line.run_id, next_in_line.token) == ("run-3", "t-3")
    assert (after.fence, after.writer_run_id) == (observed.fence + 1, "run-2")
    assert after.queue_length == 1
    assert (after.current_state_version_id, after.current_serial, after.current_lineage) == (
        "sv-9",
        9,
        "lin-9",
    )
    assert after.lock_id is None
    # And a second recovery from the same observation is refused: run-1 holds nothing
    with units.new() as uow:
        uow.writer.recover(observed, "run-1", None, LATER)
        with pytest.raises(NotWriter):
            uow.commit()


@pytest.mark.parametrize("new_state", [("sv-9", 9, "lin-9"), None])
def test_recovery_leaves_facts_only_of_the_version_still_current(
    units: Units, new_state: tuple[str, int, str] | None
) -> None:
    # Given run-1 holding the writer, its version current with its publication facts
    units.reserve(units.run(), "t-1")
    facts = publication_of(replace(_version(units, "sv-1", status=FINALIZED), serial=1))
    units.make_current(facts)
    with units.new() as uow:
        observed = uow.writer.workspace(units.workspace_id)
    assert observed.current_publication == facts
    # When recovery ends its authority, making another version current or not
    with units.new() as uow:
        uow.writer.recover(observed, "run-1", None, LATER, new_state)
        uow.commit()
    # Then facts stay only while their version does: a new current version has none
    # (a result checking it reads it)
    with units.new() as uow:
        after = uow.writer.workspace(units.workspace_id)
    if new_state is None:
        assert (after.current_state_version_id, after.current_publication) == ("sv-1", facts)
    else:
        assert (after.current_state_version_id, after.current_publication) == ("sv-9", None)
        assert (after.current_serial, after.current_lineage) == (9, "lin-9")


def test_recovering_the_writer_from_a_stale_observation_is_refused(units: Units) -> None:
    # Given run-1 holding the reservation, observed with an empty queue
    holder = units.run()
    units.reserve(holder, "t-1")
    with units.new() as uow:
        observed = uow.writer.workspace(units.workspace_id)
    # When a run queues meanwhile and recovery frees the reservation to nobody
    units.reserve(units.run("run-2"), "t-2")
    with units.new() as uow:
        uow.writer.recover(observed, "run-1", None, LATER)
        # Then it is refused (the waiter would be stranded) and nothing moved
        with pytest.raises(ConcurrentChange):
            uow.commit()
        held = uow.writer.workspace(units.workspace_id)
    assert (held.fence, held.writer_run_id, held.queue_length) == (observed.fence, "run-1", 1)
    # And an observation whose fence is stale is refused too
    with units.new() as uow:
        uow.writer.recover(
            replace(held, fence=held.fence - 1), "run-1", uow.writer.oldest_waiter(held.id), LATER
        )
        with pytest.raises(ConcurrentChange):
            uow.commit()


def test_pending_versions_are_found_per_run_and_discarded_exactly_once(units: Units) -> None:
    # Given two pending uploads of run-1, one of run-2 and a finalized version
    units.run()
    for version in (
        _version(units, "sv-1"),
        _version(units, "sv-2"),
        _version(units, "sv-3", run_id="run-2"),
        _version(units, "sv-4", status=FINALIZED),
    ):
        units.add_version(version)
    with units.new() as uow:
        pending = uow.state_versions.pending_of_run(units.workspace_id, "run-1")
    assert sorted(version.id for version in pending) == ["sv-1", "sv-2"]
    # When both are discarded, then discarded again from the same read
    with units.new() as uow:
        for version in pending:
            uow.state_versions.discard_pending(version)
        uow.commit()
    with units.new() as uow:
        assert uow.state_versions.pending_of_run(units.workspace_id, "run-1") == []
        uow.state_versions.discard_pending(pending[0])
        # Then the second is refused
        with pytest.raises(Conflict):
            uow.commit()


def test_a_finalized_version_is_put_once(units: Units) -> None:
    units.run()
    version = _version(units, "sv-7", status=FINALIZED)
    with units.new() as uow:
        uow.state_versions.put_finalized(version)
        uow.commit()
    with units.new() as uow:
        assert uow.state_versions.get("sv-7").status == FINALIZED
        uow.state_versions.put_finalized(replace(version, serial=99))
        with pytest.raises(ConcurrentChange):
            uow.commit()
        assert uow.state_versions.get("sv-7").serial == 3


def test_a_completion_commits_with_its_audit_events_and_sessions_or_not_at_all(
    units: Units,
) -> None:
    # Given a prepared recovery of run-1 whose apply attempt has two runner sessions
    run = units.run()
    recovery = _recovery(run)
    with units.new() as uow:
        uow.recoveries.prepare(recovery)
        uow.commit()
    units.start_session("key-1", "att-1")
    units.start_session("key-2", "att-1")

    def complete(uow: UnitOfWork, snapshot: Run) -> None:
        uow.recoveries.complete(recovery, {"result": "ok"}, LATER)
        uow.runs.expect_unchanged(
            snapshot, on_refused=lambda held: RecoveryRefused(f"run moved to {held}")
        )
        uow.attempts.revoke_sessions("att-1", LATER)
        uow.audit.record(
            organization_id=ORG,
            subject_id=run.id,
            event_id="evt-1",
            type="run.recovered",
            actor="user:ada",
            at=LATER,
            details={"recovery_id": recovery.id},
        )

    # When the completion is built on a snapshot of the run in another status
    with units.new() as uow:
        complete(uow, replace(run, status=RunStatus.NEEDS_RECOVERY))
        # Then the run's refusal is raised and nothing is written
        with pytest.raises(RecoveryRefused, match="run moved to applying"):
            uow.commit()
        held = uow.recoveries.get(run.id)
    assert held is not None
    assert held.state is RecoveryState.PREPARED
    assert not units.revoked("key-1")
    assert units.org_events() == []
    # And built on the run as it is, everything is written together
    with units.new() as uow:
        complete(uow, run)
        uow.commit()
        done = uow.recoveries.get(run.id)
    assert done is not None
    assert done.state is RecoveryState.COMPLETED
    assert units.revoked("key-1")
    assert units.revoked("key-2")
    assert units.org_events() == [("run.recovered", run.id, "user:ada")]
