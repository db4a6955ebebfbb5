"""State versions published through the TFE-compatible API.

A state version is immutable: serial, lineage, MD5 and SHA-256 of the raw
state, size, who created it, and (for runner sessions) the run, attempt,
sandbox, lock and fence it was published under. The raw state is stored as an
encrypted artifact. The workspace's current pointer moves only by a
conditional write naming the exact predecessor and the exact lock (and fence,
for runs), in the same transaction as the version and its audit event.

Rules, in the order they are checked:
1. the caller may write state and sees the workspace;
2. no run holds the writer authority, unless the caller is that run;
3. the caller holds the workspace lock (a runner session: the lock and fence of
   its run's current, open apply attempt, see ``runner_authority``);
4. the same serial and MD5 as the current version is a retry: the current
   version is returned and nothing is written;
5. the lineage matches the current state's (``force`` overrides, recorded);
6. the serial is greater than the current serial (never overridable);
7. the content matches its declaration (MD5, and the serial and lineage
   inside the state JSON).

Before any of these, the declaration itself must be well formed (see
``runplane.domain.state``): a malformed serial, lineage or state is a 422.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from runplane.domain.clock import Clock
from runplane.domain.entities import Workspace
from runplane.domain.errors import (
    ArtifactTooLarge,
    NotFound,
    StateConflict,
    StateRejected,
    UploadUrlExpired,
    UploadUrlUsed,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.state import (
    FINALIZED,
    PENDING,
    ApplyGuard,
    Authority,
    Output,
    StateVersion,
    check_declaration,
    check_json_state,
    check_state,
    masked,
    outputs_of,
    parse_json,
    parse_output_id,
)
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.domain.artifacts import Artifact
    from runplane.services.artifacts import ArtifactStore
    from runplane.services.repositories import StateVersionReader
    from runplane.services.repositories.state import StatePublication

# API Gateway carries at most 10 MB per request; state travels through it.
MAX_STATE_BYTES = 10_000_000
UPLOAD_URL_LIFETIME = timedelta(minutes=5)
UPLOAD_TOKEN_PREFIX = "rpu_"
STATE_POINTER = "/data/attributes/state"

__all__ = ["Output", "PendingUpload", "StateSummary", "StateVersions"]


@dataclass(frozen=True)
class StateSummary:
    """A workspace's current state as a person reads it: the version, how many resource
    instances it manages, and its outputs with every sensitive value withheld."""

    version: StateVersion
    resources: int
    outputs: list[Output]


@dataclass(frozen=True)
class PendingUpload:
    """A state version waiting for its bytes at single-purpose upload URLs."""

    version: StateVersion
    state_token: str = field(repr=False)
    json_token: str = field(repr=False)


class StateVersions:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        artifacts: Callable[[], ArtifactStore],
        *,
        max_bytes: int = MAX_STATE_BYTES,
        reader: StateVersionReader,
        publication: StatePublication,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        # Built on first use: reads and listings never touch an artifact (only downloads
        # and uploads do), so a read does not load the store, its envelope or its keys.
        self._artifacts = artifacts
        self._max_bytes = max_bytes
        self._reader = reader
        self._publication = publication

    # -- reads --------------------------------------------------------------------------

    def current(self, principal: Principal, workspace_id: str) -> StateVersion:
        if principal.kind is PrincipalKind.RUNNER:
            principal.require(Permission.STATE_READ)
            # A runner sees only its own run's workspace, as of the version its run
            # pinned: the workspace item has nothing more to say (and is not read).
            if workspace_id != principal.workspace_id:
                raise NotFound("workspace", workspace_id)
            current = self._reader.pinned(principal)
        else:
            workspace = self._workspaces.by_id(principal, workspace_id)
            principal.require(Permission.STATE_READ, workspace.id)
            current = workspace.current_state_version_id
        if current is None:
            raise NotFound("current state version of workspace", workspace_id)
        return self._reader.get(current)

    def get(self, principal: Principal, sv_id: str) -> StateVersion:
        version = self._reader.get(sv_id)
        if not principal.can_see_workspace(version.organization_id, version.workspace_id):
            raise NotFound("state version", sv_id)
        principal.require(Permission.STATE_READ, version.workspace_id)
        if principal.kind is PrincipalKind.RUNNER and not self._runner_may_read(principal, version):
            raise NotFound("state version", sv_id)
        return version

    def history(self, principal: Principal, workspace_id: str) -> list[StateVersion]:
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.STATE_READ, workspace.id)
        versions = self._reader.list_for_workspace(workspace.id)
        if principal.kind is PrincipalKind.RUNNER:
            return [v for v in versions if self._runner_may_read(principal, v)]
        return versions

    def download(self, principal: Principal, sv_id: str) -> bytes:
        """The raw state, verified through EOF (at most ``max_bytes``, so it fits a response)."""
        version = self.get(principal, sv_id)
        if version.status != FINALIZED or version.artifact_id is None:
            raise NotFound("state version content", sv_id)
        return self._artifacts().read(version.organization_id, version.artifact_id)

    def download_json(self, principal: Principal, sv_id: str) -> bytes:
        """The JSON state a newer client uploaded beside the raw state."""
        version = self.get(principal, sv_id)
        if version.json_artifact_id is None:
            raise NotFound("JSON state of state version", sv_id)
        return self._artifacts().read(version.organization_id, version.json_artifact_id)

    def outputs(self, principal: Principal, workspace_id: str) -> tuple[StateVersion, list[Output]]:
        version = self.current(principal, workspace_id)
        return version, self._outputs_of(principal, version)

    def summary(self, principal: Principal, workspace_id: str) -> StateSummary | None:
        """The workspace's current state summarized (None: it has no state yet), for
        callers who may read state. Sensitive output values never leave here."""
        from runplane.domain.workspace_deletion import managed_resources_of

        try:
            version = self.current(principal, workspace_id)
        except NotFound:
            # The workspace itself is checked first: only a missing state is None.
            self._workspaces.by_id(principal, workspace_id)
            return None
        if version.status != FINALIZED:
            return StateSummary(version, 0, [])
        state = parse_json(self.download(principal, version.id))
        return StateSummary(version, managed_resources_of(state), masked(outputs_of(state)))

    def version_outputs(
        self, principal: Principal, sv_id: str
    ) -> tuple[StateVersion, list[Output]]:
        """The outputs of any finalized version the caller can see."""
        version = self.get(principal, sv_id)
        return version, self._outputs_of(principal, version)

    def output(self, principal: Principal, wsout_id: str) -> tuple[StateVersion, Output]:
        """One output by its ID; another organization's is 'not found'."""
        parsed = parse_output_id(wsout_id)
        if parsed is None:
            raise NotFound("state version output", wsout_id)
        try:
            version, outputs = self.version_outputs(principal, parsed[0])
        except NotFound:
            raise NotFound("state version output", wsout_id) from None
        for found in outputs:
            if found.name == parsed[1]:
                return version, found
        raise NotFound("state version output", wsout_id)

    def listing(
        self, principal: Principal, org_name: str, workspace_name: str
    ) -> list[StateVersion]:
        """A workspace's finalized versions by organization and workspace name, newest
        first (TFE's ``GET /state-versions`` with both filters)."""
        workspace = self._workspaces.by_name(principal, org_name, workspace_name)
        return list(reversed(self.history(principal, workspace.id)))

    def _outputs_of(self, principal: Principal, version: StateVersion) -> list[Output]:
        # Values stay inside the encrypted state; they are never copied into the table.
        if version.status != FINALIZED:
            return []
        return outputs_of(parse_json(self.download(principal, version.id)))

    # -- writes -------------------------------------------------------------------------

    def create(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        serial: int,
        md5: str,
        lineage: str,
        state_b64: str | None,
        force: bool = False,
    ) -> StateVersion | PendingUpload:
        """Publish a state version inline, or open single-purpose upload URLs for it."""
        check_declaration(serial, md5, lineage)
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.STATE_WRITE, workspace.id)
        authority = self._authority(principal, workspace)
        current = self._current_of(workspace)
        if current is not None and current.serial == serial and current.md5 == md5:
            return current  # a client retry of what is already published
        self._check_succession(workspace, serial=serial, lineage=lineage, force=force)
        version = StateVersion(
            id=self._ids.new(IdKind.STATE_VERSION),
            workspace_id=workspace.id,
            organization_id=workspace.organization_id,
            serial=serial,
            lineage=lineage,
            md5=md5,
            status=PENDING,
            created_at=self._clock.now(),
            created_by=principal.ref,
            predecessor_id=workspace.current_state_version_id,
            forced=force,
            provenance=_provenance(principal, authority),
            lock_id=authority.lock_id,
        )
        if state_b64 is None:
            return self._open_upload(version)
        try:
            raw = base64.b64decode(state_b64, validate=True)
        except (binascii.Error, ValueError):
            raise StateRejected("state is not valid base64", STATE_POINTER) from None
        return self._publish(version, authority, raw, pointer=STATE_POINTER)

    def upload(self, token: str, body: bytes) -> StateVersion:
        """The bytes PUT to a single-purpose upload URL (no Authorization header)."""
        from runplane.domain.capabilities import handle_hash

        token_hash = handle_hash(token)
        found = (
            self._publication.upload_token(token_hash)
            if token.startswith(UPLOAD_TOKEN_PREFIX)
            else None
        )
        if found is None:
            raise NotFound("upload", "this URL")
        if found.used:
            raise UploadUrlUsed()
        if found.valid_until <= self._clock.now():
            raise UploadUrlExpired()
        version = self._reader.get(found.sv_id)
        if found.purpose == "json":
            return self._attach_json(version, token_hash, body)
        if version.status != PENDING:
            raise UploadUrlUsed()
        provenance = version.provenance or {}
        run_id = provenance.get("run_id")
        authority = Authority(
            workspace_id=version.workspace_id,
            holder_ref=f"run:{run_id}" if run_id else version.created_by,
            lock_id=version.lock_id or "",
            predecessor_id=version.predecessor_id,
            fence=provenance.get("fence"),
            run_id=run_id,
        )
        return self._publish(version, authority, body, token_hash=token_hash)

    # -- internals ------------------------------------------------------------------------

    def _runner_may_read(self, principal: Principal, version: StateVersion) -> bool:
        """A runner reads its run's pinned predecessor and what its own run published
        (the pin through the seam)."""
        if version.id == self._reader.pinned(principal):
            return True
        return (version.provenance or {}).get("run_id") == principal.run_id

    def _authority(self, principal: Principal, workspace: Workspace) -> Authority:
        if workspace.writer_run_id is not None and workspace.writer_run_id != principal.run_id:
            raise self._workspaces.held_by_run(workspace.id, workspace.writer_run_id)
        if principal.kind is PrincipalKind.RUNNER:
            granted = self._workspaces.apply_authority(principal, workspace)
            return Authority(
                workspace.id,
                f"run:{granted.run_id}",
                granted.lock_id,
                workspace.current_state_version_id,
                fence=granted.fence,
                run_id=granted.run_id,
            )
        if workspace.lock_id is None:
            raise WorkspaceNotLocked(workspace.id)
        if workspace.lock_holder != principal.ref:
            raise WorkspaceLocked(
                f"workspace {workspace.id} is locked by {workspace.lock_holder_display} "
                "and will only accept state uploads from them"
            )
        return Authority(
            workspace.id, principal.ref, workspace.lock_id, workspace.current_state_version_id
        )

    def _current_of(self, workspace: Workspace) -> StateVersion | None:
        if workspace.current_state_version_id is None:
            return None
        return self._reader.get(workspace.current_state_version_id)

    @staticmethod
    def _check_succession(workspace: Workspace, *, serial: int, lineage: str, force: bool) -> None:
        if workspace.current_serial is None:
            return
        if workspace.current_lineage != lineage and not force:
            raise StateConflict(
                f"lineage mismatch: workspace {workspace.id} holds lineage "
                f"{workspace.current_lineage}; refusing state of lineage {lineage}"
            )
        if serial <= workspace.current_serial:
            raise StateConflict(
                f"serial {serial} does not follow the current serial "
                f"{workspace.current_serial} of workspace {workspace.id}; "
                "state never goes backwards"
            )

    def _open_upload(self, version: StateVersion) -> PendingUpload:
        # Loaded by the paths that write state, so a read does not load capabilities.
        from runplane.domain.capabilities import handle_hash

        state_token = UPLOAD_TOKEN_PREFIX + secrets.token_urlsafe(32)
        json_token = UPLOAD_TOKEN_PREFIX + secrets.token_urlsafe(32)
        valid_until = self._clock.now() + UPLOAD_URL_LIFETIME
        self._publication.open_upload(
            version,
            state_token_hash=handle_hash(state_token),
            json_token_hash=handle_hash(json_token),
            valid_until=valid_until,
        )
        return PendingUpload(version, state_token, json_token)

    def _publish(
        self,
        version: StateVersion,
        authority: Authority,
        raw: bytes,
        *,
        token_hash: str | None = None,
        pointer: str | None = None,
    ) -> StateVersion:
        if len(raw) > self._max_bytes:
            raise ArtifactTooLarge(self._max_bytes)
        if hashlib.md5(raw, usedforsecurity=False).hexdigest() != version.md5:
            raise StateRejected("the state's MD5 does not match the declared md5", pointer)
        state = check_state(raw, serial=version.serial, lineage=version.lineage, pointer=pointer)
        from runplane.domain.artifacts import ArtifactKind
        from runplane.domain.workspace_deletion import managed_resources_of

        # Counted once here, so a listing of workspaces shows it without their states.
        version = replace(version, resources=managed_resources_of(state))

        now = self._clock.now()
        event_id = self._ids.new(IdKind.AUDIT_EVENT)
        # A run's write commits only while the run applies and its attempt is open.
        guard: ApplyGuard | None = None
        if authority.run_id:
            from runplane.services import runner_authority

            guard = runner_authority.still_applying(authority.run_id)
        published: list[StateVersion] = []

        def publication(artifact: Artifact) -> object:
            """The publication's write, committed with the state artifact's record: a
            refused publication stores neither."""
            assert artifact.sha256 is not None
            if token_hash is None:
                published.append(
                    replace(
                        version,
                        status=FINALIZED,
                        artifact_id=artifact.id,
                        sha256=artifact.sha256,
                        size=len(raw),
                    )
                )
                return self._publication.publish_write(
                    published[0], authority, event_id=event_id, guard=guard
                )
            return self._publication.finalize_write(
                version,
                authority,
                token_hash=token_hash,
                artifact_id=artifact.id,
                sha256=artifact.sha256,
                size=len(raw),
                event_id=event_id,
                now=now,
                guard=guard,
            )

        self._artifacts().put(version.organization_id, ArtifactKind.STATE, [raw], publication)
        return published[0] if published else self._reader.get(version.id)

    def _attach_json(self, version: StateVersion, token_hash: str, body: bytes) -> StateVersion:
        if len(body) > self._max_bytes:
            raise ArtifactTooLarge(self._max_bytes)
        check_json_state(body)
        from runplane.domain.artifacts import ArtifactKind

        artifact = self._artifacts().put(version.organization_id, ArtifactKind.STATE_JSON, [body])
        try:
            self._publication.attach_json(
                version.id, token_hash=token_hash, artifact_id=artifact.id, now=self._clock.now()
            )
        except BaseException:
            self._artifacts().discard(artifact.id)
            raise
        return self._reader.get(version.id)


def _provenance(principal: Principal, authority: Authority) -> dict[str, Any] | None:
    if principal.kind is not PrincipalKind.RUNNER:
        return None
    return {
        "run_id": principal.run_id,
        "attempt_id": principal.attempt_id,
        "sandbox_id": principal.sandbox_id,
        "session_id": principal.id,
        "predecessor_id": authority.predecessor_id,
        "fence": authority.fence,
    }
