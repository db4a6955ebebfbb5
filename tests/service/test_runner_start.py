"""A runner phase's start (``RunnerStart.start_runner``) and the apply's start
(``RunnerReports.apply_start``) over the in-memory unit of work: a phase starts once (a
retry replays it), its attempt, capabilities and sandbox slots are one commit, the apply
takes the workspace's lock with the next fence, a start that loses a race writes
nothing, the apply-start capability is redeemed once with the run's move, and an apply
that can never start ends the run. The paths through the table (its read ahead and
request counts, ECS task references, HTTP) stay on moto and end to end:
tests/integration/test_workflow_step_reads.py, test_sandbox_exits.py,
test_report_evidence.py, tests/e2e/test_runner_start_replay.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Never

import pytest

from runplane.domain.capabilities import Binding, Phase
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    ApplyStartRefused,
    CapabilityConsumed,
    NotWriter,
    RunEnded,
    SandboxCapacityExhausted,
    TransitionRejected,
)
from runplane.domain.intents import MovedRun
from runplane.domain.launch_controls import GLOBAL, Controls
from runplane.domain.parts import (
    ApplyRecord,
    ApplyRecordState,
    ApprovalState,
    AttemptBody,
    AttemptState,
    PlanEvidenceState,
    RunPart,
)
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.transitions import MAIN_PATH
from runplane.services.capabilities import Capabilities
from runplane.services.launch_controls import LaunchControls
from runplane.services.orchestration import Orchestration
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import InMemoryUnitOfWork
from tests.fake_uow_start import InMemoryStartRecords
from tests.fakes import no_read_ahead
from tests.fakes_operations import InMemoryLaunchControls
from tests.service.conftest import Tier

ACME, OTHER = "org-acme", "org-other"
PLAN_SHA = "ab" * 32
AT = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Start:
    """The run workflow's services over the tier's in-memory stores, with the
    capabilities a start mints (``records``) and the launch controls it checks."""

    tier: Tier
    orchestration: Orchestration
    records: InMemoryStartRecords
    controls: InMemoryLaunchControls
    # Something another writer does once, as the next commit begins.
    race: list[Callable[[], None]]
    # A new unit of work over the same stores, as the start's.
    units: Callable[[], InMemoryUnitOfWork]

    def run(
        self,
        status: RunStatus,
        *,
        org: str = ACME,
        run_id: str = "run-1",
        workspace: str = "",
        pinned: Mapping[str, object] | None = None,
    ) -> Run:
        """A plan-and-apply run of ``org``'s workspace moved to ``status``, holding the
        workspace's writer reservation with another run waiting; from approval on, its
        plan approved and its apply record pending. ``pinned``: more of its input."""
        tier, workspace = self.tier, workspace or f"ws-{org}"
        if workspace not in tier.directory.workspaces:
            tier.directory.workspaces[workspace] = Workspace(
                id=workspace,
                organization_id=org,
                name=workspace,
                created_at=AT,
                fence=0,
                writer_run_id=None,
                lock_id=None,
                lock_run_id=None,
                queue_length=0,
                current_state_version_id=f"sv-{workspace}",
            )
        ledger, now = tier.run_reader, tier.clock.now()
        ledger.create(
            Run(
                id=run_id,
                organization_id=org,
                workspace_id=workspace,
                kind=RunKind.PLAN_AND_APPLY,
                status=MAIN_PATH[0],
                version=1,
                created_at=now,
                updated_at=now,
                runner_release="runner-1",
            ),
            actor="user:ada",
            input={"configuration_artifact_id": f"art-config-{run_id}", **(pinned or {})},
        )
        updates: dict[RunStatus, dict[str, object]] = {
            RunStatus.PLAN_COMPLETE: {"plan_has_changes": True},
            RunStatus.AWAITING_APPROVAL: {"approval_expires_at": now},
        }
        for target in MAIN_PATH[1 : MAIN_PATH.index(status) + 1]:
            ledger.move(
                ledger.get_run(run_id), target, actor="workflow", run_updates=updates.get(target)
            )
        if MAIN_PATH.index(status) >= MAIN_PATH.index(RunStatus.AWAITING_APPROVAL):
            self._approved(run_id)
        tier.writer_queue.holders[workspace] = run_id
        tier.writer_queue.waiting[workspace] = [(f"{run_id}-next", f"tok-{run_id}-next")]
        return ledger.get_run(run_id)

    def _approved(self, run_id: str) -> None:
        ledger, now = self.tier.run_reader, self.tier.clock.now()
        plan = {
            "attempt_id": "att-plan",
            "plan_artifact_id": f"art-plan-{run_id}",
            "plan_sha256": PLAN_SHA,
            "plan_json_artifact_id": f"art-json-{run_id}",
            "plan_json_sha256": "cd" * 32,
            "has_changes": True,
        }
        approval = {
            "expires_at": now.isoformat(),
            "binding": {"plan_sha256": PLAN_SHA, "predecessor_state_version_id": None},
            "decision": "approve",
        }
        for name, state, body in (
            ("plan", PlanEvidenceState.COMMITTED, plan),
            ("approval", ApprovalState.APPROVED, approval),
            ("apply", ApplyRecordState.PENDING, ApplyRecord().to_body()),
        ):
            ledger.add_part(RunPart(run_id, name, state, body, None, now, now))

    def part(self, run_id: str, name: str) -> RunPart | None:
        return self.tier.run_reader.parts(run_id).get(name)

    def apply_start(
        self, run_id: str = "run-1", plan_sha256: str = PLAN_SHA, **more: str
    ) -> dict[str, str]:
        """The apply sandbox's start, as it presents it: its launch's handle and binding."""
        launched = next(
            request
            for request in reversed(self.tier.launcher.launched)
            if request.run_id == run_id and request.phase == "apply"
        )
        assert launched.apply_start is not None
        binding = Binding(run_id, launched.attempt_id, Phase.APPLY, launched.sandbox_id)
        request = {"plan_sha256": plan_sha256, **more}
        return self.orchestration.apply_start(launched.apply_start, binding, request)

    def held(self) -> tuple[object, ...]:
        """Everything a start may write, to compare before and after."""
        tier = self.tier
        return (
            tier.run_reader.saved(),
            dict(tier.directory.workspaces),
            dict(tier.writer_queue.holders),
            tier.sandboxes.saved(),
            self.records.saved(),
            list(tier.launcher.launched),
            list(tier.workflow.resumed),
        )


class _RacedUnit(InMemoryUnitOfWork):
    """A unit whose commit lets another writer act first (once)."""

    race: list[Callable[[], None]]

    def commit(self) -> MovedRun | None:
        while self.race:
            self.race.pop()()
        return super().commit()


@pytest.fixture
def start(tier: Tier) -> Start:
    records, controls = InMemoryStartRecords(), InMemoryLaunchControls()
    race: list[Callable[[], None]] = []

    def new_unit() -> InMemoryUnitOfWork:
        unit = _RacedUnit(
            tier.run_reader,
            tier.writer_queue,
            tier.sandboxes,
            directory=tier.directory,
            start=records,
        )
        unit.race = race
        return unit

    clock, ids = tier.clock, tier.ids
    orchestration = Orchestration(
        clock,
        ids,
        run_lifecycle(clock, ids),
        Capabilities(clock, ids, new_unit),
        tier.workflow,
        tier.launcher,
        control_plane_url="http://runplane.test",
        launch_controls=lambda: LaunchControls(
            clock, controls, region="us-east-1", policy_runtime="rego-1"
        ),
        policies=_no_policies,
        units=new_unit,
        reads_ahead=no_read_ahead,
    )
    return Start(tier, orchestration, records, controls, race, new_unit)


def _no_policies() -> Never:
    raise AssertionError("a start evaluates no policy")


def test_a_plan_phase_starts_once_and_a_retry_replays_it(start: Start) -> None:
    # Given a queued run holding its workspace
    run = start.run(RunStatus.QUEUED)
    # When its plan phase starts
    started = start.orchestration.start_runner(run.id, "plan", "tok-plan-1")
    # Then the run plans on the state its workspace held, with one launched sandbox
    now = start.tier.run_reader.get_run(run.id)
    assert (now.status, now.predecessor_sv_id) == (RunStatus.PLANNING, "sv-ws-org-acme")
    [launched] = start.tier.launcher.launched
    assert started == {"attempt_id": launched.attempt_id, "replayed": False}
    assert launched.inputs == ("art-config-run-1",)
    # And told the version it pinned, for its session's token to name
    assert launched.state_version == "sv-ws-org-acme"
    # And its attempt started in that sandbox, holding a slot in each scope, waiting
    # with the step's token
    attempt = start.part(run.id, "attempt#plan")
    assert attempt is not None
    body = AttemptBody.from_body(attempt.body)
    assert (attempt.state, attempt.token) == (AttemptState.STARTED, "tok-plan-1")
    assert (body.attempt_id, body.sandbox_ref) == (launched.attempt_id, "sandbox-1")
    assert set(body.slots) == {GLOBAL, ACME}
    assert start.tier.sandboxes.active == {GLOBAL: 1, ACME: 1}
    # And its bootstrap capability is stored, bound to the attempt (never its handle)
    [capability] = start.records.sessions.capabilities.values()
    assert capability.binding == Binding(run.id, body.attempt_id, Phase.PLAN, body.sandbox_id)
    assert launched.bootstrap not in repr(start.records.sessions.capabilities)

    # When the step is retried with a new token
    replayed = start.orchestration.start_runner(run.id, "plan", "tok-plan-2")
    # Then it replays the same attempt, stores the new token and starts nothing
    assert replayed == {"attempt_id": launched.attempt_id, "replayed": True}
    attempt = start.part(run.id, "attempt#plan")
    assert attempt is not None
    assert attempt.token == "tok-plan-2"
    assert len(start.tier.launcher.launched) == 1
    assert len(start.records.sessions.capabilities) == 1
    assert start.tier.sandboxes.active == {GLOBAL: 1, ACME: 1}


def test_an_apply_phase_takes_the_apply_lock_with_the_next_fence(start: Start) -> None:
    # Given an approved run holding its workspace
    run = start.run(RunStatus.AWAITING_APPROVAL)
    # When its apply phase starts
    start.orchestration.start_runner(run.id, "apply", "tok-apply")
    # Then the workspace is locked for it at the next fence
    workspace = start.tier.directory.workspaces[run.workspace_id]
    assert (workspace.lock_run_id, workspace.fence) == (run.id, 1)
    # And its attempt and apply record name that lock and fence; the run still awaits
    # its start
    attempt, record = start.part(run.id, "attempt#apply"), start.part(run.id, "apply")
    assert attempt is not None
    assert record is not None
    body = AttemptBody.from_body(attempt.body)
    assert (body.lock_id, body.fence) == (workspace.lock_id, 1)
    assert record.state == ApplyRecordState.STARTING
    assert (record.body["lock_id"], record.body["fence"]) == (workspace.lock_id, 1)
    assert start.tier.run_reader.get_run(run.id).status is RunStatus.AWAITING_APPROVAL
    # And it was launched with its plan and an apply-start handle, both capabilities stored
    [launched] = start.tier.launcher.launched
    assert launched.inputs == ("art-config-run-1", "art-plan-run-1")
    assert launched.apply_start is not None
    assert len(start.records.sessions.capabilities) == 2


def test_an_apply_start_whose_fence_moved_takes_the_next_one(start: Start) -> None:
    # Given an approved run, and another writer moving the workspace's fence as the
    # start commits
    run = start.run(RunStatus.AWAITING_APPROVAL)
    directory = start.tier.directory

    def move_fence() -> None:
        held = directory.workspaces[run.workspace_id]
        directory.workspaces[run.workspace_id] = replace(held, fence=held.fence + 1)

    start.race.append(move_fence)
    # When its apply phase starts
    start.orchestration.start_runner(run.id, "apply", "tok-apply")
    # Then it took the lock with the fence after the one that moved
    workspace = directory.workspaces[run.workspace_id]
    assert (workspace.lock_run_id, workspace.fence) == (run.id, 2)
    attempt = start.part(run.id, "attempt#apply")
    assert attempt is not None
    assert AttemptBody.from_body(attempt.body).fence == 2
    assert len(start.tier.launcher.launched) == 1


@pytest.mark.parametrize(
    ("phase", "status", "error"),
    [
        # The move to planning finds the run moved on.
        ("plan", RunStatus.QUEUED, TransitionRejected),
        # The apply lock is no longer the run's to take: the cancel released the writer.
        ("apply", RunStatus.AWAITING_APPROVAL, NotWriter),
    ],
)
def test_a_start_racing_a_cancel_writes_nothing(
    start: Start, phase: str, status: RunStatus, error: type[Exception]
) -> None:
    # Given a run about to start its phase, canceled as the start commits
    run = start.run(status)
    units = start.orchestration.start._units

    def cancel() -> None:
        with units() as uow:
            uow.runs.move(start.tier.run_reader.get_run(run.id), RunStatus.CANCELED, actor="ada")
            uow.commit()

    start.race.append(cancel)
    # When the phase starts
    with pytest.raises(error):
        start.orchestration.start_runner(run.id, phase, f"tok-{phase}")
    # Then it was refused: the run stays canceled with no attempt, no capability, no
    # slot, no lock, and nothing was launched
    assert start.tier.run_reader.get_run(run.id).status is RunStatus.CANCELED
    assert start.part(run.id, f"attempt#{phase}") is None
    assert start.records.sessions.capabilities == {}
    assert start.tier.sandboxes.active == {}
    assert start.tier.directory.workspaces[run.workspace_id].lock_id is None
    assert start.tier.launcher.launched == []


def test_a_full_scope_refuses_the_start_and_writes_nothing(start: Start) -> None:
    # Given an organization allowed one sandbox, already running one
    start.controls.put(ACME, Controls(max_sandboxes=1), by="ada", at=AT)
    start.tier.sandboxes.active[ACME] = 1
    run = start.run(RunStatus.QUEUED)
    before = start.held()
    # When a phase of its run starts
    with pytest.raises(SandboxCapacityExhausted) as refused:
        start.orchestration.start_runner(run.id, "plan", "tok-plan")
    # Then it is refused as retryable, and nothing was written or launched (the
    # workflow retries later)
    assert refused.value.http_status == 503
    assert "limit of 1 concurrent sandboxes" in str(refused.value)
    assert start.held() == before


def test_a_denied_launch_ends_the_run_and_hands_the_workspace_on(start: Start) -> None:
    # Given an organization whose launches are switched off
    start.controls.put(ACME, Controls(launches_enabled=False), by="ada", at=AT)
    run = start.run(RunStatus.QUEUED)
    # When its run's plan phase would start
    with pytest.raises(RunEnded):
        start.orchestration.start_runner(run.id, "plan", "tok-plan")
    # Then the run is canceled, saying why, and the waiting run holds the workspace
    now = start.tier.run_reader.get_run(run.id)
    assert now.status is RunStatus.CANCELED
    assert now.status_reason is not None
    assert now.status_reason.startswith("LAUNCH_DENIED")
    assert start.tier.writer_queue.holders[run.workspace_id] == "run-1-next"
    assert start.tier.workflow.resumed[-1][0] == "tok-run-1-next"
    assert start.tier.launcher.launched == []


def test_a_denied_apply_launch_fails_the_run_and_its_apply_record(start: Start) -> None:
    # Given an approved run, and launches switched off before its apply starts
    run = start.run(RunStatus.AWAITING_APPROVAL)
    start.controls.put(ACME, Controls(launches_enabled=False), by="ada", at=AT)
    # When the workflow tries to start the apply
    with pytest.raises(RunEnded):
        start.orchestration.start_runner(run.id, "apply", "tok-apply")
    # Then nothing started: the run and its apply record both failed, saying why
    assert start.tier.run_reader.get_run(run.id).status is RunStatus.APPLY_FAILED
    record = start.part(run.id, "apply")
    assert record is not None
    assert record.state == ApplyRecordState.FAILED
    assert str(record.body["reason"]).startswith("LAUNCH_DENIED")
    assert start.tier.launcher.launched == []


def test_an_apply_start_whose_launch_was_never_recorded_is_uncertain(start: Start) -> None:
    # Given an approved run whose apply attempt was recorded, its launch never was
    run = start.run(RunStatus.AWAITING_APPROVAL)
    start.orchestration.start_runner(run.id, "apply", "tok-apply")
    attempt = start.part(run.id, "attempt#apply")
    assert attempt is not None
    start.tier.run_reader.set_part(replace(attempt, state=AttemptState.LAUNCHING))
    # When the start step is retried and finds only partial evidence
    with pytest.raises(RunEnded):
        start.orchestration.start_runner(run.id, "apply", "tok-apply-2")
    # Then the run fails closed as uncertain, keeping the workspace, and so does its
    # apply record; no second sandbox was launched
    assert start.tier.run_reader.get_run(run.id).status is RunStatus.APPLY_START_UNCERTAIN
    record = start.part(run.id, "apply")
    assert record is not None
    assert record.state == ApplyRecordState.UNCERTAIN
    assert start.tier.writer_queue.holders[run.workspace_id] == run.id
    assert len(start.tier.launcher.launched) == 1


def test_a_start_whose_launch_was_never_recorded_fails_closed(start: Start) -> None:
    # Given a run whose plan attempt was recorded launching, its launch never recorded
    run = start.run(RunStatus.PLANNING)
    now = start.tier.clock.now()
    body = AttemptBody("att-1", "sbx-1", "plan", now.isoformat(), (ACME,)).to_body()
    start.tier.run_reader.add_part(
        RunPart(run.id, "attempt#plan", AttemptState.LAUNCHING, body, "tok-1", now, now)
    )
    start.tier.sandboxes.active[ACME] = 1
    # When the start step is retried
    with pytest.raises(RunEnded):
        start.orchestration.start_runner(run.id, "plan", "tok-2")
    # Then the plan failed, the attempt is abandoned (its slot given back) and the
    # workspace handed on; nothing was launched
    assert start.tier.run_reader.get_run(run.id).status is RunStatus.PLAN_FAILED
    attempt = start.part(run.id, "attempt#plan")
    assert attempt is not None
    assert attempt.state == AttemptState.ABANDONED
    assert start.tier.sandboxes.active[ACME] == 0
    assert start.tier.writer_queue.holders[run.workspace_id] == "run-1-next"
    assert start.tier.launcher.launched == []


def test_an_apply_start_is_redeemed_once_with_the_move_to_applying(start: Start) -> None:
    # Given an approved run whose apply sandbox was launched
    run = start.run(RunStatus.AWAITING_APPROVAL)
    start.orchestration.start_runner(run.id, "apply", "tok-apply")
    lock = start.tier.directory.workspaces[run.workspace_id].lock_id
    # When the sandbox starts its apply with the approved plan
    result = start.apply_start(manifest_sha256="ef" * 32)
    # Then it gets its lock and fence, the run applies and its apply record started
    assert result == {"lock_id": lock, "fence": "1"}
    assert start.tier.run_reader.get_run(run.id).status is RunStatus.APPLYING
    record = start.part(run.id, "apply")
    assert record is not None
    assert record.state == ApplyRecordState.STARTED
    before = start.held()
    # When it presents the identical request again
    again = start.apply_start(manifest_sha256="ef" * 32)
    # Then it gets the stored result and nothing is written
    assert again == result
    assert start.held() == before
    # And a changed request is refused, writing nothing
    with pytest.raises(CapabilityConsumed, match="different request"):
        start.apply_start(manifest_sha256="00" * 32)
    assert start.held() == before


def test_an_apply_start_racing_its_identical_twin_gets_the_stored_result(start: Start) -> None:
    # Given an approved run whose apply sandbox was launched, and the identical start
    # committing first as this one commits
    run = start.run(RunStatus.AWAITING_APPROVAL)
    start.orchestration.start_runner(run.id, "apply", "tok-apply")
    twin: list[dict[str, str]] = []
    start.race.append(lambda: twin.append(start.apply_start()))
    # When the start commits
    result = start.apply_start()
    # Then it gets what the twin stored, and the run applies once
    assert result == twin[0]
    assert start.tier.run_reader.get_run(run.id).status is RunStatus.APPLYING
    moves = [e.details.get("to") for e in start.tier.run_reader.audit if e.subject_id == run.id]
    assert moves.count("applying") == 1


def test_an_unstartable_apply_ends_the_run_and_releases_the_writer(start: Start) -> None:
    # Given an approved run whose apply sandbox was launched
    run = start.run(RunStatus.AWAITING_APPROVAL)
    start.orchestration.start_runner(run.id, "apply", "tok-apply")
    # When the sandbox presents another plan than the approved one
    with pytest.raises(ApplyStartRefused) as refused:
        start.apply_start(plan_sha256="00" * 32)
    # Then the run failed its apply, saying why
    assert refused.value.status == "apply_failed"
    now = start.tier.run_reader.get_run(run.id)
    assert now.status is RunStatus.APPLY_FAILED
    assert now.status_reason is not None
    assert "not the approved plan" in now.status_reason
    # And its attempt closed failed, its slots given back, its apply record failed
    attempt, record = start.part(run.id, "attempt#apply"), start.part(run.id, "apply")
    assert attempt is not None
    assert record is not None
    assert (attempt.state, attempt.token) == (AttemptState.FAILED, None)
    assert start.tier.sandboxes.active == {GLOBAL: 0, ACME: 0}
    assert record.state == ApplyRecordState.FAILED
    # And the writer and its lock were released, handed to the waiting run
    workspace = start.tier.directory.workspaces[run.workspace_id]
    assert workspace.lock_id is None
    assert start.tier.writer_queue.holders[run.workspace_id] == "run-1-next"
    # And the workflow's wait for the apply ended
    assert ("tok-apply", {"outcome": "apply_failed"}) in start.tier.workflow.resumed
    before = start.held()
    # When the same start is presented again
    with pytest.raises(ApplyStartRefused):
        start.apply_start(plan_sha256="00" * 32)
    # Then it is refused again and nothing more is written
    assert start.held() == before


def test_two_organizations_start_within_their_own_limits(start: Start) -> None:
    # Given two organizations allowed one sandbox each, the first running one
    for org in (ACME, OTHER):
        start.controls.put(org, Controls(max_sandboxes=1), by="ada", at=AT)
    start.tier.sandboxes.active[ACME] = 1
    acme = start.run(RunStatus.QUEUED, org=ACME, run_id="run-acme")
    other = start.run(RunStatus.QUEUED, org=OTHER, run_id="run-other")
    # When a run of each starts its plan
    with pytest.raises(SandboxCapacityExhausted):
        start.orchestration.start_runner(acme.id, "plan", "tok-acme")
    start.orchestration.start_runner(other.id, "plan", "tok-other")
    # Then only the other organization's run plans, in its own slot
    assert start.tier.run_reader.get_run(acme.id).status is RunStatus.QUEUED
    assert start.tier.run_reader.get_run(other.id).status is RunStatus.PLANNING
    assert start.tier.sandboxes.active == {ACME: 1, GLOBAL: 1, OTHER: 1}
    # And its capability is bound to its own run, of its organization
    [capability] = start.records.sessions.capabilities.values()
    assert (capability.organization_id, capability.binding.run_id) == (OTHER, other.id)
