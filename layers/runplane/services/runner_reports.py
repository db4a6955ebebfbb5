"""Runner reports: heartbeats, the apply-start move and the phase results.

A report is authenticated by the runner's session before it gets here; the
result commits with the run's move and resumes the workflow's wait. What a report
names is not believed: each artifact must be its attempt's own registered upload of
the right kind and digest (``domain.report_evidence``). A plan report that fails
that check ends the run ``plan_failed`` instead of giving it plan evidence; an apply
report keeps its outcome (state is what counts there) and drops the log it cannot
vouch for. An apply start that can never succeed ends the run ``apply_failed``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from runplane.domain.artifacts import ArtifactRecord, Produced
from runplane.domain.capabilities import Binding, Phase
from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.errors import (
    ApplyStartRefused,
    Conflict,
    NotFound,
    ReportRefused,
    RunnerAuthorityRefused,
)
from runplane.domain.ids import IdKind
from runplane.domain.parts import (
    OPEN_ATTEMPT,
    ApplyRecord,
    ApplyRecordState,
    ApprovalBody,
    ApprovalState,
    AttemptBody,
    AttemptState,
    PartKind,
    PlanEvidence,
    PlanEvidenceState,
    RunPart,
    check_move,
    required_part,
)
from runplane.domain.publications import Publication, published_by
from runplane.domain.report_evidence import apply_start_refusal, named_by, refusal
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import (
    CredentialsRequired,
    Failed,
    Interrupted,
    Planned,
    RunnerReport,
    check_phase,
    succeeded,
)
from runplane.services import drift
from runplane.services.attempts import attempt_part
from runplane.services.policy import RESERVED
from runplane.services.publications import apply_identity, publication_of
from runplane.services.unit_of_work import UnitOfWork
from runplane.services.workflow_base import S, WorkflowService, committed_move
from runplane.services.writer import hand_off

logger = logging.getLogger("runplane.runner")

# An apply's publications back to its pinned predecessor that a result may span.
MAX_PUBLICATIONS = 1024


class RunnerReports(WorkflowService):
    """What a runner reports, committed and handed back to the workflow."""

    def heartbeat(self, run_id: str, phase: Phase, attempt_id: str) -> bool:
        """The runner is alive: keep the workflow's wait for this attempt from timing out."""
        with self._units() as uow:
            attempt = uow.parts.get(run_id, attempt_part(phase))
        if attempt is None:
            raise NotFound(f"{attempt_part(phase)} of run", run_id)
        if AttemptBody.from_body(attempt.body).attempt_id != attempt_id or attempt.token is None:
            return False
        return self._workflow.heartbeat(attempt.token)

    def report_plan(
        self,
        run_id: str,
        attempt_id: str,
        report: RunnerReport,
        uploads: Sequence[ArtifactRecord] = (),
    ) -> str:
        """Commit a plan attempt's authenticated result and resume the workflow.
        ``uploads``: the verified uploads of the reporting call, registered with the
        report if it is taken (``SandboxTransfers.checked``). A report naming an
        artifact it cannot vouch for ends the run ``plan_failed`` (``ReportRefused``).
        The result is one unit of work: the attempt's close, the uploads, the plan's
        evidence with its policy check and apply record, and the run's move."""
        check_phase(report, Phase.PLAN)
        with self._units() as uow:
            run, parts, held = _read_report(uow, run_id, Phase.PLAN, [], report, uploads)
            attempt = required_part(parts, run.id, attempt_part(Phase.PLAN))
            if AttemptBody.from_body(attempt.body).attempt_id != attempt_id:
                raise Conflict(f"attempt {attempt_id} is not run {run.id}'s plan attempt")
            if run.status is not S.PLANNING:
                raise Conflict(
                    f"run {run.id} is {run.status}; its plan result was already recorded"
                )
            refused = refusal(
                named_by(report), held, organization_id=run.organization_id, attempt_id=attempt_id
            )
            if refused is not None:
                self._refuse_plan(
                    uow, run, attempt, report, f"the plan report was refused: {refused}"
                )
            target = self._plan_result(uow, run, attempt, attempt_id, report, uploads)
            moved = uow.commit()
        # A plan that failed releases the writer (handed to the run next in line).
        hand_off(self._workflow, moved.handoff if moved else None)
        if attempt.token:
            # The plan JSON's ID (public) lets the policy step read its record with the run.
            output = {"outcome": target.value}
            if target is S.PLAN_COMPLETE and isinstance(report, Planned):
                output["plan_json_artifact_id"] = report.plan_json_artifact_id
            self._workflow.resume(attempt.token, output)
        return target.value

    def _plan_result(
        self,
        uow: UnitOfWork,
        run: Run,
        attempt: RunPart,
        attempt_id: str,
        report: RunnerReport,
        uploads: Sequence[ArtifactRecord],
    ) -> RunStatus:
        """The intents of a plan report the control plane takes; the status it moves to."""
        now = self._clock.now()
        uow.artifacts.register(uploads, now)
        uow.attempts.close(
            attempt,
            AttemptState.SUCCEEDED if succeeded(report) else AttemptState.FAILED,
            now=now,
            **_attempt_evidence(report),
        )
        actor = f"runner:{attempt_id}"
        if not isinstance(report, Planned):
            assert isinstance(report, Failed)  # check_phase: a plan reports no apply
            credentials = isinstance(report, CredentialsRequired)
            target = S.PLAN_CREDENTIALS_REQUIRED if credentials else S.PLAN_FAILED
            uow.runs.move(run, target, actor=actor, reason=report.reason[:200])
            return target
        evidence = PlanEvidence(
            attempt_id=attempt_id,
            plan_artifact_id=report.plan_artifact_id,
            plan_sha256=report.plan_sha256,
            plan_json_artifact_id=report.plan_json_artifact_id,
            plan_json_sha256=report.plan_json_sha256,
            log_artifact_id=report.log_artifact_id,
            summary=report.summary.as_dict(),
            has_changes=report.has_changes,
            engine_version=report.engine_version,
            predecessor_state_version_id=run.predecessor_sv_id,
        )
        uow.parts.put(
            run.id, "plan", state=PlanEvidenceState.COMMITTED, body=evidence.to_body(), now=now
        )
        # Reserved atomically with the plan: clients never race its creation.
        policy = {"id": self._ids.new(IdKind.POLICY_CHECK), "input_digest": None}
        uow.parts.put(run.id, "policy", state=RESERVED, body=policy, now=now)
        if run.kind.may_apply:
            uow.parts.put(
                run.id,
                "apply",
                state=ApplyRecordState.PENDING,
                body=ApplyRecord().to_body(),
                now=now,
            )
        uow.runs.move(
            run,
            S.PLAN_COMPLETE,
            actor=actor,
            run_updates={"plan_has_changes": report.has_changes},
        )
        return S.PLAN_COMPLETE

    def _refuse_plan(
        self, uow: UnitOfWork, run: Run, attempt: RunPart, report: RunnerReport, reason: str
    ) -> NoReturn:
        """End the run ``plan_failed`` for a report it cannot take: no plan evidence, no
        policy check, no apply record and none of the call's uploads are written; the
        attempt closes failed (naming no artifact) and the workflow's wait ends."""
        attempt_id = AttemptBody.from_body(attempt.body).attempt_id
        logger.warning(
            "runner report refused",
            extra={"run_id": run.id, "attempt_id": attempt_id, "reason": reason},
        )
        uow.attempts.close(
            attempt,
            AttemptState.FAILED,
            now=self._clock.now(),
            log_artifact_id=None,
            engine_seconds=report.engine_seconds,
            reason=reason,
        )
        uow.runs.move(run, S.PLAN_FAILED, actor=f"runner:{attempt_id}", reason=reason[:200])
        moved = uow.commit()
        hand_off(self._workflow, moved.handoff if moved else None)
        if attempt.token:
            self._workflow.resume(attempt.token, {"outcome": S.PLAN_FAILED.value})
        raise ReportRefused(run.id, S.PLAN_FAILED, reason)

    def apply_start(
        self, handle: str, binding: Binding, request: Mapping[str, str]
    ) -> dict[str, str]:
        """Redeem the apply-start capability together with the move to ``applying``: one
        unit of work, so the run applies only if both happen. A start that can never
        succeed (not the approved plan) ends the run, refused
        (``refuse_unstartable_apply``). A retry with the identical request gets the
        stored result; one with any changed input is refused."""
        with self._units() as uow:
            # The plan, and what deciding the start reads (the attempt, the approval), in
            # one request.
            run, parts = uow.runs.with_parts(
                binding.run_id, ["plan", attempt_part(Phase.APPLY), "approval"]
            )
            self.refuse_unstartable_apply(uow, handle, binding, request, (run, parts))
            attempt = required_part(parts, run.id, attempt_part(Phase.APPLY)).body
            result = {"lock_id": str(attempt["lock_id"]), "fence": str(attempt["fence"])}
            moving = None
            if run.status is RunStatus.AWAITING_APPROVAL:
                self._intend_applying(uow, run, parts, binding.attempt_id)
                moving = run
            return self._capabilities.redeem_apply_start(
                uow, handle, binding, request, result, moving=moving
            )

    def _intend_applying(
        self, uow: UnitOfWork, run: Run, parts: dict[str, RunPart | None], attempt_id: str
    ) -> None:
        """The move to ``applying`` with the apply record started, intended on ``uow``
        for the runner's apply-start redemption to commit. ``parts``: the run's (at
        least) apply attempt and approval."""
        attempt = required_part(parts, run.id, attempt_part(Phase.APPLY))
        approval = required_part(parts, run.id, "approval")
        approved = approval.state == ApprovalState.APPROVED
        if AttemptBody.from_body(attempt.body).attempt_id != attempt_id or not approved:
            raise Conflict(f"run {run.id} is not approved for attempt {attempt_id}")
        uow.parts.change(
            run.id,
            "apply",
            expected_state=ApplyRecordState.STARTING,
            state=ApplyRecordState.STARTED,
            now=self._clock.now(),
        )
        uow.runs.move(run, S.APPLYING, actor=f"runner:{attempt_id}")

    def refuse_unstartable_apply(
        self,
        uow: UnitOfWork,
        handle: str,
        binding: Binding,
        request: Mapping[str, str],
        read: tuple[Run, dict[str, RunPart | None]],
    ) -> None:
        """Return if the apply may start with what the runner presents; otherwise refuse
        it for good (``ApplyStartRefused``).

        The plan a runner presents, and the approval it starts from, do not change, so
        a start refused for them can never succeed: rather than leave the run waiting
        for a heartbeat timeout, the refusal closes the attempt failed, ends the run
        ``apply_failed`` (the engine never ran, so no state was touched and the writer
        reservation is released) and ends the workflow's wait. That move redeems the
        apply-start capability in its own commit of ``uow``, so only its holder can end
        the run this way (a wrong handle refuses the whole commit), and a session that
        is not the run's open apply attempt's, or a run that moved on, changes nothing.
        ``read``: the run with its plan, apply attempt and approval."""
        run, parts = read
        plan, approval = parts.get("plan"), parts.get("approval")
        why = apply_start_refusal(
            PlanEvidence.from_body(plan.body) if plan else None,
            ApprovalBody.from_body(approval.body).binding if approval else None,
            request.get("plan_sha256"),
        )
        if why is None:
            return
        reason = f"the apply start was refused: {why}"
        attempt = self._own_apply_attempt(run, parts, binding)
        if (
            run.status is not S.AWAITING_APPROVAL
            or attempt.state not in OPEN_ATTEMPT
            or approval is None
            or approval.state != ApprovalState.APPROVED
        ):
            # A replay after the run ended, or a start raced by another ending: refused,
            # and nothing more is written.
            raise ApplyStartRefused(run.id, run.status, reason)
        # Logged as a refused redemption (by code and binding), whatever refuses it.
        with self._capabilities.redeeming_apply_start(binding):
            self._end_unstartable_apply(uow, run, attempt, handle, binding, request, reason)

    def _end_unstartable_apply(
        self,
        uow: UnitOfWork,
        run: Run,
        attempt: RunPart,
        handle: str,
        binding: Binding,
        request: Mapping[str, str],
        reason: str,
    ) -> NoReturn:
        """One commit: the run to ``apply_failed`` with its audit event, the writer
        released, the attempt closed failed, its apply record failed (the move closes
        it) and the capability redeemed; then the workflow's wait ends."""
        uow.attempts.close(attempt, AttemptState.FAILED, now=self._clock.now(), reason=reason)
        self._capabilities.refused_apply_start(uow, handle, binding, request, reason)
        uow.runs.move(
            run, S.APPLY_FAILED, actor=f"runner:{binding.attempt_id}", reason=reason[:200]
        )
        self._hand_off(committed_move(uow.commit()))
        if attempt.token:
            self._workflow.resume(attempt.token, {"outcome": S.APPLY_FAILED.value})
        raise ApplyStartRefused(run.id, S.APPLY_FAILED, reason)

    @staticmethod
    def _own_apply_attempt(run: Run, parts: dict[str, RunPart | None], binding: Binding) -> RunPart:
        """The run's apply attempt, if ``binding`` is its sandbox's (open or not)."""
        attempt = parts.get(attempt_part(Phase.APPLY))
        body = AttemptBody.from_body(attempt.body) if attempt else None
        if (
            attempt is None
            or body is None
            or binding.phase is not Phase.APPLY
            or (body.attempt_id, body.sandbox_id) != (binding.attempt_id, binding.sandbox_id)
        ):
            raise RunnerAuthorityRefused(run.id, "only its apply attempt may start the apply")
        return attempt

    def report_apply(
        self,
        run_id: str,
        attempt_id: str,
        report: RunnerReport,
        uploads: Sequence[ArtifactRecord] = (),
    ) -> str:
        """Commit an apply result. Success needs a confirmed publication: the current
        state must carry this run's exact attempt, sandbox, lock and fence.
        ``uploads``: as ``report_plan``'s. A log the attempt cannot vouch for is not
        recorded (the outcome is: what the apply did to state is what counts); the
        attempt's ``log_refused`` and the run's status reason say why. An engine that
        a signal ended (``Interrupted``) leaves the run ``apply_interrupted``, holding
        the workspace for recovery."""
        check_phase(report, Phase.APPLY)
        with self._units() as uow:
            run, parts, held = _read_report(uow, run_id, Phase.APPLY, ["apply"], report, uploads)
            attempt = required_part(parts, run.id, attempt_part(Phase.APPLY))
            granted = AttemptBody.from_body(attempt.body)
            if granted.attempt_id != attempt_id:
                raise Conflict(f"attempt {attempt_id} is not run {run.id}'s apply attempt")
            if run.status is not S.APPLYING:
                raise Conflict(
                    f"run {run.id} is {run.status}; its apply result was already recorded"
                )
            log_refused = refusal(
                named_by(report), held, organization_id=run.organization_id, attempt_id=attempt_id
            )
            now = self._clock.now()
            workspace = uow.writer.workspace(run.workspace_id)
            confirmed, published, pointer = self._publication(uow, run, granted, workspace)
            target, reason = _apply_outcome(report, confirmed)
            apply_state = {
                S.SUCCEEDED: ApplyRecordState.SUCCEEDED,
                S.NEEDS_RECOVERY: ApplyRecordState.UNCERTAIN,
                S.APPLY_INTERRUPTED: ApplyRecordState.UNCERTAIN,
            }.get(target, ApplyRecordState.FAILED)
            check_move(PartKind.APPLY_RECORD, ApplyRecordState.STARTED, apply_state)
            evidence = _attempt_evidence(report)
            if log_refused is not None:
                logger.warning(
                    "runner report's log refused",
                    extra={"run_id": run.id, "attempt_id": attempt_id, "reason": log_refused},
                )
                evidence |= {"log_artifact_id": None, "log_refused": log_refused}
            record = required_part(parts, run.id, "apply")

            def intend(unit: UnitOfWork) -> None:
                closed = AttemptState.SUCCEEDED if succeeded(report) else AttemptState.FAILED
                unit.attempts.close(attempt, closed, now=now, **evidence)
                unit.parts.change(
                    run.id,
                    "apply",
                    expected_state=ApplyRecordState.STARTED,
                    state=apply_state,
                    body={
                        **record.body,
                        "resulting_state_version_id": pointer if published else None,
                        "state_published": published,
                        "reason": reason,
                    },
                    now=now,
                )
                if uploads:
                    unit.artifacts.register(uploads, now)

            # An applied run makes the state match the infrastructure: recorded drift clears.
            cleared = (
                drift.on_applied(uow.drift.get(run.workspace_id), run, now)
                if target is S.SUCCEEDED
                else None
            )
            moved, _ = self._commit_noting_drift(
                run,
                target,
                cleared,
                intend,
                uow=uow,
                actor=f"runner:{attempt_id}",
                reason=_with_log_note(reason, log_refused),
                state_published=published,
                # Release exactly the lock this attempt was granted (StaleFence if revoked).
                lock=ApplyLock(
                    run.workspace_id, str(granted.lock_id), int(granted.fence or 0), run.id
                ),
            )
        self._hand_off(moved)
        if attempt.token:
            self._workflow.resume(attempt.token, {"outcome": target.value})
        return target.value

    @staticmethod
    def _publication(
        uow: UnitOfWork, run: Run, attempt: AttemptBody, workspace: Workspace
    ) -> tuple[bool, bool, str | None]:
        """(confirmed, published, pointer): did this attempt publish the current state?

        Confirmed means the current version, and every version back to the run's
        pinned predecessor, was published by this attempt (``published_by``: an apply
        may publish intermediate snapshots, at most ``MAX_PUBLICATIONS`` of them).
        Published means the current version is this run's, confirmed or not. The
        current version's facts come with the workspace when it carries them
        (``Workspace.publication_at``); the others are read.
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
            version = _publication_at(uow, workspace, cursor)
            if version is None:
                return False, published, pointer
            if cursor == pointer:
                published = version.run_id == run.id
            if not published_by(version, identity):
                return False, published, pointer
            cursor = version.predecessor_id
        return False, published, pointer


def _publication_at(uow: UnitOfWork, workspace: Workspace, sv_id: str | None) -> Publication | None:
    """Version ``sv_id`` as the publication check sees it: the workspace's facts of its
    current version, or the version read (None if there is none)."""
    carried = workspace.publication_at(sv_id)
    if carried is not None:
        return carried
    try:
        return publication_of(uow.state_versions.get(sv_id or ""))
    except NotFound:
        return None


def _apply_outcome(report: RunnerReport, confirmed: bool) -> tuple[RunStatus, str | None]:
    """Where an apply's report leaves its run, and why: success needs the engine's and a
    confirmed publication; an engine a signal ended leaves the run for recovery."""
    if succeeded(report) and confirmed:
        return S.SUCCEEDED, None
    if succeeded(report):
        return S.NEEDS_RECOVERY, "the published state could not be confirmed"
    if isinstance(report, Interrupted):
        # The engine stopped mid-apply: whatever it published, the state may be partly
        # applied, so the run keeps the workspace for recovery.
        return S.APPLY_INTERRUPTED, report.reason[:200]
    assert isinstance(report, Failed)  # check_phase: an apply reports no plan
    return S.APPLY_FAILED, report.reason[:200]


def _attempt_evidence(report: RunnerReport) -> dict[str, Any]:
    """What a closed attempt records of its report (as it always has: absent is null)."""
    return {
        "log_artifact_id": report.log_artifact_id,
        "engine_seconds": report.engine_seconds,
        "reason": report.reason if isinstance(report, Failed) else None,
    }


def _with_log_note(reason: str | None, log_refused: str | None) -> str | None:
    """The run's status reason, noting a log the report named but could not vouch for."""
    if log_refused is None:
        return reason
    note = f"the apply's log was refused: {log_refused}"
    return (f"{reason}; {note}" if reason else note)[:200]


def _read_report(
    uow: UnitOfWork,
    run_id: str,
    phase: Phase,
    other_parts: list[str],
    report: RunnerReport,
    uploads: Sequence[ArtifactRecord],
) -> tuple[Run, dict[str, RunPart | None], dict[str, Produced]]:
    """The run, its ``phase`` attempt and ``other_parts``, and what is held of each
    artifact the report names: the call's own uploads as checked, the others' records
    read with the run in its one request (none when the uploads are all)."""
    uploaded = {record.artifact.id: record for record in uploads}
    unread = [n.artifact_id for n in named_by(report) if n.artifact_id not in uploaded]
    run, parts, records = uow.runs.with_parts_and_artifacts(
        run_id, [attempt_part(phase), *other_parts], unread
    )
    held = {artifact_id: record.produced for artifact_id, record in records.items()}
    held.update((artifact_id, record.produced) for artifact_id, record in uploaded.items())
    return run, parts, held
