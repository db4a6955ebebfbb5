"""An apply's result through the unit of work, on DynamoDB (moto) and in memory: the
move releases exactly the apply lock its attempt was granted, keeps the reservation when
state was published, and commits the workspace's drift record only if no later run wrote
one. The same cases run against both implementations, so the fake cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.errors import StaleDriftFinding, StaleFence
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.schedules import Drift
from runplane.services.repositories import RunLedger
from runplane.services.unit_of_work import UnitOfWork
from runplane.store.runs import RunRepository
from runplane.store.unit_of_work import DynamoUnitOfWork
from runplane.store.writer import DynamoWriterAuthority
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import (
    InMemoryDriftRecords,
    InMemoryUnitOfWork,
    InMemoryWriterQueue,
    empty_workspace,
)
from tests.fakes import FakeClock, InMemoryRunLedger, InMemoryWorkspaces, SeededIds

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
    # Lock the workspace for a run's apply with the next fence.
    lock: Callable[[Run], ApplyLock]

    def applying(self, run_id: str = "run-1") -> Run:
        """A plan-and-apply run applying under the writer reservation and the apply lock."""
        run = self.create(run_id, RunStatus.APPLYING)
        self.reserve(run, f"token-{run_id}")
        return run

    def create(self, run_id: str, status: RunStatus) -> Run:
        run = Run(
            id=run_id,
            organization_id=ORG,
            workspace_id=self.workspace_id,
            kind=RunKind.PLAN_AND_APPLY,
            status=status,
            version=1,
            created_at=AT,
            updated_at=AT,
        )
        self.ledger.create(run, actor="user:ada", input={})
        with self.new() as uow:
            return uow.runs.get(run_id)

    def workspace(self) -> Workspace:
        with self.new() as uow:
            return uow.writer.workspace(self.workspace_id)


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
            writer.acquire_apply_lock,
        )
    ledger, queue, directory = (
        InMemoryRunLedger(clock, ids),
        InMemoryWriterQueue(),
        InMemoryWorkspaces(),
    )
    directory.workspaces["ws-1"] = empty_workspace("ws-1", ORG, AT)
    held, drift = directory, InMemoryDriftRecords()

    def lock(run: Run) -> ApplyLock:
        workspace = held.workspaces[run.workspace_id]
        taken = ApplyLock(workspace.id, ids.new(IdKind.LOCK), workspace.fence + 1, run.id)
        held.workspaces[run.workspace_id] = replace(
            workspace, fence=taken.fence, lock_id=taken.lock_id, lock_run_id=run.id, locked_at=AT
        )
        return taken

    return Units(
        lambda: InMemoryUnitOfWork(ledger, queue, directory=held, drift=drift),
        ledger,
        "ws-1",
        queue.reserve,
        lock,
    )


def _drift(units: Units, run_id: str, as_of: datetime, state: str = "drifted") -> Drift:
    return Drift(
        workspace_id=units.workspace_id,
        state=state,
        as_of=as_of,
        run_id=run_id,
        detected_at=as_of if state == "drifted" else None,
        cleared_at=None if state == "drifted" else as_of,
        body={"summary": {"adds": 1}},
    )


def test_a_failed_apply_releases_exactly_its_lock_and_hands_the_reservation_on(
    units: Units,
) -> None:
    # Given a run applying under its lock, and another run waiting for the workspace
    run = units.applying()
    lock = units.lock(run)
    units.reserve(units.create("run-2", RunStatus.QUEUED), "token-run-2")
    # When its apply fails without publishing state, releasing the lock it was granted
    with units.new() as uow:
        uow.runs.move(run, RunStatus.APPLY_FAILED, actor="runner:att-1", lock=lock)
        moved = uow.commit()
    # Then the lock is gone with the reservation, handed to the waiting run; the fence stays
    assert moved is not None
    assert moved.handoff is not None
    assert (moved.handoff.run_id, moved.handoff.token) == ("run-2", "token-run-2")
    workspace = units.workspace()
    assert (workspace.writer_run_id, workspace.lock_id, workspace.lock_run_id) == (
        "run-2",
        None,
        None,
    )
    assert workspace.fence == lock.fence


def test_a_failed_apply_that_published_state_keeps_the_reservation_and_lock(
    units: Units,
) -> None:
    # Given a run applying under its lock
    run = units.applying()
    lock = units.lock(run)
    # When its apply fails after publishing state
    with units.new() as uow:
        uow.runs.move(
            run, RunStatus.APPLY_FAILED, actor="runner:att-1", lock=lock, state_published=True
        )
        moved = uow.commit()
    # Then the run ended, still holding the workspace for recovery
    assert moved is not None
    assert moved.handoff is None
    assert moved.run.status is RunStatus.APPLY_FAILED
    workspace = units.workspace()
    assert (workspace.writer_run_id, workspace.lock_id) == ("run-1", lock.lock_id)


def test_a_result_with_a_stale_lock_is_refused_and_writes_nothing(units: Units) -> None:
    # Given a run applying under its lock
    run = units.applying()
    lock = units.lock(run)
    before = units.workspace()
    # When a result names a lock the workspace no longer holds (another lock ID)
    stale = replace(lock, lock_id="lock-stale")
    with units.new() as uow:
        uow.runs.move(run, RunStatus.SUCCEEDED, actor="runner:att-1", lock=stale)
        # Then the commit is refused as a stale fence
        with pytest.raises(StaleFence):
            uow.commit()
    # And nothing was written: the run still applies, the workspace is as it was
    with units.new() as uow:
        assert uow.runs.get(run.id).status is RunStatus.APPLYING
    assert units.workspace() == before


def test_a_drift_record_is_written_only_if_no_later_run_wrote_one(units: Units) -> None:
    # Given a drift record written by a run created later
    run = units.applying()
    with units.new() as uow:
        uow.drift.put(_drift(units, "run-9", LATER))
        uow.commit()
    # When an earlier run's success clears it in its final move
    with units.new() as uow:
        uow.drift.put(_drift(units, run.id, AT, state="clear"))
        uow.runs.move(run, RunStatus.SUCCEEDED, actor="runner:att-1")
        # Then the commit is refused as a stale finding
        with pytest.raises(StaleDriftFinding):
            uow.commit()
    # And nothing was written: the later record stands and the run still applies
    with units.new() as uow:
        held = uow.drift.get(units.workspace_id)
        assert uow.runs.get(run.id).status is RunStatus.APPLYING
    assert held is not None
    assert (held.run_id, held.state) == ("run-9", "drifted")
    # And a record as new as the one held is written with its run's move
    with units.new() as uow:
        uow.drift.put(_drift(units, run.id, LATER, state="clear"))
        uow.runs.move(run, RunStatus.SUCCEEDED, actor="runner:att-1")
        uow.commit()
        held = uow.drift.get(units.workspace_id)
    assert held is not None
    assert (held.run_id, held.state) == (run.id, "clear")
