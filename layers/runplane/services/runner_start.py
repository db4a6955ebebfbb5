"""Starting a runner phase: record the attempt, mint its capabilities, launch it.

A retried start never launches a second sandbox (see ``_replay_start``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from runplane.adapters.launchers import LaunchRequest
from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    LaunchDenied,
    RunEnded,
    TooMuchContention,
)
from runplane.domain.ids import IdKind
from runplane.domain.launch_controls import Clearance
from runplane.domain.parts import (
    ApplyRecord,
    ApplyRecordState,
    AttemptBody,
    AttemptState,
    PlanEvidence,
    RunInput,
    RunPart,
    required_part,
)
from runplane.domain.run_credentials import needs_credentials
from runplane.domain.run_scope import RunScope
from runplane.domain.sandbox_exits import SandboxRef, is_task_reference
from runplane.services.attempts import attempt_part
from runplane.services.capabilities import Minted
from runplane.services.unit_of_work import UnitOfWork
from runplane.services.workflow_base import WORKFLOW, S, WorkflowService, committed_move
from runplane.services.workflow_base import heartbeat_interval as _heartbeat_interval

# How many times a start takes the apply lock with the next fence when another writer
# moved it first.
MAX_FENCE_TRIES = 8


class RunnerStart(WorkflowService):
    """The workflow task that launches a runner sandbox for a phase."""

    def start_runner(
        self, run_id: str, phase: str, token: str, scope: RunScope | None = None
    ) -> dict[str, Any]:
        """Start a runner phase: record the attempt with the wait's token, mint its
        capabilities, launch the sandbox. A retry of the same phase stores the new
        token and does not start a second sandbox. With the run's ``scope``, the run
        and its parts, its workspace and its launch controls are one read."""
        stage = Phase(phase)
        # The run, its attempt and the inputs a start needs, in one consistent read.
        needed = [attempt_part(stage), "input", *(["plan"] if stage is Phase.APPLY else [])]
        controls = self._launch_controls.scopes(scope.organization_id) if scope else []
        with self._reading_ahead(run_id, scope, needed, workspace=True, control_scopes=controls):
            return self._start(run_id, stage, needed, token)

    def _start(self, run_id: str, stage: Phase, needed: list[str], token: str) -> dict[str, Any]:
        with self._units() as uow:
            run, parts = uow.runs.with_parts(run_id, needed)
            if run.status.is_terminal:
                raise RunEnded(run.id, run.status)
            existing = parts[attempt_part(stage)]
            if existing is not None:
                return self._replay_start(uow, run, stage, existing, token)
            clearance = self._check_launch(uow, run, stage)
            now = self._clock.now()
            snapshot = required_part(parts, run.id, "input").body
            attempt_id = self._ids.new(IdKind.ATTEMPT)
            sandbox_id = self._ids.new(IdKind.SANDBOX)
            binding = Binding(run.id, attempt_id, stage, sandbox_id)
            inputs = [snapshot["configuration_artifact_id"]]
            if snapshot.get("variables_artifact_id"):
                inputs.append(snapshot["variables_artifact_id"])
            if stage is Phase.APPLY:
                plan = PlanEvidence.from_body(required_part(parts, run.id, "plan").body)
                inputs.append(plan.plan_artifact_id)
            attempt_body = AttemptBody(attempt_id, sandbox_id, stage.value, now.isoformat())
            decisions = RunInput.from_body(snapshot).credentials.decisions
            credentials = needs_credentials(decisions, stage)
            launch = _Launch(
                run, token, now, binding, attempt_body, clearance, tuple(inputs), credentials
            )
            if stage is Phase.PLAN:
                bootstrap, attempt_body, pinned = self._start_plan(uow, launch)
                apply_start = None
        if stage is Phase.APPLY:
            bootstrap, apply_start, attempt_body = self._start_apply(launch)
            pinned = run.predecessor_sv_id
        reference = self._launcher.launch(
            LaunchRequest(
                run_id=run.id,
                attempt_id=attempt_id,
                phase=stage.value,
                sandbox_id=sandbox_id,
                control_plane_url=self._url,
                bootstrap=bootstrap.bootstrap.handle,
                apply_start=apply_start.handle if apply_start else None,
                credentials=bootstrap.credentials.handle if bootstrap.credentials else None,
                heartbeat_seconds=_heartbeat_interval(self._timing.runner_heartbeat),
                inputs=launch.inputs,
                state_version=pinned,
            )
        )
        recorded_at = self._clock.now()
        with self._units() as uow:
            uow.parts.change(
                run.id,
                attempt_part(stage),
                expected_state=AttemptState.LAUNCHING,
                state=AttemptState.STARTED,
                body=replace(attempt_body, sandbox_ref=reference).to_body(),
                now=recorded_at,
            )
            if is_task_reference(reference):
                # ECS reports the task's stop by its ARN alone: record whose it is, with
                # the launch (services/sandbox_exits.py).
                launched = SandboxRef(reference, run.id, stage, attempt_id, sandbox_id)
                uow.sandboxes.record(launched, recorded_at, self._timing.runner_phase)
            uow.commit()
        return {"attempt_id": attempt_id, "replayed": False}

    def _launching(self, uow: UnitOfWork, launch: _Launch) -> tuple[_Handles, AttemptBody]:
        """Intend on ``uow`` the sandbox's bootstrap capability and its slot in each
        cleared scope: created in the attempt's own commit, so none of them exists
        unless the attempt does. A full scope refuses the whole start with
        ``SandboxCapacityExhausted``, which the workflow retries with backoff: nothing
        is written until a slot is free. Returns the capability and the attempt's body
        naming the slots."""
        bootstrap = self._capabilities.minting(
            uow,
            CapabilityKind.BOOTSTRAP,
            launch.binding,
            lifetime=self._timing.bootstrap_lifetime,
            organization_id=launch.run.organization_id,
            inputs=launch.inputs,
        )
        credentials = None
        if launch.credentials:
            # Redeemed once by the runner, with its session, for the phase's credentials.
            credentials = self._capabilities.minting(
                uow,
                CapabilityKind.CREDENTIALS,
                launch.binding,
                lifetime=self._timing.runner_phase,
                organization_id=launch.run.organization_id,
            )
        slots = uow.sandboxes.take_slots(launch.clearance)
        return _Handles(bootstrap, credentials), replace(launch.attempt, slots=tuple(slots))

    def _start_plan(
        self, uow: UnitOfWork, launch: _Launch
    ) -> tuple[_Handles, AttemptBody, str | None]:
        """Record the plan attempt with its capability and slots, and move the run to
        ``planning`` pinned to the current state: one commit. Returns the capability,
        the attempt's body and the state version pinned."""
        run = launch.run
        pinned = uow.writer.workspace(run.workspace_id).current_state_version_id
        bootstrap, body = self._launching(uow, launch)
        uow.parts.put(
            run.id,
            attempt_part(Phase.PLAN),
            state=AttemptState.LAUNCHING,
            body=body.to_body(),
            now=launch.now,
            token=launch.token,
        )
        uow.runs.move(run, S.PLANNING, actor=WORKFLOW, run_updates={"predecessor_sv_id": pinned})
        uow.commit()
        return bootstrap, body, pinned

    def _start_apply(self, launch: _Launch) -> tuple[_Handles, Minted, AttemptBody]:
        """Take the apply lock with the next fence, record the attempt with its apply
        record, slots and capabilities: one commit, taken again with the next fence if
        another writer moved it first. Returns the bootstrap and apply-start
        capabilities and the attempt's body (naming the lock and fence)."""
        run = launch.run
        for _ in range(MAX_FENCE_TRIES):
            with self._units() as uow:
                bootstrap, body = self._launching(uow, launch)
                workspace = uow.writer.workspace(run.workspace_id)
                lock = held_apply_lock(workspace, run.id)
                taking = lock is None
                if lock is None:
                    lock = ApplyLock(
                        workspace.id, self._ids.new(IdKind.LOCK), workspace.fence + 1, run.id
                    )
                    uow.writer.take_apply_lock(lock, self._clock.now())
                body = replace(body, lock_id=lock.lock_id, fence=lock.fence)
                minted_apply = self._capabilities.minting(
                    uow,
                    CapabilityKind.APPLY_START,
                    launch.binding,
                    lifetime=self._timing.apply_start_lifetime,
                    organization_id=run.organization_id,
                )
                record = ApplyRecord(None, launch.binding.attempt_id, lock.lock_id, lock.fence)
                uow.parts.put(
                    run.id,
                    attempt_part(Phase.APPLY),
                    state=AttemptState.LAUNCHING,
                    body=body.to_body(),
                    now=launch.now,
                    token=launch.token,
                )
                uow.parts.change(
                    run.id,
                    "apply",
                    expected_state=ApplyRecordState.PENDING,
                    state=ApplyRecordState.STARTING,
                    body=record.to_body(),
                    now=launch.now,
                )
                try:
                    uow.commit()
                except ConcurrentChange:
                    # Another writer moved the fence first: take the next one. Any other
                    # refusal (a concurrent start of this attempt) is the caller's.
                    if taking and self._fence_moved(lock):
                        continue
                    raise
            return bootstrap, minted_apply, body
        raise TooMuchContention(f"workspace {run.workspace_id}: the fence kept moving")

    def _fence_moved(self, lock: ApplyLock) -> bool:
        """Whether the workspace's fence is no longer the one ``lock`` was taken after."""
        with self._units() as uow:
            return uow.writer.workspace(lock.workspace_id).fence != lock.fence - 1

    def _replay_start(
        self, uow: UnitOfWork, run: Run, stage: Phase, attempt: RunPart, token: str
    ) -> dict[str, Any]:
        """A retried start step: complete from the attempt's evidence, never start twice.

        A started sandbox keeps running and will resume the new token; a
        finished one's outcome resumes it now. An attempt whose launch was never
        recorded is partial evidence: the start fails closed.
        """
        now = self._clock.now()
        replayed = {"attempt_id": AttemptBody.from_body(attempt.body).attempt_id, "replayed": True}
        if attempt.state == AttemptState.STARTED:
            uow.parts.change(
                run.id,
                attempt_part(stage),
                expected_state=AttemptState.STARTED,
                token=token,
                now=now,
            )
            uow.commit()
            return replayed
        if attempt.state in {AttemptState.SUCCEEDED, AttemptState.FAILED}:
            planned = stage is Phase.PLAN and attempt.state == AttemptState.SUCCEEDED
            outcome = S.PLAN_COMPLETE.value if planned else run.status.value
            self._workflow.resume(token, {"outcome": outcome})
            return replayed
        target = S.PLAN_FAILED if stage is Phase.PLAN else S.APPLY_START_UNCERTAIN
        uow.attempts.close(attempt, AttemptState.ABANDONED, now=now)
        uow.runs.move(run, target, actor=WORKFLOW, reason="runner start could not be proven")
        self._hand_off(committed_move(uow.commit()))
        raise RunEnded(run.id, target)

    def _check_launch(self, uow: UnitOfWork, run: Run, stage: Phase) -> Clearance:
        """Launch controls again, against the release recorded on the run. A denied
        start ends the run without starting anything (and frees the workspace)."""
        try:
            return self._launch_controls.check(
                run.organization_id, run.runner_release or "", capacity=False
            )
        except LaunchDenied as denied:
            target = S.CANCELED if stage is Phase.PLAN else S.APPLY_FAILED
            uow.runs.move(run, target, actor=WORKFLOW, reason=f"LAUNCH_DENIED: {denied.reason}")
            self._hand_off(committed_move(uow.commit()))
            raise RunEnded(run.id, target) from None


@dataclass(frozen=True)
class _Launch:
    """What a phase's start has decided before it writes: the run as read, the wait's
    token, when, the sandbox's binding, its attempt's body, the launch controls'
    clearance and the artifacts the phase reads."""

    run: Run
    token: str
    now: datetime
    binding: Binding
    attempt: AttemptBody
    clearance: Clearance
    inputs: tuple[str, ...]
    # Whether the run's credential decisions give this phase cloud credentials.
    credentials: bool = False


@dataclass(frozen=True)
class _Handles:
    """A launch's capabilities: its bootstrap, and its credentials if it has any."""

    bootstrap: Minted
    credentials: Minted | None = None


def held_apply_lock(workspace: Workspace, run_id: str) -> ApplyLock | None:
    """The apply lock ``run_id`` holds on ``workspace`` (a start taken before), if any."""
    if workspace.lock_run_id != run_id or workspace.lock_id is None:
        return None
    return ApplyLock(workspace.id, workspace.lock_id, workspace.fence, run_id)
