"""The run workflow's own steps: queueing, policy, approval, finishing and failing.

Each method is one workflow task, invoked by a task Lambda with the run ID and,
for waits, the task token. Every status change goes through ``RunLifecycle.move``
(the approval's expiry and a failed or lost phase through a unit of work, whose
DynamoDB commit is that move).
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from typing import Any

from runplane.domain.capabilities import Phase
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    NotFound,
    RunEnded,
    TransitionRejected,
)
from runplane.domain.intents import MovedRun
from runplane.domain.parts import (
    OPEN_APPLY_RECORD,
    OPEN_ATTEMPT,
    UNDECIDED,
    ApplyRecordState,
    ApprovalBinding,
    ApprovalBody,
    ApprovalState,
    AttemptBody,
    AttemptState,
    PartKind,
    PlanEvidence,
    PolicyCheck,
    RunInput,
    RunPart,
    check_move,
    required_part,
)
from runplane.domain.policy_input import PolicyInputs
from runplane.domain.run_options import NO_OPTIONS
from runplane.domain.run_scope import RunScope
from runplane.domain.transitions import failure_outcome
from runplane.services import drift
from runplane.services.attempts import attempt_part
from runplane.services.policy import RESERVED, Policies
from runplane.services.unit_of_work import UnitOfWork
from runplane.services.workflow_base import WORKFLOW, S, WorkflowService, committed_move
from runplane.services.writer import hand_off


class WorkflowSteps(WorkflowService):
    """The workflow tasks that do not start or hear from a runner."""

    def queue(self, run_id: str, scope: RunScope | None = None) -> dict[str, Any]:
        """Queue the run. With its ``scope``, the run and its workspace are one read, and
        a run that needs the writer reservation takes it in the same write when nobody
        holds it or waits for it: the workflow then skips its wait for the writer."""
        with self._reading_ahead(run_id, scope, workspace=True), self._units() as uow:
            run, _ = self._active_in(uow, run_id, [])
            needs_writer = run.kind.needs_writer_reservation
            if needs_writer and scope is not None:
                workspace = uow.writer.workspace(run.workspace_id)
                if workspace.writer_run_id == run.id:
                    needs_writer = False  # taken by this step's earlier try
                elif (
                    run.status is S.DISPATCH_PENDING
                    and workspace.writer_run_id is None
                    and workspace.queue_length == 0
                ):
                    # Conditioned at commit on the workspace as read here: taken by
                    # another run meanwhile, the step is retried and queues.
                    uow.writer.take_free_reservation(workspace.id, run.id, self._clock.now())
                    needs_writer = False
            if run.status is S.DISPATCH_PENDING:
                uow.runs.move(run, S.QUEUED, actor=WORKFLOW)
                uow.commit()
        return {
            "needs_writer": needs_writer,
            "runner_timeout_seconds": int(self._timing.runner_phase.total_seconds()),
            "runner_heartbeat_seconds": int(self._timing.runner_heartbeat.total_seconds()),
        }

    def wait_for_writer(
        self, run_id: str, token: str, scope: RunScope | None = None
    ) -> dict[str, Any]:
        """Take the writer reservation or queue for it; the token resumes the wait."""
        with self._reading_ahead(run_id, scope, workspace=True):
            run = self._active(run_id)
            reservation = self._lifecycle.writer.reserve(run, token)
        if reservation.held:
            self._workflow.resume(token, {"held": True})
        return {"held": reservation.held, "position": reservation.position}

    def evaluate_policy(
        self,
        run_id: str,
        scope: RunScope | None = None,
        *,
        plan_json_artifact_id: str | None = None,
    ) -> dict[str, Any]:
        """Bind the reserved policy check to the sanitized plan's digest, evaluate the
        attached policy sets, and record the results as the run moves on; a run whose
        policy passed with something to apply then asks for approval, in its own write.

        The run starts evaluating in the write that binds its check: a cancel that
        commits before it refuses it, one after it refuses the results' write, and one
        after that the approval's. With the run's ``scope`` and its plan JSON's ID (the
        plan step's output), the run, its parts, its workspace and that JSON's record are
        one read, and the approval is asked from what the step holds: the run as its
        last write left it, the check as just recorded, the plan, input and workspace
        as read.

        A retry re-derives the same input (sanitization is deterministic); a bound
        digest that no longer matches fails closed. A retry that finds the policy passed
        asks for the approval; one that finds it asked only answers the wait's timeout.
        """
        names = ["plan", "policy", "apply", "input"]
        ahead: AbstractContextManager[None] = nullcontext()
        if scope is not None:
            ahead = self._reads_ahead(
                run_id,
                names,
                workspace_id=scope.workspace_id,
                artifact_ids=[plan_json_artifact_id] if plan_json_artifact_id else (),
                policy_tally_of=scope.organization_id,
            )
        with ahead:
            run, parts = self._active_with(run_id, names)
            plan = required_part(parts, run.id, "plan")
            # Read once, first: the policy's input names it and the approval keeps its
            # window and second-approval rule.
            workspace = self._workspace_of(run) if _may_ask_approval(run) else None
            if run.status is S.PLAN_COMPLETE:
                policy_inputs: PolicyInputs | None = self._policies.policy_inputs(
                    run, plan, parts["input"], workspace=workspace
                )
                assert policy_inputs is not None
                run, parts = self._start_evaluating(run, parts, plan, policy_inputs)
            else:
                policy_inputs = self._evaluating(run, plan, parts["input"], workspace)
        if policy_inputs is not None:
            moved, check = self._record_policy(run, parts, plan, policy_inputs)
            self._hand_off(moved)
            run, parts = moved.run, {**parts, "policy": check}
        if run.status is S.POLICY_PASSED and run.facts.has_something_to_apply:
            assert workspace is not None
            with self._units() as uow:
                # Its event names the workspace's subscribers, as read with the run.
                uow.writer.read_before(workspace)
                run = self._ask_approval(uow, run, parts, workspace)
        if run.approval_expires_at is None:
            return {"next": "finish", "approval_timeout_seconds": None}
        return {"next": "approval", "approval_timeout_seconds": self._approval_wait(run)}

    def _workspace_of(self, run: Run) -> Workspace:
        """The run's workspace (from the step's read ahead, when it has one)."""
        with self._units() as uow:
            return uow.writer.workspace(run.workspace_id)

    def _start_evaluating(
        self,
        run: Run,
        parts: dict[str, RunPart | None],
        plan: RunPart,
        policy_inputs: PolicyInputs,
    ) -> tuple[Run, dict[str, RunPart | None]]:
        """Move ``run`` to ``policy_evaluating`` with its check bound to the input's
        digest, in one write; the run and parts as they then read."""
        check = required_part(parts, run.id, "policy")
        with self._units() as uow:
            if check.state == RESERVED:
                check = Policies.bind(
                    uow.parts,
                    run,
                    check,
                    policy_inputs.digest("runplane"),
                    self._clock.now(),
                    plan,
                )
            uow.runs.move(run, S.POLICY_EVALUATING, actor=WORKFLOW)
            moved = committed_move(uow.commit())
        return moved.run, {**parts, "policy": check}

    def _record_policy(
        self,
        run: Run,
        parts: dict[str, RunPart | None],
        plan: RunPart,
        policy_inputs: PolicyInputs,
    ) -> tuple[MovedRun, RunPart]:
        """Evaluate, and record the results as the run moves on: bound first (once) to the
        input's digest, so the results are written only onto that binding. The move, and
        the check as it then reads."""
        digest = policy_inputs.digest("runplane")
        check = required_part(parts, run.id, "policy")
        if check.state == RESERVED:
            with self._units() as uow:
                check = Policies.bind(uow.parts, run, check, digest, self._clock.now(), plan)
                uow.commit()
        evaluation = self._policies.evaluate(run, policy_inputs, digest)
        passed = evaluation.outcome in {"passed", "soft_failed"}
        reason = None
        if not passed:
            blocking = [f"{r.policy_set}/{r.policy}" for r in evaluation.results if r.blocking]
            reason = f"POLICY_FAILED: {', '.join(blocking) or 'a mandatory policy'}"[:200]
        with self._units() as uow:
            recorded = Policies.record(uow.parts, run, check, evaluation, self._clock.now())
            if not passed and parts["apply"] is not None:
                self._close_apply_record(uow, run.id, "a mandatory policy failed")
            uow.runs.move(
                run,
                S.POLICY_PASSED if passed else S.POLICY_FAILED,
                actor=WORKFLOW,
                reason=reason,
            )
            return committed_move(uow.commit()), recorded

    def _evaluating(
        self, run: Run, plan: RunPart, input_part: RunPart | None, workspace: Workspace | None
    ) -> PolicyInputs | None:
        """The policy inputs of a run evaluating its policy; None for a run that is not."""
        if run.status is not S.POLICY_EVALUATING:
            return None
        return self._policies.policy_inputs(run, plan, input_part, workspace=workspace)

    def _close_apply_record(self, uow: UnitOfWork, run_id: str, reason: str) -> None:
        """Intend the pending apply record's close: this run will apply nothing."""
        uow.parts.change(
            run_id,
            "apply",
            expected_state=ApplyRecordState.PENDING,
            state=ApplyRecordState.CLOSED,
            body={"reason": reason, "resulting_state_version_id": None},
            now=self._clock.now(),
        )

    def finish_plan(self, run_id: str) -> dict[str, Any]:
        """Nothing to apply: succeed, skip approval and apply, close the apply record."""
        with self._units() as uow:
            run, parts = uow.runs.with_parts(run_id, ["apply", "input", "plan"])
            if run.status is S.POLICY_PASSED:
                found = drift.on_scheduled_plan(
                    run, parts["input"], parts["plan"], self._clock.now()
                )

                def intend(unit: UnitOfWork) -> None:
                    if parts["apply"] is not None:
                        self._close_apply_record(
                            unit, run.id, "the plan has no changes; nothing was applied"
                        )

                moved, noted = self._commit_noting_drift(
                    run, S.SUCCEEDED, found, intend, uow=uow, actor=WORKFLOW
                )
                self._hand_off(moved)
                if noted:
                    drift.log_finding(found)
                return {"status": moved.run.status.value}
        return {"status": run.status.value}

    def request_approval(self, run_id: str, scope: RunScope | None = None) -> dict[str, Any]:
        """Ask for approval of a run whose policy passed (the policy step asks itself;
        executions started before it did still call this step): a replay writes nothing
        and answers the wait's timeout."""
        with self._reading_ahead(run_id, scope, ["policy", "plan", "input"], workspace=True):
            return self._request_approval(run_id)

    def _request_approval(self, run_id: str) -> dict[str, Any]:
        with self._units() as uow:
            run, parts = self._active_in(uow, run_id, ["policy", "plan", "input"])
            if run.status is S.POLICY_PASSED:
                workspace = uow.writer.workspace(run.workspace_id)
                run = self._ask_approval(uow, run, parts, workspace)
        return {"timeout_seconds": self._approval_wait(run)}

    def _ask_approval(
        self, uow: UnitOfWork, run: Run, parts: dict[str, RunPart | None], workspace: Workspace
    ) -> Run:
        """The approval, bound to the plan and policy results, and the run's move to
        awaiting it with its deadline, in one commit of ``uow`` conditioned on ``run`` as
        given: a run moved meanwhile (canceled, say) refuses it and nothing is written.
        The run as the move wrote it."""
        now = self._clock.now()
        window = workspace.approval_window_seconds
        expires_at = now + (timedelta(seconds=window) if window else self._timing.approval_window)
        policy = PolicyCheck.from_body(required_part(parts, run.id, "policy").body)
        plan = PlanEvidence.from_body(required_part(parts, run.id, "plan").body)
        binding = ApprovalBinding(
            plan_sha256=plan.plan_sha256,
            predecessor_state_version_id=run.predecessor_sv_id,
            policy_input_digest=policy.input_digest,
            policy_result_digest=policy.result_digest,
        )
        # The two-person rule as the workspace has it now, for this plan: fixed for the
        # approval's life, shown in the review.
        snapshot = parts["input"]
        options = RunInput.from_body(snapshot.body).options if snapshot else NO_OPTIONS
        destroys = int(str(plan.summary.get("destroys") or 0))
        rule = workspace.second_approval
        body = ApprovalBody(
            expires_at.isoformat(),
            binding,
            approvals_required=rule.approvals_required(destroy=options.destroy, destroys=destroys),
            second_approval_reason=rule.why(destroy=options.destroy, destroys=destroys),
            separation_of_duties=rule.separation_of_duties,
        )
        uow.parts.put(run.id, "approval", state=ApprovalState.WAITING, body=body.to_body(), now=now)
        uow.runs.move(
            run,
            S.AWAITING_APPROVAL,
            actor=WORKFLOW,
            run_updates={"approval_expires_at": expires_at},
        )
        try:
            return committed_move(uow.commit()).run
        except TransitionRejected as refused:
            ended = _ended_status(refused)
            if ended is not None:
                # Canceled since its last read: the workflow ends quietly, as a step that
                # read it so would.
                raise RunEnded(run.id, ended) from None
            raise

    def _approval_wait(self, run: Run) -> int:
        """How long the approval's wait may last: until the persisted deadline, in whole
        seconds rounded up with a second to spare, so that the wait never times out
        before it (arbitration would find the approval pending)."""
        assert run.approval_expires_at is not None
        remaining = (run.approval_expires_at - self._clock.now()).total_seconds()
        return max(1, math.ceil(remaining) + 1)

    def wait_for_approval(self, run_id: str, token: str) -> dict[str, Any]:
        """Store the approval wait's token; a decision already recorded resumes at once.

        The token is written without a read first, conditioned on the run awaiting
        approval and its approval undecided: the wait usually starts long before anyone
        decides. A refused write wrote nothing and reads what happened instead: a
        decision resumes the wait, an ended run ends it (``RunEnded``)."""
        with self._units() as uow:
            uow.runs.expect_status(
                run_id,
                S.AWAITING_APPROVAL,
                on_refused=lambda held: ConcurrentChange(
                    f"run {run_id} is {held or 'missing'}, not awaiting approval"
                ),
            )
            uow.parts.change(
                run_id, "approval", expected_state=UNDECIDED, token=token, now=self._clock.now()
            )
            try:
                uow.commit()
                return {"waiting": True}
            except ConcurrentChange:
                pass
            _, parts = self._active_in(uow, run_id, ["approval"])
            approval = required_part(parts, run_id, "approval")
            if approval.state in UNDECIDED:
                # Refused, yet undecided and not ended: the workflow retries the step.
                raise ConcurrentChange(f"run {run_id}: its approval wait could not be stored")
        self._workflow.resume(token, {"decision": _decision(approval)})
        return {"waiting": False}

    def arbitrate_expiry(self, run_id: str) -> dict[str, Any]:
        """The approval wait timed out: the database decides what happened.

        The expiry is one unit of work: the approval's change from waiting to expired
        and the run's move to expired (with the writer reservation's release), written
        together or not at all. A decision recorded first is what happened, read before
        or, when it landed after the read, once the expiry's commit is refused."""
        with self._units() as uow:
            run, parts = self._active_in(uow, run_id, ["approval"])
            approval = required_part(parts, run_id, "approval")
            if approval.state in {ApprovalState.APPROVED, ApprovalState.REJECTED}:
                return {"decision": _decision(approval)}
            now = self._clock.now()
            if run.approval_expires_at is not None and now < run.approval_expires_at:
                return {"decision": "pending"}
            uow.parts.change(
                run_id,
                "approval",
                expected_state=UNDECIDED,
                state=ApprovalState.EXPIRED,
                token=None,
                now=now,
            )
            uow.runs.move(run, S.EXPIRED, actor=WORKFLOW, reason="APPROVAL_EXPIRED")
            try:
                moved = uow.commit()
            except (ConcurrentChange, TransitionRejected):
                stored = uow.parts.get(run_id, "approval")
                if stored is None:
                    raise NotFound("approval of run", run_id) from None
                return {"decision": _decision(stored)}
        if moved is not None:
            hand_off(self._workflow, moved.handoff)
        return {"decision": "expired"}

    def fail(self, run_id: str, phase: str, error: str) -> dict[str, Any]:
        """A workflow step failed or timed out: end the run without claiming success.

        One unit of work: the run and the phase's attempt read through it, and the end
        ``end_lost_phase`` describes intended and committed there."""
        stage = Phase(phase) if phase in {p.value for p in Phase} else None
        with self._units() as uow:
            run, parts = uow.runs.with_parts(run_id, [attempt_part(stage)] if stage else [])
            attempt = parts.get(attempt_part(stage)) if stage else None
            target = self._end_lost_phase(uow, run, stage, attempt, f"{phase}: {error}"[:200])
        if target is None:
            return {"status": run.status.value}
        open_attempt = attempt if attempt and attempt.state in OPEN_ATTEMPT else None
        reference = AttemptBody.from_body(open_attempt.body).sandbox_ref if open_attempt else None
        if reference:
            # Whatever it is still doing, its result can no longer be accepted.
            self._launcher.stop(str(reference))
        return {"status": target.value}

    def end_lost_phase(
        self,
        run: Run,
        stage: Phase | None,
        attempt: RunPart | None,
        reason: str,
        *,
        attempt_reason: str | None = None,
    ) -> S | None:
        """End ``run`` as a lost runner phase (or a failed step) ends it, in one unit of
        work conditioned on the run and ``attempt`` exactly as read; None if it has ended.

        A plan fails; an apply whose start was proven needs recovery and one whose
        start was not is uncertain (or failed, if no attempt was ever recorded); the
        open attempt closes ``lost`` (noting ``attempt_reason``) and the apply record
        says what is known. The caller stops the sandbox, if it still runs."""
        with self._units() as uow:
            return self._end_lost_phase(
                uow, run, stage, attempt, reason, attempt_reason=attempt_reason
            )

    def _end_lost_phase(
        self,
        uow: UnitOfWork,
        run: Run,
        stage: Phase | None,
        attempt: RunPart | None,
        reason: str,
        *,
        attempt_reason: str | None = None,
    ) -> S | None:
        """``end_lost_phase`` through ``uow``: the open attempt's close, the apply
        record's change and the run's move (with the writer reservation's release and
        the apply lock the run holds) intended there and written by one commit, all or
        nothing; a refused commit raises the first refused intent's error."""
        open_attempt = attempt if attempt and attempt.state in OPEN_ATTEMPT else None
        target = failure_outcome(run.status, during_apply=stage is Phase.APPLY)
        if target is None:
            return None
        if target is S.APPLY_START_UNCERTAIN and attempt is None:
            # No attempt was recorded, so no sandbox was launched: the start is proven
            # not to have happened (a start refused for capacity, say). The move's
            # release gives back the apply lock the run holds, if any.
            target = S.APPLY_FAILED
        now = self._clock.now()
        evidence = {"reason": attempt_reason} if attempt_reason else {}
        if stage and open_attempt:
            uow.attempts.close(open_attempt, AttemptState.LOST, now=now, **evidence)
        record = uow.parts.get(run.id, "apply") if stage is Phase.APPLY else None
        if record is not None and record.state in OPEN_APPLY_RECORD:
            # The apply record says what is known: nothing started, or nothing certain.
            known = (
                ApplyRecordState.FAILED if target is S.APPLY_FAILED else ApplyRecordState.UNCERTAIN
            )
            check_move(PartKind.APPLY_RECORD, record.state, known)
            uow.parts.change(
                run.id,
                "apply",
                expected_state=record.state,
                state=known,
                body={**record.body, "reason": reason},
                now=now,
            )
        uow.runs.move(run, target, actor=WORKFLOW, reason=reason)
        moved = uow.commit()
        if moved is not None:
            hand_off(self._workflow, moved.handoff)
        return target


def _may_ask_approval(run: Run) -> bool:
    """Whether the policy step may evaluate or ask for approval: what reads the workspace."""
    return run.status in {S.PLAN_COMPLETE, S.POLICY_EVALUATING, S.POLICY_PASSED}


def _ended_status(refused: TransitionRejected) -> S | None:
    """The status a refused move found, if the run has ended."""
    found = str((refused.current or {}).get("status"))
    status = S(found) if found in set(S) else None
    return status if status is not None and status.is_terminal else None


def _decision(approval: RunPart) -> str:
    """The approval's recorded decision, or its state while it has none."""
    return ApprovalBody.from_body(approval.body).decision or approval.state
