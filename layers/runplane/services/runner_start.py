"""Starting a runner phase: record the attempt, mint its capabilities, launch it.

A retried start never launches a second sandbox (see ``_replay_start``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from runplane.adapters.launchers import LaunchRequest
from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.entities import Run
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
    RunPart,
)
from runplane.domain.run_scope import RunScope
from runplane.domain.sandbox_exits import SandboxRef, is_task_reference
from runplane.services.attempts import attempt_part, close_attempt
from runplane.services.workflow_base import WORKFLOW, S, WorkflowService
from runplane.services.workflow_base import heartbeat_interval as _heartbeat_interval
from runplane.store import run_batch, run_parts, sandbox_refs, sandbox_slots
from runplane.store import workspaces as workspace_store
from runplane.store.transaction import Transaction
from runplane.store.writer import MAX_ATTEMPTS


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
        run, parts = run_batch.run_and_parts(run_id, needed)
        if run.status.is_terminal:
            raise RunEnded(run.id, run.status)
        existing = parts[attempt_part(stage)]
        now = self._clock.now()
        if existing is not None:
            return self._replay_start(run, stage, existing, token)
        clearance = self._check_launch(run, stage)
        snapshot = run_batch.require(parts, run.id, "input").body
        attempt_id = self._ids.new(IdKind.ATTEMPT)
        sandbox_id = self._ids.new(IdKind.SANDBOX)
        binding = Binding(run.id, attempt_id, stage, sandbox_id)
        inputs = [snapshot["configuration_artifact_id"]]
        if snapshot.get("variables_artifact_id"):
            inputs.append(snapshot["variables_artifact_id"])
        if stage is Phase.APPLY:
            plan = PlanEvidence.from_body(run_batch.require(parts, run.id, "plan").body)
            inputs.append(plan.plan_artifact_id)
        # The sandbox's capabilities are created in the attempt's own transaction:
        # one write, and none of them exists unless the attempt does.
        bootstrap, mint_bootstrap = self._capabilities.minting(
            CapabilityKind.BOOTSTRAP,
            binding,
            lifetime=self._timing.bootstrap_lifetime,
            organization_id=run.organization_id,
            inputs=inputs,
        )
        apply_start = None
        # A full scope refuses the whole start with SandboxCapacityExhausted, which
        # the workflow retries with backoff: nothing is written until a slot is free.
        slots, take_slots = sandbox_slots.take_cleared(clearance)
        attempt_body = AttemptBody(
            attempt_id, sandbox_id, stage.value, now.isoformat(), tuple(slots)
        )
        if stage is Phase.PLAN:
            workspace = workspace_store.get_workspace(run.workspace_id)
            pinned = workspace.current_state_version_id
            attempt = run_parts.put(
                run.id,
                attempt_part(stage),
                state=AttemptState.LAUNCHING,
                body=attempt_body.to_body(),
                now=now,
                token=token,
            )
            self._lifecycle.move(
                run,
                S.PLANNING,
                actor=WORKFLOW,
                run_updates={"predecessor_sv_id": pinned},
                extra_writes=[attempt, mint_bootstrap, *take_slots],
            )
        else:
            apply_start, attempt_body = self._start_apply(
                run, token, now, attempt_body, binding, mint_bootstrap, take_slots
            )
        reference = self._launcher.launch(
            LaunchRequest(
                run_id=run.id,
                attempt_id=attempt_id,
                phase=stage.value,
                sandbox_id=sandbox_id,
                control_plane_url=self._url,
                bootstrap=bootstrap.handle,
                apply_start=apply_start,
                heartbeat_seconds=_heartbeat_interval(self._timing.runner_heartbeat),
                inputs=tuple(inputs),
            )
        )
        recorded_at = self._clock.now()
        started = run_parts.change(
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
            started.extend([sandbox_refs.record(launched, recorded_at, self._timing.runner_phase)])
        started.commit()
        return {"attempt_id": attempt_id, "replayed": False}

    def _start_apply(
        self,
        run: Run,
        token: str,
        now: datetime,
        attempt_body: AttemptBody,
        binding: Binding,
        mint_bootstrap: Transaction,
        take_slots: list[Transaction],
    ) -> tuple[str, AttemptBody]:
        """Take the apply lock, record the attempt with its apply record, slots and
        capabilities: one transaction. Returns the apply-start handle and the
        attempt's body (naming the lock and fence)."""
        writer = self._lifecycle.writer
        for _ in range(MAX_ATTEMPTS):
            lock, take_lock = writer.apply_lock_writes(run)
            body = replace(attempt_body, lock_id=lock.lock_id, fence=lock.fence)
            minted_apply, mint_apply = self._capabilities.minting(
                CapabilityKind.APPLY_START,
                binding,
                lifetime=self._timing.apply_start_lifetime,
                organization_id=run.organization_id,
            )
            record = ApplyRecord(None, binding.attempt_id, lock.lock_id, lock.fence)
            writes = Transaction().extend(
                [
                    take_lock,
                    run_parts.put(
                        run.id,
                        attempt_part(Phase.APPLY),
                        state=AttemptState.LAUNCHING,
                        body=body.to_body(),
                        now=now,
                        token=token,
                    ),
                    run_parts.change(
                        run.id,
                        "apply",
                        expected_state=ApplyRecordState.PENDING,
                        state=ApplyRecordState.STARTING,
                        body=record.to_body(),
                        now=now,
                    ),
                    mint_apply,
                    mint_bootstrap,
                    *take_slots,
                ]
            )
            try:
                writes.commit()
            except ConcurrentChange:
                # Another writer moved the fence first: take the next one. Any other
                # refusal (a concurrent start of this attempt) is the caller's.
                if len(take_lock) and writer.fence_moved(lock):
                    continue
                raise
            return minted_apply.handle, body
        raise TooMuchContention(f"workspace {run.workspace_id}: the fence kept moving")

    def _replay_start(self, run: Run, stage: Phase, attempt: RunPart, token: str) -> dict[str, Any]:
        """A retried start step: complete from the attempt's evidence, never start twice.

        A started sandbox keeps running and will resume the new token; a
        finished one's outcome resumes it now. An attempt whose launch was never
        recorded is partial evidence: the start fails closed.
        """
        now = self._clock.now()
        replayed = {"attempt_id": run_parts.attempt_body(attempt).attempt_id, "replayed": True}
        if attempt.state == AttemptState.STARTED:
            run_parts.change(
                run.id,
                attempt_part(stage),
                expected_state=AttemptState.STARTED,
                token=token,
                now=now,
            ).commit()
            return replayed
        if attempt.state in {AttemptState.SUCCEEDED, AttemptState.FAILED}:
            planned = stage is Phase.PLAN and attempt.state == AttemptState.SUCCEEDED
            outcome = S.PLAN_COMPLETE.value if planned else run.status.value
            self._workflow.resume(token, {"outcome": outcome})
            return replayed
        target = S.PLAN_FAILED if stage is Phase.PLAN else S.APPLY_START_UNCERTAIN
        moved = self._lifecycle.move(
            run,
            target,
            actor=WORKFLOW,
            reason="runner start could not be proven",
            extra_writes=close_attempt(
                run.id, attempt_part(stage), attempt, AttemptState.ABANDONED, now
            ),
        )
        self._hand_off(moved)
        raise RunEnded(run.id, target)

    def _check_launch(self, run: Run, stage: Phase) -> Clearance:
        """Launch controls again, against the release recorded on the run. A denied
        start ends the run without starting anything (and frees the workspace)."""
        try:
            return self._launch_controls.check(
                run.organization_id, run.runner_release or "", capacity=False
            )
        except LaunchDenied as denied:
            target = S.CANCELED if stage is Phase.PLAN else S.APPLY_FAILED
            moved = self._lifecycle.move(
                run, target, actor=WORKFLOW, reason=f"LAUNCH_DENIED: {denied.reason}"
            )
            self._hand_off(moved)
            raise RunEnded(run.id, target) from None
