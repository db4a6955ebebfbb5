"""What a sandbox runner may ask of the control plane, authenticated by its session."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from runplane.domain.artifacts import Artifact, ArtifactKind
from runplane.domain.capabilities import Binding, Phase, RunnerSession, handle_hash
from runplane.domain.errors import InvalidInput, SessionRefused
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.parts import AttemptBody, required_part
from runplane.domain.publications import published_by
from runplane.domain.read_ahead import Read
from runplane.domain.run_options import RunOptions
from runplane.domain.runner_reads import CapabilityRead
from runplane.domain.runner_reports import RunnerReport
from runplane.domain.session_tokens import SessionHints
from runplane.domain.state import FINALIZED
from runplane.domain.tfe_runs import REMOTE_OPERATION
from runplane.services.artifacts import (
    DownloadGrant,
    PhaseGrants,
    SandboxTransfers,
    UploadGrant,
    UploadReport,
)
from runplane.services.attempts import attempt_part, open_or_none
from runplane.services.capabilities import Capabilities, RunnerSessions
from runplane.services.orchestration import Orchestration
from runplane.services.publications import apply_identity, publication_of
from runplane.services.repositories.access import RunnerSessionStore, ServesReadAhead
from runplane.services.unit_of_work import UnitsOfWork

# Artifacts a runner may upload, by phase.
UPLOADS = {
    Phase.PLAN: {ArtifactKind.PLAN, ArtifactKind.PLAN_JSON, ArtifactKind.LOGS},
    Phase.APPLY: {ArtifactKind.LOGS},
}


def session_of(principal: Principal) -> RunnerSession:
    if principal.kind is not PrincipalKind.RUNNER or principal.run_id is None:
        raise Forbidden(Permission.STATE_WRITE)
    return RunnerSession(
        id=principal.id,
        organization_id=principal.organization_id,
        jti="",
        binding=Binding(
            principal.run_id,
            principal.attempt_id or "",
            Phase(principal.phase or "plan"),
            principal.sandbox_id or "",
        ),
        inputs=principal.inputs,
        # The authorizer checked validity on this request; transfers do not re-read it.
        expires_at=_UNCHECKED,
    )


_UNCHECKED = datetime.max.replace(tzinfo=UTC)
# A phase reads its configuration, its variables and (to apply) its plan.
MAX_INPUTS = 3


def _manifest_parts(phase: Phase) -> list[str]:
    return ["input", "plan"] if phase is Phase.APPLY else ["input"]


class RunnerApi:
    def __init__(
        self,
        sessions: RunnerSessions,
        capabilities: Capabilities,
        transfers: SandboxTransfers,
        orchestration: Orchestration,
        units: UnitsOfWork,
        session_store: RunnerSessionStore,
        serving: ServesReadAhead,
    ) -> None:
        self._sessions = sessions
        self._session_store = session_store
        self._capabilities = capabilities
        self._transfers = transfers
        self._orchestration = orchestration
        # A run's reads go through a unit of work; what a bootstrap's read brought ahead
        # is served to them by the request's identity map.
        self._units = units
        self._serving = serving

    def start(
        self,
        bootstrap: str,
        *,
        run_id: str,
        attempt_id: str,
        phase: str,
        sandbox_id: str,
        inputs: Sequence[str] = (),
        state_version: str | None = None,
    ) -> dict[str, Any]:
        """Redeem the bootstrap handle; returns the session secret and the manifest.
        ``inputs``: the artifacts the launch said the phase reads, whose records are read
        with the handle's (what the session may read is what the handle names);
        ``state_version``: the state version the launch said the run pinned, read with
        them for the session's token to name its artifact (only if the run pins it)."""
        try:
            binding = Binding(run_id, attempt_id, Phase(phase), sandbox_id)
        except ValueError:
            raise InvalidInput("phase must be plan or apply", "/phase") from None
        # The handle's record, the attempt it is for, and what the manifest reads (the run,
        # its parts, its inputs' records) and the session's token names, in one read.
        manifest_reads = [
            Read.run(run_id),
            *(Read.run_part(run_id, name) for name in _manifest_parts(binding.phase)),
            *(Read.artifact(artifact_id) for artifact_id in inputs[:MAX_INPUTS]),
            *([Read.state_version(state_version)] if state_version else []),
        ]
        read = self._session_store.capability_read(
            handle_hash(bootstrap), run_id, attempt_part(binding.phase), manifest_reads
        )
        if open_or_none(binding, read.attempt) is None:
            # Refused before the handle is looked at: nothing is redeemed or written.
            raise SessionRefused("its attempt has ended")
        grant = self._sessions.start(bootstrap, binding, read.capability, _hints(binding, read))
        # Served although read before the session's write: that write changes none of
        # them (it adds the session, and notes it on the attempt).
        with self._serving.serving(read.ahead):
            manifest, grants = self._manifest(grant.session)
        # The grants carry data keys and URLs: secret, like the token beside them, so
        # they travel apart from the manifest (which says what the phase is about).
        return {"token": grant.token, "manifest": manifest, "grants": _grants_reply(grants)}

    def _manifest(self, session: RunnerSession) -> tuple[dict[str, Any], PhaseGrants]:
        apply = session.binding.phase is Phase.APPLY
        # The run, its parts and the records of the session's inputs in one request.
        with self._units() as uow:
            run, parts, records = uow.runs.with_parts_and_artifacts(
                session.binding.run_id, _manifest_parts(session.binding.phase), session.inputs
            )
        snapshot = required_part(parts, run.id, "input").body
        manifest: dict[str, Any] = {
            "run_id": run.id,
            "kind": run.kind.value,
            "attempt_id": session.binding.attempt_id,
            "phase": session.binding.phase.value,
            "organization": snapshot["organization_name"],
            "workspace": snapshot["workspace_name"],
            "engine_version": snapshot.get("engine_version"),
            "configuration_artifact_id": snapshot["configuration_artifact_id"],
            "variables_artifact_id": snapshot.get("variables_artifact_id"),
            # Declared sensitive to the engine by the runner (names only, never values).
            "sensitive_variables": list(snapshot.get("sensitive_variable_names") or []),
            "predecessor_state_version_id": run.predecessor_sv_id,
            # Created by a remote backend: its configuration names that backend.
            "remote_operation": snapshot.get("source") == REMOTE_OPERATION,
            # What the plan is asked (destroy, refresh-only, targets, replacements); the
            # runner checks the saved plan obeys it.
            "options": RunOptions.from_body(snapshot.get("options")).for_kind(run.kind).to_body(),
        }
        if apply:
            plan = required_part(parts, run.id, "plan").body
            manifest["plan_artifact_id"] = plan["plan_artifact_id"]
            manifest["plan_sha256"] = plan["plan_sha256"]
        # What this phase reads, as its run names it; granted only where the download
        # route would grant it (the session's own inputs, readable, its organization's).
        needed = [
            manifest["configuration_artifact_id"],
            manifest["variables_artifact_id"],
            manifest.get("plan_artifact_id"),
        ]
        grants = self._transfers.phase_grants(
            session,
            [artifact_id for artifact_id in needed if artifact_id],
            records,
            UPLOADS[session.binding.phase],
        )
        return manifest, grants

    def download(self, principal: Principal, artifact_id: str) -> dict[str, Any]:
        return _download_reply(self._transfers.download(session_of(principal), artifact_id))

    def begin_upload(self, principal: Principal, kind: str) -> dict[str, Any]:
        session = session_of(principal)
        try:
            wanted = ArtifactKind(kind)
        except ValueError:
            raise InvalidInput(f"unknown artifact kind {kind!r}", "/kind") from None
        if wanted not in UPLOADS[session.binding.phase]:
            raise InvalidInput(f"a {session.binding.phase} runner cannot upload {kind}", "/kind")
        return _upload_reply(self._transfers.begin_upload(session, wanted))

    def register(
        self, principal: Principal, artifact_id: str, ticket: str, size: int, sha256: str
    ) -> dict[str, Any]:
        artifact = self._transfers.register(
            session_of(principal), artifact_id, ticket=ticket, size=size, sha256=sha256
        )
        return _registered_reply(artifact)

    def register_all(self, principal: Principal, uploads: Sequence[UploadReport]) -> dict[str, Any]:
        artifacts = self._transfers.register_all(session_of(principal), uploads)
        return {"artifacts": [_registered_reply(artifact) for artifact in artifacts]}

    def apply_start(
        self, principal: Principal, handle: str, request: Mapping[str, str]
    ) -> dict[str, str]:
        """Redeem the apply-start capability together with the move to ``applying``."""
        session = session_of(principal)
        return self._orchestration.apply_start(handle, session.binding, request)

    def state_check(self, principal: Principal) -> dict[str, Any]:
        """What the current state of the run's workspace says about its publisher."""
        session = session_of(principal)
        binding = session.binding
        # The run (its predecessor is part of the stamp) and the attempt in one read.
        with self._units() as uow:
            run, parts = uow.runs.with_parts(binding.run_id, [attempt_part(binding.phase)])
            workspace = uow.writer.workspace(run.workspace_id)
            if workspace.current_state_version_id is None:
                return {"state_version_id": None, "matches": False}
            version = uow.state_versions.get(workspace.current_state_version_id)
        # The same rule as the apply's result: this attempt's exact stamp, lock and fence.
        attempt = AttemptBody.from_body(
            required_part(parts, run.id, attempt_part(binding.phase)).body
        )
        ours = attempt.attempt_id == binding.attempt_id and published_by(
            publication_of(version), apply_identity(run, attempt)
        )
        return {
            "state_version_id": version.id,
            "serial": version.serial,
            "sha256": version.sha256,
            "matches": ours,
        }

    def heartbeat(self, principal: Principal) -> dict[str, bool]:
        session = session_of(principal)
        alive = self._orchestration.heartbeat(
            session.binding.run_id, session.binding.phase, session.binding.attempt_id
        )
        return {"alive": alive}

    def report(
        self, principal: Principal, report: RunnerReport, uploads: Sequence[UploadReport] = ()
    ) -> dict[str, str]:
        """Take a phase's result; ``uploads`` (the phase's artifacts) are checked as
        ``register_all`` checks them and registered in the write that takes the report:
        both, or neither. What the report names is checked against them and the
        artifacts registered before (``RunnerReports``)."""
        session = session_of(principal)
        checked = self._transfers.checked(session, uploads) if uploads else []
        binding = session.binding
        run_id, attempt_id = binding.run_id, binding.attempt_id
        if binding.phase is Phase.PLAN:
            status = self._orchestration.report_plan(run_id, attempt_id, report, checked)
        else:
            status = self._orchestration.report_apply(run_id, attempt_id, report, checked)
        return {"status": status}


def _hints(binding: Binding, read: CapabilityRead) -> SessionHints:
    """What the session's token names for its calls to read: its binding, and, as the
    run read with the handle says, its workspace and the state version it pinned, with
    that version's artifact if the version read with them is that one, finalized. The
    sandbox's ``state_version`` only chose what was read: what is named is the run's
    (and a redemption for another run writes nothing, so names nothing)."""
    run = read.run
    if run is None or run.id != binding.run_id:
        return SessionHints.of(binding)
    pinned = run.predecessor_sv_id
    artifact_id = next(
        (
            version.artifact_id
            for version in read.versions
            if version.id == pinned and version.status == FINALIZED
        ),
        None,
    )
    return replace(
        SessionHints.of(binding),
        workspace_id=run.workspace_id,
        pinned_sv_id=pinned,
        state_artifact_id=artifact_id,
    )


def _registered_reply(artifact: Artifact) -> dict[str, Any]:
    return {"artifact_id": artifact.id, "size": artifact.size, "sha256": artifact.sha256}


def _download_reply(grant: DownloadGrant) -> dict[str, Any]:
    return {
        "artifact_id": grant.artifact_id,
        "url": grant.url,
        "sha256": grant.sha256,
        "size": grant.size,
        "data_key": base64.b64encode(grant.data_key).decode("ascii"),
    }


def _upload_reply(grant: UploadGrant) -> dict[str, Any]:
    return {
        "artifact_id": grant.artifact_id,
        "url": grant.url,
        "chunk_size": grant.chunk_size,
        "max_size": grant.max_size,
        "data_key": base64.b64encode(grant.data_key).decode("ascii"),
        "ticket": grant.ticket,
    }


def _grants_reply(grants: PhaseGrants) -> dict[str, Any]:
    """As the download and begin-upload routes reply, by artifact ID and by kind; usable
    for ``expires_in`` seconds, after which the runner asks those routes instead."""
    return {
        "expires_in": grants.lifetime,
        "downloads": {grant.artifact_id: _download_reply(grant) for grant in grants.downloads},
        "uploads": {kind.value: _upload_reply(grant) for kind, grant in grants.uploads.items()},
    }
