"""Runner reports: heartbeats, the apply-start move and the phase results.

A report is authenticated by the runner's session before it gets here; the
result commits with the run's move and resumes the workflow's wait.
"""

from __future__ import annotations

from typing import Any

from runplane.domain.capabilities import Phase
from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.errors import (
    Conflict,
    NotFound,
)
from runplane.domain.ids import IdKind
from runplane.domain.parts import (
    ApplyRecord,
    ApplyRecordState,
    ApprovalState,
    AttemptBody,
    AttemptState,
    PartKind,
    PlanEvidence,
    PlanEvidenceState,
    check_move,
)
from runplane.domain.publications import published_by
from runplane.domain.runner_reports import (
    CredentialsRequired,
    Failed,
    Planned,
    RunnerReport,
    check_phase,
    succeeded,
)
from runplane.services import drift
from runplane.services.attempts import attempt_part, close_attempt
from runplane.services.policy import RESERVED
from runplane.services.publications import apply_identity, publication_of
from runplane.services.workflow_base import S, WorkflowService
from runplane.store import run_batch, run_parts, state_versions
from runplane.store import workspaces as workspace_store
from runplane.store.transaction import Transaction

# An apply's publications back to its pinned predecessor that a result may span.
MAX_PUBLICATIONS = 1024


class RunnerReports(WorkflowService):
    """What a runner reports, committed and handed back to the workflow."""

    def heartbeat(self, run_id: str, phase: Phase, attempt_id: str) -> bool:
        """The runner is alive: keep the workflow's wait for this attempt from timing out."""
        attempt = run_parts.require(run_id, attempt_part(phase))
        if AttemptBody.from_body(attempt.body).attempt_id != attempt_id or attempt.token is None:
            return False
        return self._workflow.heartbeat(attempt.token)

    def report_plan(
        self,
        run_id: str,
        attempt_id: str,
        report: RunnerReport,
        registered: Transaction | None = None,
    ) -> str:
        """Commit a plan attempt's authenticated result and resume the workflow.
        ``registered``: the writes registering the uploads the report names, committed
        with it."""
        check_phase(report, Phase.PLAN)
        run, parts = run_batch.run_and_parts(run_id, [attempt_part(Phase.PLAN)])
        attempt = run_batch.require(parts, run.id, attempt_part(Phase.PLAN))
        if AttemptBody.from_body(attempt.body).attempt_id != attempt_id:
            raise Conflict(f"attempt {attempt_id} is not run {run.id}'s plan attempt")
        if run.status is not S.PLANNING:
            raise Conflict(f"run {run.id} is {run.status}; its plan result was already recorded")
        now = self._clock.now()
        done = Transaction().extend(
            close_attempt(
                run.id,
                attempt_part(Phase.PLAN),
                attempt,
                AttemptState.SUCCEEDED if succeeded(report) else AttemptState.FAILED,
                now,
                **_attempt_evidence(report),
            )
        )
        if isinstance(report, Planned):
            has_changes = report.has_changes
            evidence = PlanEvidence(
                attempt_id=attempt_id,
                plan_artifact_id=report.plan_artifact_id,
                plan_sha256=report.plan_sha256,
                plan_json_artifact_id=report.plan_json_artifact_id,
                plan_json_sha256=report.plan_json_sha256,
                log_artifact_id=report.log_artifact_id,
                summary=report.summary.as_dict(),
                has_changes=has_changes,
                engine_version=report.engine_version,
                predecessor_state_version_id=run.predecessor_sv_id,
            )
            writes = [
                done,
                *([registered] if registered else []),
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
            assert isinstance(report, Failed)  # check_phase: a plan reports no apply
            credentials = isinstance(report, CredentialsRequired)
            target = S.PLAN_CREDENTIALS_REQUIRED if credentials else S.PLAN_FAILED
            moved = self._lifecycle.move(
                run,
                target,
                actor=f"runner:{attempt_id}",
                reason=report.reason[:200],
                extra_writes=[done, *([registered] if registered else [])],
            )
            self._hand_off(moved)
        if attempt.token:
            self._workflow.resume(attempt.token, {"outcome": target.value})
        return target.value

    def apply_start_writes(
        self,
        run_id: str,
        attempt_id: str,
        read: tuple[Run, dict[str, run_parts.RunPart | None]] | None = None,
    ) -> Transaction:
        """The uncommitted move to ``applying``, committed together with the runner's
        apply-start redemption: the run applies only if both happen. ``read``: the run
        with (at least) its apply attempt and approval, if the caller read them."""
        run, parts = read or run_batch.run_and_parts(
            run_id, [attempt_part(Phase.APPLY), "approval"]
        )
        attempt = run_batch.require(parts, run.id, attempt_part(Phase.APPLY))
        approval = run_batch.require(parts, run.id, "approval")
        approved = approval.state == ApprovalState.APPROVED
        if AttemptBody.from_body(attempt.body).attempt_id != attempt_id or not approved:
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

    def report_apply(
        self,
        run_id: str,
        attempt_id: str,
        report: RunnerReport,
        registered: Transaction | None = None,
    ) -> str:
        """Commit an apply result. Success needs a confirmed publication: the current
        state must carry this run's exact attempt, sandbox, lock and fence.
        ``registered``: as ``report_plan``'s."""
        check_phase(report, Phase.APPLY)
        run, parts = run_batch.run_and_parts(run_id, [attempt_part(Phase.APPLY), "apply"])
        attempt = run_batch.require(parts, run.id, attempt_part(Phase.APPLY))
        granted = AttemptBody.from_body(attempt.body)
        if granted.attempt_id != attempt_id:
            raise Conflict(f"attempt {attempt_id} is not run {run.id}'s apply attempt")
        if run.status is not S.APPLYING:
            raise Conflict(f"run {run.id} is {run.status}; its apply result was already recorded")
        now = self._clock.now()
        workspace = workspace_store.get_workspace(run.workspace_id)
        confirmed, published, pointer = self._publication(run, granted, workspace)
        engine_ok = succeeded(report)
        if engine_ok and confirmed:
            target, reason = S.SUCCEEDED, None
        elif engine_ok:
            target, reason = S.NEEDS_RECOVERY, "the published state could not be confirmed"
        else:
            assert isinstance(report, Failed)  # check_phase: an apply reports no plan
            target, reason = S.APPLY_FAILED, report.reason[:200]
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
                **_attempt_evidence(report),
            ),
            run_parts.change(
                run.id,
                "apply",
                expected_state=ApplyRecordState.STARTED,
                state=apply_state,
                body={
                    **run_batch.require(parts, run.id, "apply").body,
                    "resulting_state_version_id": pointer if published else None,
                    "state_published": published,
                    "reason": reason,
                },
                now=now,
            ),
            *([registered] if registered else []),
        ]
        # Release exactly the lock this attempt was granted (StaleFence if it was revoked).
        apply_lock = ApplyLock(
            run.workspace_id, str(granted.lock_id), int(granted.fence or 0), run.id
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
            workspace=workspace,
        )
        self._hand_off(moved)
        if attempt.token:
            self._workflow.resume(attempt.token, {"outcome": target.value})
        return target.value

    def _publication(
        self, run: Run, attempt: AttemptBody, workspace: Workspace
    ) -> tuple[bool, bool, str | None]:
        """(confirmed, published, pointer): did this attempt publish the current state?

        Confirmed means the current version, and every version back to the run's
        pinned predecessor, was published by this attempt (``published_by``: an apply
        may publish intermediate snapshots, at most ``MAX_PUBLICATIONS`` of them).
        Published means the current version is this run's, confirmed or not.
        """
        pointer = workspace.current_state_version_id
        if pointer is None or pointer == run.predecessor_sv_id:
            return False, False, pointer
        identity = apply_identity(run, attempt)
        published = False
        cursor: str | None = pointer
        for _ in range(MAX_PUBLICATIONS):
            if cursor == run.predecessor_sv_id:
                return published, published, pointer
            try:
                version = state_versions.get(cursor or "")
            except NotFound:
                return False, published, pointer
            ours = published_by(publication_of(version), identity)
            if cursor == pointer:
                published = (version.provenance or {}).get("run_id") == run.id
            if not ours:
                return False, published, pointer
            cursor = version.predecessor_id
        return False, published, pointer


def _attempt_evidence(report: RunnerReport) -> dict[str, Any]:
    """What a closed attempt records of its report (as it always has: absent is null)."""
    return {
        "log_artifact_id": report.log_artifact_id,
        "engine_seconds": report.engine_seconds,
        "reason": report.reason if isinstance(report, Failed) else None,
    }
