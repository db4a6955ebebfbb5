"""A runner phase's start through the unit of work, on DynamoDB (moto) and in memory: a
capability minted with the unit and redeemed once, its stored result given to whoever
presents it again; the sandbox slots a launch takes within each scope's limit; the
launch's reference recorded once; and the apply lock taken with the next fence only by
the writer, only while the fence has not moved. Every refused commit writes nothing. The
same cases run against both implementations, so the fake cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.capabilities import (
    AlreadyRedeemed,
    Binding,
    CapabilityKind,
    CapabilityRecord,
    Phase,
)
from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.errors import (
    CapabilityExpired,
    CapabilityWrongAttempt,
    CapabilityWrongPhase,
    CapabilityWrongSandbox,
    ConcurrentChange,
    NotWriter,
    SandboxCapacityExhausted,
    UnknownCapability,
    WorkspaceAlreadyLocked,
)
from runplane.domain.launch_controls import Clearance
from runplane.domain.parts import AttemptState
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.sandbox_exits import SandboxRef
from runplane.services.repositories import RunLedger
from runplane.services.unit_of_work import UnitOfWork
from runplane.store import sandbox_refs, sandbox_slots
from runplane.store.capabilities import DynamoRunnerSessions
from runplane.store.runs import RunRepository
from runplane.store.unit_of_work import DynamoUnitOfWork
from runplane.store.writer import DynamoWriterAuthority
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import (
    InMemorySandboxes,
    InMemoryUnitOfWork,
    InMemoryWriterQueue,
    empty_workspace,
)
from tests.fake_uow_start import InMemoryStartRecords
from tests.fakes import FakeClock, InMemoryRunLedger, InMemoryWorkspaces, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG = "org-acme"
HASH = "a" * 64
BINDING = Binding("run-1", "att-1", Phase.APPLY, "sbx-1")
REQUEST_DIGEST = "d" * 64
PHASE_LIMIT = timedelta(hours=4)


@dataclass
class Units:
    new: Callable[[], UnitOfWork]
    ledger: RunLedger
    clock: FakeClock
    workspace_id: str
    # Reserve the workspace writer for a run.
    reserve: Callable[[Run], None]
    # Another writer takes and releases the apply lock: the fence moves on.
    move_fence: Callable[[Run], None]
    # What the store holds: a capability's record, a scope's running sandboxes, a
    # launch's reference.
    capability: Callable[[str], CapabilityRecord | None]
    running: Callable[[str], int]
    reference: Callable[[str], SandboxRef | None]

    def run(self, run_id: str = "run-1") -> Run:
        """A plan-and-apply run awaiting approval (its apply about to start)."""
        run = Run(
            id=run_id,
            organization_id=ORG,
            workspace_id=self.workspace_id,
            kind=RunKind.PLAN_AND_APPLY,
            status=RunStatus.AWAITING_APPROVAL,
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

    def mint(self, kind: CapabilityKind = CapabilityKind.APPLY_START, minutes: int = 30) -> None:
        record = CapabilityRecord(
            "cap-1", kind, ORG, BINDING, ("art-1",), self.clock.now() + timedelta(minutes=minutes)
        )
        with self.new() as uow:
            uow.capabilities.mint(HASH, record, self.clock.now())
            uow.commit()

    def redeem(self, binding: Binding = BINDING, result: dict[str, str] | None = None) -> None:
        with self.new() as uow:
            uow.capabilities.redeem(
                HASH,
                CapabilityKind.APPLY_START,
                binding,
                self.clock.now(),
                request_digest=REQUEST_DIGEST,
                result=result or {"fence": "3"},
            )
            uow.commit()


@pytest.fixture(params=["dynamodb", "memory"])
def units(request: pytest.FixtureRequest) -> Units:
    clock, ids = FakeClock(), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        workspace: Workspace = request.getfixturevalue("workspace")
        lifecycle = run_lifecycle(clock, ids)
        writer = DynamoWriterAuthority(clock, ids)

        def take_and_release(run: Run) -> None:
            writer.release_apply_lock(writer.acquire_apply_lock(run)).commit()

        return Units(
            lambda: DynamoUnitOfWork(RunRepository(clock, ids), lifecycle.mover.move),
            lifecycle.ledger,
            clock,
            workspace.id,
            lambda run: (writer.reserve(run, f"token-{run.id}"), None)[1],
            take_and_release,
            DynamoRunnerSessions().capability,
            sandbox_slots.active,
            sandbox_refs.find,
        )
    ledger, queue, directory = (
        InMemoryRunLedger(clock, ids),
        InMemoryWriterQueue(),
        InMemoryWorkspaces(),
    )
    directory.workspaces["ws-1"] = empty_workspace("ws-1", ORG, AT)
    sandboxes, records = InMemorySandboxes(), InMemoryStartRecords()

    def reserve(run: Run) -> None:
        queue.holders.setdefault(run.workspace_id, run.id)

    def move_fence(run: Run) -> None:
        held = directory.workspaces[run.workspace_id]
        directory.workspaces[run.workspace_id] = replace(held, fence=held.fence + 1)

    return Units(
        lambda: InMemoryUnitOfWork(ledger, queue, sandboxes, directory=directory, start=records),
        ledger,
        clock,
        "ws-1",
        reserve,
        move_fence,
        records.sessions.capability,
        lambda scope: sandboxes.active.get(scope, 0),
        records.refs.find,
    )


def test_a_capability_exists_once_its_unit_commits(units: Units) -> None:
    # Given a capability intended on a unit left without committing
    record = CapabilityRecord(
        "cap-1", CapabilityKind.BOOTSTRAP, ORG, BINDING, ("art-1",), AT + timedelta(minutes=15)
    )
    with units.new() as uow:
        uow.capabilities.mint(HASH, record, AT)
    # Then there is none
    assert units.capability(HASH) is None
    # When it is minted in a unit that commits
    with units.new() as uow:
        uow.capabilities.mint(HASH, record, AT)
        uow.commit()
    # Then it is stored as minted
    assert units.capability(HASH) == record


def test_a_capability_is_redeemed_once_and_its_result_is_stored(units: Units) -> None:
    # Given an apply-start capability
    units.mint()
    # When it is redeemed for a request, storing its result
    units.redeem(result={"lock_id": "lock-1", "fence": "3"})
    # Then another redemption is refused, carrying what the first stored
    with pytest.raises(AlreadyRedeemed) as again:
        units.redeem(result={"lock_id": "lock-9", "fence": "9"})
    assert again.value.jti == "cap-1"
    assert again.value.request_digest == REQUEST_DIGEST
    assert again.value.result == {"lock_id": "lock-1", "fence": "3"}


@pytest.mark.parametrize(
    ("binding", "error"),
    [
        (replace(BINDING, attempt_id="att-9"), CapabilityWrongAttempt),
        (replace(BINDING, phase=Phase.PLAN), CapabilityWrongPhase),
        (replace(BINDING, sandbox_id="sbx-9"), CapabilityWrongSandbox),
    ],
)
def test_a_redemption_for_another_binding_is_refused_and_writes_nothing(
    units: Units, binding: Binding, error: type[Exception]
) -> None:
    # Given an apply-start capability
    units.mint()
    # When it is presented for another binding
    with pytest.raises(error):
        units.redeem(binding)
    # Then it was not redeemed: its own binding redeems it
    units.redeem()


def test_an_unknown_capability_or_one_of_another_kind_is_refused(
    units: Units,
) -> None:
    # Given nothing minted, then a bootstrap capability
    with pytest.raises(UnknownCapability):
        units.redeem()
    units.mint(CapabilityKind.BOOTSTRAP)
    # When it is redeemed as an apply start
    with pytest.raises(UnknownCapability):
        units.redeem()


def test_an_expired_capability_is_refused(units: Units) -> None:
    # Given an apply-start capability valid for a minute
    units.mint(minutes=1)
    # When it is presented after its validity
    units.clock.advance(timedelta(minutes=2))
    # Then it is refused as expired
    with pytest.raises(CapabilityExpired):
        units.redeem()


def test_a_redemption_committed_with_a_refused_intent_writes_nothing(units: Units) -> None:
    # Given an apply-start capability and a run that has its attempt already
    units.mint()
    run = units.run()
    with units.new() as uow:
        uow.parts.put(run.id, "attempt#apply", state=AttemptState.LAUNCHING, body={}, now=AT)
        uow.commit()
    # When its redemption is committed with a second put of that attempt
    with units.new() as uow:
        uow.capabilities.redeem(
            HASH, CapabilityKind.APPLY_START, BINDING, AT, request_digest=REQUEST_DIGEST
        )
        uow.parts.put(run.id, "attempt#apply", state=AttemptState.LAUNCHING, body={}, now=AT)
        # Then the commit is refused
        with pytest.raises(ConcurrentChange):
            uow.commit()
    # And the capability was not redeemed
    units.redeem()


def test_slots_are_taken_within_each_scope_limit_or_not_at_all(units: Units) -> None:
    # Given a platform scope of one sandbox, an organization's of two, one without limit
    clearance = Clearance(
        {"GLOBAL": ("the platform", 1), ORG: ("the organization", 2), "free": ("free", None)}
    )
    # When a sandbox takes its slots
    with units.new() as uow:
        assert uow.sandboxes.take_slots(clearance) == ["GLOBAL", ORG, "free"]
        uow.commit()
    # Then each scope counts it
    assert [units.running(scope) for scope in ("GLOBAL", ORG, "free")] == [1, 1, 1]
    # When a second sandbox takes them while the platform's is full
    with units.new() as uow:
        uow.sandboxes.take_slots(clearance)
        # Then it is refused, naming the full scope
        with pytest.raises(SandboxCapacityExhausted, match="the platform"):
            uow.commit()
    # And it took no slot anywhere
    assert [units.running(scope) for scope in ("GLOBAL", ORG, "free")] == [1, 1, 1]


def test_a_launch_reference_is_recorded_once(units: Units) -> None:
    # Given a launch's reference recorded
    ref = SandboxRef("arn:aws:ecs:task/1", "run-1", Phase.PLAN, "att-1", "sbx-1")
    with units.new() as uow:
        uow.sandboxes.record(ref, AT, PHASE_LIMIT)
        uow.commit()
    assert units.reference(ref.reference) == ref
    # When the same reference is recorded for another attempt
    with units.new() as uow:
        uow.sandboxes.record(replace(ref, attempt_id="att-2"), AT, PHASE_LIMIT)
        # Then it is refused and the first record stands
        with pytest.raises(ConcurrentChange):
            uow.commit()
    assert units.reference(ref.reference) == ref


def _next_lock(units: Units, run: Run, lock_id: str = "lock-1") -> ApplyLock:
    return ApplyLock(units.workspace_id, lock_id, units.workspace().fence + 1, run.id)


def test_the_writer_takes_the_apply_lock_with_the_next_fence(units: Units) -> None:
    # Given a run holding the workspace's writer reservation
    run = units.run()
    units.reserve(run)
    fence = units.workspace().fence
    # When it takes the apply lock with the next fence
    lock = _next_lock(units, run)
    with units.new() as uow:
        uow.writer.take_apply_lock(lock, AT)
        uow.commit()
    # Then the workspace is locked for it, at that fence
    workspace = units.workspace()
    assert (workspace.lock_id, workspace.lock_run_id, workspace.fence) == (
        "lock-1",
        run.id,
        fence + 1,
    )
    # And a second take is refused: the workspace is locked
    with units.new() as uow:
        uow.writer.take_apply_lock(replace(lock, lock_id="lock-2", fence=fence + 2), AT)
        with pytest.raises(WorkspaceAlreadyLocked):
            uow.commit()
    assert units.workspace() == workspace


def test_a_take_after_the_fence_moved_is_refused_and_writes_nothing(units: Units) -> None:
    # Given the writer's next lock, read before another writer moved the fence
    run = units.run()
    units.reserve(run)
    lock = _next_lock(units, run)
    units.move_fence(run)
    before = units.workspace()
    # When it takes that lock
    with units.new() as uow:
        uow.writer.take_apply_lock(lock, AT)
        # Then it is refused as a concurrent change
        with pytest.raises(ConcurrentChange):
            uow.commit()
    # And nothing was written
    assert units.workspace() == before


def test_only_the_writer_takes_the_apply_lock(units: Units) -> None:
    # Given a run that does not hold the writer reservation
    run = units.run()
    before = units.workspace()
    # When it takes the apply lock
    with units.new() as uow:
        uow.writer.take_apply_lock(_next_lock(units, run), AT)
        # Then it is refused: it is not the writer
        with pytest.raises(NotWriter):
            uow.commit()
    assert units.workspace() == before
