"""Operator recovery: release the writer authority a run kept because its apply
outcome is uncertain, with the operator's verdict on which state is the truth.

One submission prepares, copies and completes; each step is durable and safe
to repeat:

1. *prepare* records the operation (resolution, evidence, reason) and leases it
   to the operator for 15 minutes, before any artifact is copied;
2. *copy* (``import_emergency_state`` only) encrypts the emergency snapshot as
   the target state artifact and records it once; a replay verifies that
   artifact through EOF and fails closed if it is corrupt;
3. *complete* commits, in one transaction: the operation completed, the
   workspace fence advanced with the run's lock and reservation released (the
   reservation handed to the oldest waiter), the emergency snapshot published
   if any, the run's sessions and apply authorization revoked, expired or
   acknowledged pending uploads discarded, and ``run.recovered`` and
   ``state.recovered`` audit events.

Prepare and complete each re-verify the evidence against the database, and
the completing write is conditioned on every fact it was built from. The run
keeps its status as history; recovery never retries or replaces the apply.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from runplane.adapters.launchers import Launcher
from runplane.adapters.workflow import Workflow
from runplane.domain.artifacts import ArtifactKind
from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import ArtifactCorrupt, ConcurrentChange, NotFound
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.intents import Refused
from runplane.domain.parts import OPEN_ATTEMPT, ApplyRecord, AttemptBody, AttemptState, RunPart
from runplane.domain.recovery import (
    LEASE,
    MAX_TAKEOVERS,
    RECOVERABLE_STATUSES,
    NotRecoverable,
    Recovery,
    RecoveryBlocked,
    RecoveryBody,
    RecoveryLeased,
    RecoveryRefused,
    RecoveryRequest,
    RecoveryState,
    RecoveryTargetCorrupt,
    Resolution,
    check_emergency_successor,
    check_request,
    lease_remaining_seconds,
    read_snapshot,
    require_recovery_rights,
    verify_chain,
)
from runplane.domain.state import FINALIZED, StateVersion
from runplane.services.artifacts import ArtifactStore
from runplane.services.publications import apply_identity, publication_of
from runplane.services.state import UPLOAD_URL_LIFETIME
from runplane.services.unit_of_work import UnitOfWork, UnitsOfWork

MAX_EMERGENCY_BYTES = 10_000_000


@dataclass(frozen=True)
class _Completion:
    result: dict[str, Any]
    sandboxes: list[str]
    handoff_token: str | None = field(default=None, repr=False)


class Recoveries:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        artifacts: ArtifactStore,
        workflow: Workflow,
        units: UnitsOfWork,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._artifacts = artifacts
        self._workflow = workflow
        self._units = units

    # -- submission -------------------------------------------------------------------------

    def recover(
        self, principal: Principal, run_id: str, request: RecoveryRequest, launcher: Launcher
    ) -> dict[str, Any]:
        """Prepare, copy and complete the recovery of ``run_id``; an exact replay resumes
        wherever the last submission stopped and a completed one returns its result."""
        now = self._clock.now()
        run = self._visible_run(principal, run_id)
        require_recovery_rights(principal, run.workspace_id, now)
        check_request(request)
        with self._units() as uow:
            recovery = uow.recoveries.get(run.id)
        if recovery is not None and recovery.state is RecoveryState.COMPLETED:
            if recovery.fingerprint != request.fingerprint():
                raise NotRecoverable(f"run {run.id} was already recovered ({recovery.id})")
            return dict(RecoveryBody.from_body(recovery.body).result or {})
        if recovery is None:
            recovery = self._prepare(principal, run, request)
            copied = None
        else:
            # A copied target is verified before anything is written (fail closed).
            copied = self._persisted_target(recovery)
            recovery = self._resume(principal, recovery, request)
        target = self._copy(recovery, request, copied)
        completion = self._complete(principal, run, recovery, target)
        # Once committed: stop what may still run, and wake the run next in line.
        for reference in completion.sandboxes:
            launcher.stop(reference)
        if completion.handoff_token is not None:
            self._workflow.resume(completion.handoff_token, {"held": True})
        return completion.result

    # -- prepare ------------------------------------------------------------------------------

    def _prepare(self, principal: Principal, run: Run, request: RecoveryRequest) -> Recovery:
        with self._units() as uow:
            workspace = self._eligible(uow, run)
            self._check_evidence(uow, run, workspace, request)
            self._pending_to_discard(uow, run, request)  # refuses now, not at completion
        now = self._clock.now()
        claimed = request.discard_claimed_upload
        emergency = request.emergency_state
        body = RecoveryBody(
            resolution=request.resolution.value,
            reason=request.reason,
            prepared_by=principal.ref,
            current_state_version_id=request.current_state_version_id,
            pre_apply_state_version_id=run.predecessor_sv_id,
            discard_claimed_upload=None
            if claimed is None
            else {"id": claimed.id, "claimed_at": claimed.claimed_at},
            emergency_sha256=None if emergency is None else request.emergency_sha256,
            emergency_size=None if emergency is None else len(emergency),
            target_state_version_id=None
            if emergency is None
            else self._ids.new(IdKind.STATE_VERSION),
        ).to_body()
        recovery = Recovery(
            id=self._ids.new(IdKind.RECOVERY),
            run_id=run.id,
            organization_id=run.organization_id,
            workspace_id=run.workspace_id,
            state=RecoveryState.PREPARED,
            holder=principal.ref,
            generation=1,
            fingerprint=request.fingerprint(),
            lease_expires_at=now + LEASE,
            target_artifact_id=None,
            body=body,
            created_at=now,
            updated_at=now,
        )
        with self._units() as uow:
            uow.recoveries.prepare(recovery)
            try:
                uow.commit()
            except ConcurrentChange:
                # Another submission prepared it first: this one is a replay or a contender.
                found = uow.recoveries.get(run.id)
                assert found is not None
                return self._resume(principal, found, request)
        return recovery

    def _resume(
        self, principal: Principal, recovery: Recovery, request: RecoveryRequest
    ) -> Recovery:
        """Continue a prepared recovery: its holder resumes (renewing a lapsed lease),
        another operator only after the lease ran out and only by explicit takeover."""
        if recovery.state is RecoveryState.COMPLETED:
            raise NotRecoverable(f"run {recovery.run_id} was already recovered ({recovery.id})")
        if recovery.fingerprint != request.fingerprint():
            raise RecoveryRefused(
                f"a recovery of run {recovery.run_id} with other evidence is prepared "
                f"({recovery.id}); resend exactly its resolution and evidence"
            )
        now = self._clock.now()
        mine = recovery.holder == principal.ref
        if mine and recovery.lease_expires_at > now:
            return recovery
        if not mine and recovery.lease_expires_at > now:
            raise RecoveryLeased(recovery.run_id, recovery.holder, recovery.lease_expires_at)
        record = RecoveryBody.from_body(recovery.body)
        if not mine:
            if not request.takeover:
                raise RecoveryRefused(
                    f"the lease of {recovery.holder} on this recovery ran out at "
                    f"{recovery.lease_expires_at.isoformat()}: confirm the takeover to continue it"
                )
            takeover = {
                "from": recovery.holder,
                "to": principal.ref,
                "at": now.isoformat(),
                "reason": request.reason[:200],
            }
            record = replace(record, takeovers=(*record.takeovers, takeover)[-MAX_TAKEOVERS:])
        body = record.to_body()
        expires = now + LEASE
        with self._units() as uow:
            uow.recoveries.lease(recovery, principal.ref, expires, body, now)
            uow.commit()
        return replace(
            recovery,
            holder=principal.ref,
            generation=recovery.generation + 1,
            lease_expires_at=expires,
            body=body,
        )

    # -- copy ----------------------------------------------------------------------------------

    def _persisted_target(self, recovery: Recovery) -> bytes | None:
        """The target state copied by an earlier submission, verified through EOF against
        the digest prepared from the operator's file; a mismatch is never repaired."""
        if recovery.target_artifact_id is None:
            return None
        try:
            raw = self._artifacts.read(recovery.organization_id, recovery.target_artifact_id)
        except (ArtifactCorrupt, NotFound):
            raise RecoveryTargetCorrupt(
                f"the target state of recovery {recovery.id} is corrupt or missing; "
                "it is not replaced: contact the platform operators"
            ) from None
        if (
            hashlib.sha256(raw).hexdigest()
            != RecoveryBody.from_body(recovery.body).emergency_sha256
        ):
            raise RecoveryTargetCorrupt(
                f"the target state of recovery {recovery.id} does not match its digest"
            )
        return raw

    def _copy(
        self, recovery: Recovery, request: RecoveryRequest, copied: bytes | None
    ) -> StateVersion | None:
        """The target state version (import only), its artifact copied exactly once."""
        record = RecoveryBody.from_body(recovery.body)
        if record.emergency_sha256 is None:
            return None
        artifact_id = recovery.target_artifact_id
        if artifact_id is not None and copied is not None:
            raw = copied
        else:
            assert request.emergency_state is not None
            raw = request.emergency_state
            artifact = self._artifacts.put(recovery.organization_id, ArtifactKind.STATE, [raw])
            try:
                with self._units() as uow:
                    uow.recoveries.record_target(recovery, artifact.id, self._clock.now())
                    uow.commit()
            except BaseException:
                self._artifacts.discard(artifact.id)
                raise
            artifact_id = artifact.id
        snapshot = read_snapshot(raw)
        return StateVersion(
            id=str(record.target_state_version_id),
            workspace_id=recovery.workspace_id,
            organization_id=recovery.organization_id,
            serial=snapshot.serial,
            lineage=snapshot.lineage,
            md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
            status=FINALIZED,
            created_at=self._clock.now(),
            created_by=recovery.holder,
            predecessor_id=record.pre_apply_state_version_id,
            sha256=record.emergency_sha256,
            size=len(raw),
            artifact_id=artifact_id,
            provenance={"recovery_id": recovery.id, "run_id": recovery.run_id},
        )

    # -- complete ------------------------------------------------------------------------------

    def _complete(
        self, principal: Principal, run: Run, recovery: Recovery, target: StateVersion | None
    ) -> _Completion:
        with self._units() as uow:
            completion = self._completion(uow, principal, run.id, recovery, target)
            uow.commit()
        return completion

    def _completion(
        self,
        uow: UnitOfWork,
        principal: Principal,
        run_id: str,
        recovery: Recovery,
        target: StateVersion | None,
    ) -> _Completion:
        """The completing intents, each conditioned on the facts it was built from."""
        run = uow.runs.get(run_id)
        workspace = self._eligible(uow, run)
        record = RecoveryBody.from_body(recovery.body)
        if workspace.current_state_version_id != record.current_state_version_id:
            raise RecoveryRefused(
                f"the current state of workspace {workspace.id} moved since the recovery was "
                "prepared; nothing was written"
            )
        chain = verify_current(uow, run, workspace)
        if target is not None and workspace.current_state_version_id != run.predecessor_sv_id:
            raise RecoveryRefused(
                "an emergency state is imported only while the run's pre-apply state is "
                "still current; it never overwrites a newer version"
            )
        discards = self._pending_to_discard(uow, run, None, recovery)
        oldest = uow.writer.oldest_waiter(workspace.id) if workspace.queue_length else None
        now = self._clock.now()
        result: dict[str, Any] = {
            "recovery_id": recovery.id,
            "run_id": run.id,
            "status": RecoveryState.COMPLETED.value,
            "resolution": record.resolution,
            "recovered_by": principal.ref,
            "completed_at": now.isoformat(),
            "fence": workspace.fence + 1,
            "state_version_id": target.id if target else workspace.current_state_version_id,
            "publications_verified": chain,
            "discarded_uploads": [
                {"id": version.id, "claimed_at": _iso(version.claimed_at)} for version in discards
            ],
            "writer_handed_to": oldest.run_id if oldest else None,
        }
        parts = uow.parts.all_of(run.id)
        uow.recoveries.complete(recovery, replace(record, result=result).to_body(), now)
        uow.runs.expect_unchanged(run, on_refused=_run_moved(run.id))
        uow.writer.recover(
            workspace,
            run.id,
            oldest,
            now,
            (target.id, target.serial, target.lineage) if target else None,
        )
        for version in discards:
            uow.state_versions.discard_pending(version)
        _revoke(uow, run, parts, recovery.id, now)
        if target is not None:
            uow.state_versions.put_finalized(target)
        self._audit(uow, principal, run, recovery, result, target, discards, now)
        sandboxes = [
            reference
            for name, part in parts.items()
            if name.startswith("attempt#") and part.state in OPEN_ATTEMPT
            for reference in [AttemptBody.from_body(part.body).sandbox_ref]
            if reference
        ]
        return _Completion(result, sandboxes, oldest.token if oldest else None)

    def _audit(
        self,
        uow: UnitOfWork,
        principal: Principal,
        run: Run,
        recovery: Recovery,
        result: dict[str, Any],
        target: StateVersion | None,
        discards: list[StateVersion],
        now: datetime,
    ) -> None:
        superseded = ",".join(
            f"{version.id}@{_iso(version.claimed_at) or 'unclaimed'}" for version in discards
        )
        record = RecoveryBody.from_body(recovery.body)
        common = {
            "recovery_id": recovery.id,
            "run_id": run.id,
            "resolution": record.resolution,
            "fence": str(result["fence"]),
        }
        uow.audit.record(
            organization_id=run.organization_id,
            subject_id=run.id,
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            type="run.recovered",
            actor=principal.ref,
            at=now,
            details={
                **common,
                "reason": record.reason[:1000],
                "run_status": run.status.value,
                "superseded_uploads": superseded,
                "takeovers": str(len(record.takeovers)),
            },
        )
        for action, kind, object_id in (
            (AuditAction.RUN_RECOVERED, "run", run.id),
            (AuditAction.STATE_RECOVERED, "workspace", run.workspace_id),
        ):
            uow.audit.security(
                AuditRecord.of(
                    principal,
                    action,
                    kind,
                    object_id,
                    at=now,
                    id=self._ids.new(IdKind.AUDIT_EVENT),
                    details={**common, "state_version": str(result["state_version_id"] or "")},
                )
            )
        uow.audit.record(
            organization_id=run.organization_id,
            subject_id=run.workspace_id,
            event_id=self._ids.new(IdKind.AUDIT_EVENT),
            type="state.recovered",
            actor=principal.ref,
            at=now,
            details={
                **common,
                "state_version": str(result["state_version_id"] or ""),
                "pre_apply_state_version": run.predecessor_sv_id or "",
                "emergency_sha256": (target.sha256 or "") if target else "",
            },
        )

    # -- rules that read the database -------------------------------------------------------

    def _visible_run(self, principal: Principal, run_id: str) -> Run:
        try:
            with self._units() as uow:
                run = uow.runs.get(run_id)
        except NotFound:
            raise NotFound("run", run_id) from None
        if not principal.can_see_workspace(run.organization_id, run.workspace_id):
            raise NotFound("run", run_id)
        principal.require(Permission.RUN_READ, run.workspace_id)
        return run

    def _eligible(self, uow: UnitOfWork, run: Run) -> Workspace:
        if run.status not in RECOVERABLE_STATUSES:
            raise NotRecoverable(
                f"run {run.id} is {run.status}: only a run whose apply outcome is uncertain "
                "(apply_start_uncertain, apply_interrupted, needs_recovery, or apply_failed "
                "with published state) can be recovered"
            )
        workspace = uow.writer.workspace(run.workspace_id)
        if workspace.writer_run_id != run.id:
            raise NotRecoverable(
                f"run {run.id} no longer holds the writer authority of workspace "
                f"{workspace.id}: there is nothing to recover"
            )
        return workspace

    def _check_evidence(
        self, uow: UnitOfWork, run: Run, workspace: Workspace, request: RecoveryRequest
    ) -> None:
        if request.current_state_version_id != workspace.current_state_version_id:
            raise RecoveryRefused(
                f"the current state version of workspace {workspace.id} is "
                f"{workspace.current_state_version_id or 'none'}, not "
                f"{request.current_state_version_id or 'none'}: review the run again"
            )
        verify_current(uow, run, workspace)
        if request.resolution is Resolution.IMPORT_EMERGENCY_STATE:
            if workspace.current_state_version_id != run.predecessor_sv_id:
                raise RecoveryRefused(
                    "an emergency state is imported only while the run's pre-apply state is "
                    "still current; it never overwrites a newer version"
                )
            assert request.emergency_state is not None
            snapshot = read_snapshot(request.emergency_state)
            predecessor = (
                None
                if run.predecessor_sv_id is None
                else publication_of(uow.state_versions.get(run.predecessor_sv_id))
            )
            check_emergency_successor(snapshot, predecessor)

    def _pending_to_discard(
        self,
        uow: UnitOfWork,
        run: Run,
        request: RecoveryRequest | None,
        recovery: Recovery | None = None,
    ) -> list[StateVersion]:
        """Pending uploads of the run that recovery may drop: expired and unclaimed, or
        claimed and named exactly by a destructive override. Any other blocks it."""
        override = (
            RecoveryBody.from_body(recovery.body).discard_claimed_upload if recovery else None
        )
        if request is not None and request.discard_claimed_upload is not None:
            claimed = request.discard_claimed_upload
            override = {"id": claimed.id, "claimed_at": claimed.claimed_at}
        now = self._clock.now()
        discards = []
        for version in uow.state_versions.pending_of_run(run.workspace_id, run.id):
            if version.claimed_at is not None:
                exact = override is not None and override == {
                    "id": version.id,
                    "claimed_at": version.claimed_at.isoformat(),
                }
                if not exact:
                    raise RecoveryBlocked(
                        f"state upload {version.id} of run {run.id} was claimed at "
                        f"{version.claimed_at.isoformat()} but its state never arrived: "
                        "confirm its ID and claim time to discard it, acknowledging that "
                        "in-flight state can be lost"
                    )
            elif version.created_at + UPLOAD_URL_LIFETIME > now:
                wait = version.created_at + UPLOAD_URL_LIFETIME - now
                raise RecoveryBlocked(
                    f"state upload {version.id} of run {run.id} may still arrive until "
                    f"{(version.created_at + UPLOAD_URL_LIFETIME).isoformat()}; "
                    "retry after that",
                    retry_after_seconds=int(wait.total_seconds()) + 1,
                )
            discards.append(version)
        return discards


def recovery_panel(uow: UnitOfWork, run: Run, now: datetime) -> dict[str, Any] | None:
    """What an operator needs to decide, from the database only (None: nothing to do)."""
    if run.status not in RECOVERABLE_STATUSES:
        return None  # nothing to recover, ever: no reads for the common case
    recovery = uow.recoveries.get(run.id)
    workspace = uow.writer.workspace(run.workspace_id)
    holds = workspace.writer_run_id == run.id and run.status in RECOVERABLE_STATUSES
    if recovery is None and not holds:
        return None
    panel: dict[str, Any] = {
        "status": recovery.state.value if recovery else "required",
        "pre_apply_state_version_id": run.predecessor_sv_id,
        "current_state_version_id": workspace.current_state_version_id,
        "state_moved": workspace.current_state_version_id != run.predecessor_sv_id,
        "fence": workspace.fence,
        "pending_uploads": [
            {
                "id": version.id,
                "serial": version.serial,
                "claimed_at": _iso(version.claimed_at),
            }
            for version in uow.state_versions.pending_of_run(run.workspace_id, run.id)
        ]
        if holds
        else [],
    }
    if holds and recovery is None:
        try:
            panel["publications_since_apply"] = verify_current(uow, run, workspace)
        except RecoveryRefused as refused:
            panel["publications_since_apply"] = None
            panel["unverifiable"] = refused.message
    if recovery is not None:
        record = RecoveryBody.from_body(recovery.body)
        panel.update(
            {
                "id": recovery.id,
                "resolution": record.resolution,
                "reason": record.reason,
                "holder": recovery.holder,
                "emergency_state": record.emergency_state,
                "takeovers": [dict(t) for t in record.takeovers],
            }
        )
        if recovery.state is RecoveryState.PREPARED:
            panel["lease_expires_at"] = recovery.lease_expires_at.isoformat()
            panel["lease_remaining_seconds"] = lease_remaining_seconds(
                recovery.lease_expires_at, now
            )
        else:
            panel["result"] = None if record.result is None else dict(record.result)
    return panel


def verify_current(uow: UnitOfWork, run: Run, workspace: Workspace) -> int:
    """How many versions the run's apply published since its pinned state, or refused."""
    attempt = uow.parts.get(run.id, "attempt#apply")
    apply = apply_identity(run, AttemptBody.from_body(attempt.body) if attempt else None)
    return verify_chain(
        workspace.current_state_version_id,
        apply,
        lambda sv_id: publication_of(uow.state_versions.get(sv_id)),
    )


def _revoke(
    uow: UnitOfWork, run: Run, parts: dict[str, RunPart], recovery_id: str, now: datetime
) -> None:
    """Close what is still open of the run's attempts (revoking their sessions), revoke
    the sessions of the closed ones again, and mark its apply authorization revoked."""
    for name, part in parts.items():
        if name.startswith("attempt#"):
            if part.state in OPEN_ATTEMPT:
                uow.attempts.close(part, AttemptState.RECOVERED, now=now)
            elif attempt_id := AttemptBody.from_body(part.body).attempt_id:
                uow.attempts.revoke_sessions(attempt_id, now)
        elif name == "apply":
            uow.parts.change(
                run.id,
                "apply",
                expected_state=part.state,
                body=replace(
                    ApplyRecord.from_body(part.body),
                    authorization="revoked",
                    recovery_id=recovery_id,
                ).to_body(),
                now=now,
            )


def _run_moved(run_id: str) -> Refused:
    def refused(held: str | None) -> Exception:
        return RecoveryRefused(f"run {run_id} changed during recovery; review it again")

    return refused


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
