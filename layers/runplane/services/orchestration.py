"""The steps of a run's workflow, and the runner reports that resume it.

Each method is one workflow task (invoked by a task Lambda with the run ID and,
for waits, the task token) or one runner report. Every status change goes
through ``RunLifecycle.move``; the workflow only ever carries public IDs.
Task tokens are stored on the part they wait for (attempt, approval, queue
entry) and used by whoever completes that part.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from runplane.adapters.launchers import Launcher, LaunchRequest
from runplane.adapters.workflow import Workflow
from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.clock import Clock
from runplane.domain.entities import ApplyLock, Run
from runplane.domain.errors import (
    ConcurrentChange,
    Conflict,
    LaunchDenied,
    NotFound,
    RunEnded,
    StaleDriftFinding,
    TransitionRejected,
)
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.parts import (
    OPEN_APPLY_RECORD,
    OPEN_ATTEMPT,
    ApplyRecord,
    ApplyRecordState,
    ApprovalBinding,
    ApprovalBody,
    ApprovalState,
    AttemptBody,
    AttemptState,
    PartKind,
    PlanEvidence,
    PlanEvidenceState,
    check_move,
)
from runplane.domain.run import RunStatus
from runplane.services import drift
from runplane.services.attempts import attempt_part, close_attempt
from runplane.services.capabilities import Capabilities
from runplane.services.launch_controls import Clearance, LaunchControls
from runplane.services.lifecycle import Moved, RunLifecycle
from runplane.services.policy import RESERVED, Policies
from runplane.services.writer import Handoff
from runplane.store import run_parts, state_versions
from runplane.store import workspaces as workspace_store
from runplane.store.transaction import Transaction

logger = logging.getLogger(__name__)
S = RunStatus
WORKFLOW = "workflow"
# An apply's publications back to its pinned predecessor that a result may span.
MAX_PUBLICATIONS = 1024


@dataclass(frozen=True)
class Timing:
    approval_window: timedelta = timedelta(days=7)
    bootstrap_lifetime: timedelta = timedelta(minutes=15)
    apply_start_lifetime: timedelta = timedelta(minutes=30)
    # The workflow's waits on a runner phase: overall, and between two heartbeats.
    runner_phase: timedelta = timedelta(hours=4)
    runner_heartbeat: timedelta = timedelta(minutes=15)


def _heartbeat_interval(window: timedelta) -> int:
    """How often a runner heartbeats: six chances per window, so one slow call is no loss."""
    return max(1, int(window.total_seconds()) // 6)


class Orchestration:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        lifecycle: RunLifecycle,
        capabilities: Capabilities,
        workflow: Workflow,
        launcher: Launcher,
        *,
        control_plane_url: str,
        launch_controls: LaunchControls,
        policies: Policies,
        timing: Timing | None = None,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._lifecycle = lifecycle
        self._capabilities = capabilities
        self._workflow = workflow
        self._launcher = launcher
        self._url = control_plane_url
        self._launch_controls = launch_controls
        self._policies = policies
        self._timing = timing or Timing()

    # -- workflow tasks ------------------------------------------------------------------

    def _active(self, run_id: str) -> Run:
        """The run, if it has not ended; a step of an ended run ends the workflow."""
        run = self._lifecycle.runs.get(run_id)
        if run.status.is_terminal:
            raise RunEnded(run.id, run.status)
        return run

    def queue(self, run_id: str) -> dict[str, Any]:
        run = self._active(run_id)
        if run.status is S.DISPATCH_PENDING:
            self._lifecycle.move(run, S.QUEUED, actor=WORKFLOW)
        return {
            "needs_writer": run.kind.needs_writer_reservation,
            "runner_timeout_seconds": int(self._timing.runner_phase.total_seconds()),
            "runner_heartbeat_seconds": int(self._timing.runner_heartbeat.total_seconds()),
        }

    def wait_for_writer(self, run_id: str, token: str) -> dict[str, Any]:
        """Take the writer reservation or queue for it; the token resumes the wait."""
        run = self._active(run_id)
        reservation = self._lifecycle.writer.reserve(run, token)
        if reservation.held:
            self._workflow.resume(token, {"held": True})
        return {"held": reservation.held, "position": reservation.position}

    def start_runner(self, run_id: str, phase: str, token: str) -> dict[str, Any]:
        """Start a runner phase: record the attempt with the wait's token, mint its
        capabilities, launch the sandbox. A retry of the same phase stores the new
        token and does not start a second sandbox."""
        run = self._active(run_id)
        stage = Phase(phase)
        existing = run_parts.get(run.id, attempt_part(stage))
        now = self._clock.now()
        if existing is not None:
            return self._replay_start(run, stage, existing, token)
        clearance = self._check_launch(run, stage)
        snapshot = run_parts.require(run.id, "input").body
        attempt_id = self._ids.new(IdKind.ATTEMPT)
        sandbox_id = self._ids.new(IdKind.SANDBOX)
        binding = Binding(run.id, attempt_id, stage, sandbox_id)
        inputs = [snapshot["configuration_artifact_id"]]
        if snapshot.get("variables_artifact_id"):
            inputs.append(snapshot["variables_artifact_id"])
        apply_start = None
        # A full scope refuses the whole start with SandboxCapacityExhausted, which
        # the workflow retries with backoff: nothing is written until a slot is free.
        slots, take_slots = clearance.take_slots()
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
                extra_writes=[attempt, *take_slots],
            )
        else:
            inputs.append(run_parts.plan_evidence(run.id).plan_artifact_id)
            lock = self._lifecycle.writer.acquire_apply_lock(run)
            attempt_body = replace(attempt_body, lock_id=lock.lock_id, fence=lock.fence)
            minted_apply = self._capabilities.mint(
                CapabilityKind.APPLY_START,
                binding,
                lifetime=self._timing.apply_start_lifetime,
                organization_id=run.organization_id,
            )
            apply_start = minted_apply.handle
            run_parts.put(
                run.id,
                attempt_part(stage),
                state=AttemptState.LAUNCHING,
                body=attempt_body.to_body(),
                now=now,
                token=token,
            ).extend(
                [
                    run_parts.change(
                        run.id,
                        "apply",
                        expected_state=ApplyRecordState.PENDING,
                        state=ApplyRecordState.STARTING,
                        body=ApplyRecord(None, attempt_id, lock.lock_id, lock.fence).to_body(),
                        now=now,
                    ),
                    *take_slots,
                ]
            ).commit()
        bootstrap = self._capabilities.mint(
            CapabilityKind.BOOTSTRAP,
            binding,
            lifetime=self._timing.bootstrap_lifetime,
            organization_id=run.organization_id,
            inputs=inputs,
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
            )
        )
        run_parts.change(
            run.id,
            attempt_part(stage),
            expected_state=AttemptState.LAUNCHING,
            state=AttemptState.STARTED,
            body=replace(attempt_body, sandbox_ref=reference).to_body(),
            now=self._clock.now(),
        ).commit()
        return {"attempt_id": attempt_id, "replayed": False}

    def _replay_start(
        self, run: Run, stage: Phase, attempt: run_parts.RunPart, token: str
    ) -> dict[str, Any]:
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

    def evaluate_policy(self, run_id: str) -> dict[str, Any]:
        """Bind the reserved policy check to the sanitized plan's digest, evaluate the
        attached policy sets, and record the results as the run moves on.

        A retry re-derives the same input (sanitization is deterministic); a bound
        digest that no longer matches fails closed.
        """
        run = self._active(run_id)
        if run.status is S.PLAN_COMPLETE:
            self._lifecycle.move(run, S.POLICY_EVALUATING, actor=WORKFLOW)
            run = self._lifecycle.runs.get(run_id)
        if run.status is S.POLICY_EVALUATING:
            policy_inputs = self._policies.policy_inputs(run)
            digest = policy_inputs.digest("runplane")
            check = run_parts.require(run.id, "policy")
            if check.state == RESERVED:
                Policies.bind(run, check, digest, self._clock.now()).commit()
                check = run_parts.require(run.id, "policy")
            evaluation = self._policies.evaluate(run, policy_inputs, digest)
            recorded = Policies.record(run, check, evaluation, self._clock.now())
            passed = evaluation.outcome in {"passed", "soft_failed"}
            target = S.POLICY_PASSED if passed else S.POLICY_FAILED
            writes = [recorded]
            reason = None
            if not passed:
                blocking = [f"{r.policy_set}/{r.policy}" for r in evaluation.results if r.blocking]
                reason = f"POLICY_FAILED: {', '.join(blocking) or 'a mandatory policy'}"[:200]
                if run_parts.get(run.id, "apply") is not None:
                    writes.append(self._close_apply_record(run.id, "a mandatory policy failed"))
            moved = self._lifecycle.move(
                run, target, actor=WORKFLOW, reason=reason, extra_writes=writes
            )
            self._hand_off(moved)
            run = self._lifecycle.runs.get(run_id)
        apply_next = run.status is S.POLICY_PASSED and run.facts.has_something_to_apply
        return {"next": "approval" if apply_next else "finish"}

    def _close_apply_record(self, run_id: str, reason: str) -> Transaction:
        """The pending apply record closed: this run will apply nothing."""
        return run_parts.change(
            run_id,
            "apply",
            expected_state=ApplyRecordState.PENDING,
            state=ApplyRecordState.CLOSED,
            body={"reason": reason, "resulting_state_version_id": None},
            now=self._clock.now(),
        )

    def finish_plan(self, run_id: str) -> dict[str, Any]:
        """Nothing to apply: succeed, skip approval and apply, close the apply record."""
        run = self._active(run_id)
        if run.status is S.POLICY_PASSED:
            extra = []
            if run_parts.get(run.id, "apply") is not None:
                extra.append(
                    self._close_apply_record(run.id, "the plan has no changes; nothing was applied")
                )
            findings, found = drift.on_scheduled_plan(run, self._clock.now())
            moved, noted = self._move_noting_drift(
                run, S.SUCCEEDED, findings, actor=WORKFLOW, extra_writes=extra
            )
            self._hand_off(moved)
            if noted:
                drift.announce(found, run, moved.transition, self._lifecycle.events)
        return {"status": self._lifecycle.runs.get(run_id).status.value}

    def _move_noting_drift(
        self, run: Run, target: RunStatus, findings: list[Transaction], **move: Any
    ) -> tuple[Moved, bool]:
        """Move with the drift record (see services/drift.py); if a run created later
        already wrote it, move without. Returns whether the record was written."""
        extra = list(move.pop("extra_writes", ()))
        if findings:
            try:
                moved = self._lifecycle.move(run, target, extra_writes=[*extra, *findings], **move)
                return moved, True
            except StaleDriftFinding:
                pass
        return self._lifecycle.move(run, target, extra_writes=extra, **move), False

    def request_approval(self, run_id: str) -> dict[str, Any]:
        run = self._active(run_id)
        if run.status is S.POLICY_PASSED:
            now = self._clock.now()
            window = workspace_store.get_workspace(run.workspace_id).approval_window_seconds
            expires_at = now + (
                timedelta(seconds=window) if window else self._timing.approval_window
            )
            policy = run_parts.require(run.id, "policy").body
            binding = ApprovalBinding(
                plan_sha256=run_parts.plan_evidence(run.id).plan_sha256,
                predecessor_state_version_id=run.predecessor_sv_id,
                policy_input_digest=policy.get("input_digest"),
                policy_result_digest=policy.get("result_digest"),
            )
            approval = run_parts.put(
                run.id,
                "approval",
                state=ApprovalState.WAITING,
                body=ApprovalBody(expires_at.isoformat(), binding).to_body(),
                now=now,
            )
            self._lifecycle.move(
                run,
                S.AWAITING_APPROVAL,
                actor=WORKFLOW,
                run_updates={"approval_expires_at": expires_at},
                extra_writes=[approval],
            )
            run = self._lifecycle.runs.get(run_id)
        assert run.approval_expires_at is not None
        remaining = (run.approval_expires_at - self._clock.now()).total_seconds()
        # Whole seconds, rounded up with a second to spare: the wait must never
        # time out before the persisted deadline, or arbitration finds it pending.
        return {"timeout_seconds": max(1, math.ceil(remaining) + 1)}

    def wait_for_approval(self, run_id: str, token: str) -> dict[str, Any]:
        """Store the approval wait's token; a decision already recorded resumes at once."""
        self._active(run_id)
        approval = run_parts.require(run_id, "approval")
        if approval.state == ApprovalState.WAITING:
            try:
                run_parts.change(
                    run_id,
                    "approval",
                    expected_state=ApprovalState.WAITING,
                    token=token,
                    now=self._clock.now(),
                ).commit()
                return {"waiting": True}
            except ConcurrentChange:
                approval = run_parts.require(run_id, "approval")
        self._workflow.resume(token, {"decision": approval.body.get("decision", approval.state)})
        return {"waiting": False}

    def arbitrate_expiry(self, run_id: str) -> dict[str, Any]:
        """The approval wait timed out: the database decides what happened."""
        run = self._active(run_id)
        approval = run_parts.require(run_id, "approval")
        if approval.state in {ApprovalState.APPROVED, ApprovalState.REJECTED}:
            return {"decision": approval.body["decision"]}
        now = self._clock.now()
        if run.approval_expires_at is not None and now < run.approval_expires_at:
            return {"decision": "pending"}
        expire = run_parts.change(
            run_id,
            "approval",
            expected_state=ApprovalState.WAITING,
            state=ApprovalState.EXPIRED,
            token=None,
            now=now,
        )
        try:
            moved = self._lifecycle.move(
                run, S.EXPIRED, actor=WORKFLOW, reason="APPROVAL_EXPIRED", extra_writes=[expire]
            )
        except (ConcurrentChange, TransitionRejected):
            approval = run_parts.require(run_id, "approval")
            return {"decision": approval.body.get("decision", approval.state)}
        self._hand_off(moved)
        return {"decision": "expired"}

    def fail(self, run_id: str, phase: str, error: str) -> dict[str, Any]:
        """A workflow step failed or timed out: end the run without claiming success."""
        run = self._lifecycle.runs.get(run_id)
        reason = f"{phase}: {error}"[:200]
        stage = Phase(phase) if phase in {p.value for p in Phase} else None
        attempt = run_parts.get(run.id, attempt_part(stage)) if stage else None
        open_attempt = attempt if attempt and attempt.state in OPEN_ATTEMPT else None
        target = {
            S.DISPATCH_PENDING: S.CANCELED,
            S.QUEUED: S.CANCELED,
            S.PLANNING: S.PLAN_FAILED,
            S.PLAN_COMPLETE: S.CANCELED,
            S.POLICY_EVALUATING: S.POLICY_FAILED,
            S.POLICY_PASSED: S.CANCELED,
            S.AWAITING_APPROVAL: S.APPLY_START_UNCERTAIN if phase == "apply" else S.CANCELED,
            S.APPLYING: S.NEEDS_RECOVERY,
        }.get(run.status)
        if target is None:
            return {"status": run.status.value}
        lock = None
        if target is S.APPLY_START_UNCERTAIN and attempt is None:
            # No attempt was recorded, so no sandbox was launched: the start is proven
            # not to have happened (a start refused for capacity, say).
            target = S.APPLY_FAILED
            lock = self._lifecycle.writer.held_apply_lock(run)
        now = self._clock.now()
        closing = (
            close_attempt(run.id, attempt_part(stage), open_attempt, AttemptState.LOST, now)
            if stage and open_attempt
            else []
        )
        record = run_parts.get(run.id, "apply") if stage is Phase.APPLY else None
        if record is not None and record.state in OPEN_APPLY_RECORD:
            # The apply record says what is known: nothing started, or nothing certain.
            known = (
                ApplyRecordState.FAILED if target is S.APPLY_FAILED else ApplyRecordState.UNCERTAIN
            )
            check_move(PartKind.APPLY_RECORD, record.state, known)
            closing.append(
                run_parts.change(
                    run.id,
                    "apply",
                    expected_state=record.state,
                    state=known,
                    body={**record.body, "reason": reason},
                    now=now,
                )
            )
        moved = self._lifecycle.move(
            run, target, actor=WORKFLOW, reason=reason, lock=lock, extra_writes=closing
        )
        self._hand_off(moved)
        reference = open_attempt.body.get("sandbox_ref") if open_attempt else None
        if reference:
            # Whatever it is still doing, its result can no longer be accepted.
            self._launcher.stop(str(reference))
        return {"status": target.value}

    def _hand_off(self, moved: Moved) -> None:
        handoff: Handoff | None = moved.handoff
        if handoff is not None:
            self._workflow.resume(handoff.token, {"held": True})

    # -- runner reports ---------------------------------------------------------------------

    def heartbeat(self, run_id: str, phase: Phase, attempt_id: str) -> bool:
        """The runner is alive: keep the workflow's wait for this attempt from timing out."""
        attempt = run_parts.require(run_id, attempt_part(phase))
        if attempt.body["attempt_id"] != attempt_id or attempt.token is None:
            return False
        return self._workflow.heartbeat(attempt.token)

    def report_plan(self, run_id: str, attempt_id: str, report: Mapping[str, Any]) -> str:
        """Commit a plan attempt's authenticated result and resume the workflow."""
        run = self._lifecycle.runs.get(run_id)
        attempt = run_parts.require(run.id, attempt_part(Phase.PLAN))
        if attempt.body["attempt_id"] != attempt_id:
            raise Conflict(f"attempt {attempt_id} is not run {run.id}'s plan attempt")
        if run.status is not S.PLANNING:
            raise Conflict(f"run {run.id} is {run.status}; its plan result was already recorded")
        now = self._clock.now()
        outcome = str(report.get("outcome"))
        done = Transaction().extend(
            close_attempt(
                run.id,
                attempt_part(Phase.PLAN),
                attempt,
                AttemptState.SUCCEEDED if outcome == "planned" else AttemptState.FAILED,
                now,
                log_artifact_id=report.get("log_artifact_id"),
                engine_seconds=report.get("engine_seconds"),
                reason=report.get("reason"),
            )
        )
        if outcome == "planned":
            has_changes = bool(report["has_changes"])
            evidence = PlanEvidence(
                attempt_id=attempt_id,
                plan_artifact_id=report["plan_artifact_id"],
                plan_sha256=report["plan_sha256"],
                plan_json_artifact_id=report["plan_json_artifact_id"],
                plan_json_sha256=report["plan_json_sha256"],
                log_artifact_id=report.get("log_artifact_id"),
                summary=report["summary"],
                has_changes=has_changes,
                engine_version=report.get("engine_version"),
                predecessor_state_version_id=run.predecessor_sv_id,
            )
            writes = [
                done,
                run_parts.put(
                    run.id,
                    "plan",
                    state=PlanEvidenceState.COMMITTED,
                    body=evidence.to_body(),
                    now=now,
                ),
                # Reserved atomically with the plan: clients never race its creation.
                run_parts.put(
                    run.id,
                    "policy",
                    state=RESERVED,
                    body={"id": self._ids.new(IdKind.POLICY_CHECK), "input_digest": None},
                    now=now,
                ),
            ]
            if run.kind.may_apply:
                writes.append(
                    run_parts.put(
                        run.id,
                        "apply",
                        state=ApplyRecordState.PENDING,
                        body=ApplyRecord().to_body(),
                        now=now,
                    )
                )
            self._lifecycle.move(
                run,
                S.PLAN_COMPLETE,
                actor=f"runner:{attempt_id}",
                run_updates={"plan_has_changes": has_changes},
                extra_writes=writes,
            )
            target = S.PLAN_COMPLETE
        else:
            target = (
                S.PLAN_CREDENTIALS_REQUIRED if outcome == "credentials_required" else S.PLAN_FAILED
            )
            moved = self._lifecycle.move(
                run,
                target,
                actor=f"runner:{attempt_id}",
                reason=str(report.get("reason") or outcome)[:200],
                extra_writes=[done],
            )
            self._hand_off(moved)
        if attempt.token:
            self._workflow.resume(attempt.token, {"outcome": target.value})
        return target.value

    def apply_start_writes(self, run_id: str, attempt_id: str) -> Transaction:
        """The uncommitted move to ``applying``, committed together with the runner's
        apply-start redemption: the run applies only if both happen."""
        run = self._lifecycle.runs.get(run_id)
        attempt = run_parts.require(run.id, attempt_part(Phase.APPLY))
        approval = run_parts.require(run.id, "approval")
        if attempt.body["attempt_id"] != attempt_id or approval.state != ApprovalState.APPROVED:
            raise Conflict(f"run {run.id} is not approved for attempt {attempt_id}")
        started = run_parts.change(
            run.id,
            "apply",
            expected_state=ApplyRecordState.STARTING,
            state=ApplyRecordState.STARTED,
            now=self._clock.now(),
        )
        writes, _ = self._lifecycle.runs.transition_writes(
            run, S.APPLYING, [started], actor=f"runner:{attempt_id}"
        )
        return writes

    def report_apply(self, run_id: str, attempt_id: str, report: Mapping[str, Any]) -> str:
        """Commit an apply result. Success needs a confirmed publication: the current
        state must carry this run's exact attempt, sandbox, lock and fence."""
        run = self._lifecycle.runs.get(run_id)
        attempt = run_parts.require(run.id, attempt_part(Phase.APPLY))
        if attempt.body["attempt_id"] != attempt_id:
            raise Conflict(f"attempt {attempt_id} is not run {run.id}'s apply attempt")
        if run.status is not S.APPLYING:
            raise Conflict(f"run {run.id} is {run.status}; its apply result was already recorded")
        now = self._clock.now()
        confirmed, published, pointer = self._publication(run, attempt.body)
        engine_ok = report.get("outcome") == "applied"
        if engine_ok and confirmed:
            target, reason = S.SUCCEEDED, None
        elif engine_ok:
            target, reason = S.NEEDS_RECOVERY, "the published state could not be confirmed"
        else:
            target, reason = S.APPLY_FAILED, str(report.get("reason") or "apply failed")[:200]
        apply_state = {
            S.SUCCEEDED: ApplyRecordState.SUCCEEDED,
            S.NEEDS_RECOVERY: ApplyRecordState.UNCERTAIN,
        }.get(target, ApplyRecordState.FAILED)
        check_move(PartKind.APPLY_RECORD, ApplyRecordState.STARTED, apply_state)
        writes = [
            *close_attempt(
                run.id,
                attempt_part(Phase.APPLY),
                attempt,
                AttemptState.SUCCEEDED if engine_ok else AttemptState.FAILED,
                now,
                log_artifact_id=report.get("log_artifact_id"),
                engine_seconds=report.get("engine_seconds"),
                reason=report.get("reason"),
            ),
            run_parts.change(
                run.id,
                "apply",
                expected_state=ApplyRecordState.STARTED,
                state=apply_state,
                body={
                    **run_parts.require(run.id, "apply").body,
                    "resulting_state_version_id": pointer if published else None,
                    "state_published": published,
                    "reason": reason,
                },
                now=now,
            ),
        ]
        # Release exactly the lock this attempt was granted (StaleFence if it was revoked).
        apply_lock = ApplyLock(
            run.workspace_id, str(attempt.body["lock_id"]), int(attempt.body["fence"]), run.id
        )
        # An applied run makes the state match the infrastructure: recorded drift clears.
        findings = drift.on_applied(run, now) if target is S.SUCCEEDED else []
        moved, _ = self._move_noting_drift(
            run,
            target,
            findings,
            actor=f"runner:{attempt_id}",
            reason=reason,
            state_published=published,
            lock=apply_lock,
            extra_writes=writes,
        )
        self._hand_off(moved)
        if attempt.token:
            self._workflow.resume(attempt.token, {"outcome": target.value})
        return target.value

    def _publication(self, run: Run, attempt: Mapping[str, Any]) -> tuple[bool, bool, str | None]:
        """(confirmed, published, pointer): did this attempt publish the current state?

        Confirmed means the current version, and every version back to the run's
        pinned predecessor, carries this run's exact attempt, sandbox, lock and
        fence (an apply may publish intermediate snapshots: at most
        ``MAX_PUBLICATIONS`` of them).
        """
        workspace = workspace_store.get_workspace(run.workspace_id)
        pointer = workspace.current_state_version_id
        if pointer is None or pointer == run.predecessor_sv_id:
            return False, False, pointer
        published = False
        cursor: str | None = pointer
        for _ in range(MAX_PUBLICATIONS):
            if cursor == run.predecessor_sv_id:
                return published, published, pointer
            try:
                version = state_versions.get(cursor or "")
            except NotFound:
                return False, published, pointer
            provenance = version.provenance or {}
            ours = (
                provenance.get("run_id") == run.id
                and provenance.get("attempt_id") == attempt["attempt_id"]
                and provenance.get("sandbox_id") == attempt["sandbox_id"]
                and provenance.get("fence") == attempt["fence"]
                and version.lock_id == attempt["lock_id"]
                and version.sha256 is not None
            )
            if cursor == pointer:
                published = provenance.get("run_id") == run.id
            if not ours:
                return False, published, pointer
            cursor = version.predecessor_id
        return False, published, pointer
