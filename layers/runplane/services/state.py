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
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from runplane.domain.artifacts import ArtifactKind
from runplane.domain.capabilities import handle_hash
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
from runplane.services import runner_authority
from runplane.services.artifacts import ArtifactStore
from runplane.services.workspaces import Workspaces
from runplane.store import state_versions as store
from runplane.store.runs import RunRepository
from runplane.store.state_versions import FINALIZED, PENDING, Authority, StateVersion
from runplane.store.transaction import Transaction

# API Gateway carries at most 10 MB per request; state travels through it.
MAX_STATE_BYTES = 10_000_000
UPLOAD_URL_LIFETIME = timedelta(minutes=5)
UPLOAD_TOKEN_PREFIX = "rpu_"
_MD5 = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class PendingUpload:
    """A state version waiting for its bytes at single-purpose upload URLs."""

    version: StateVersion
    state_token: str = field(repr=False)
    json_token: str = field(repr=False)


@dataclass(frozen=True)
class Output:
    name: str
    value: Any
    type: Any
    sensitive: bool


class StateVersions:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        artifacts: ArtifactStore,
        *,
        max_bytes: int = MAX_STATE_BYTES,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._artifacts = artifacts
        self._max_bytes = max_bytes
        self._runs = RunRepository(clock, ids)

    # -- reads --------------------------------------------------------------------------

    def current(self, principal: Principal, workspace_id: str) -> StateVersion:
        principal.require(Permission.STATE_READ)
        workspace = self._workspaces.by_id(principal, workspace_id)
        current = workspace.current_state_version_id
        if principal.kind is PrincipalKind.RUNNER:
            current = runner_authority.pinned_state(principal, self._runs)
        if current is None:
            raise NotFound("current state version of workspace", workspace.id)
        return store.get(current)

    def get(self, principal: Principal, sv_id: str) -> StateVersion:
        principal.require(Permission.STATE_READ)
        version = store.get(sv_id)
        if not principal.can_see_workspace(version.organization_id, version.workspace_id):
            raise NotFound("state version", sv_id)
        if principal.kind is PrincipalKind.RUNNER and not runner_authority.may_read(
            principal, version, self._runs
        ):
            raise NotFound("state version", sv_id)
        return version

    def history(self, principal: Principal, workspace_id: str) -> list[StateVersion]:
        principal.require(Permission.STATE_READ)
        workspace = self._workspaces.by_id(principal, workspace_id)
        versions = store.list_for_workspace(workspace.id)
        if principal.kind is PrincipalKind.RUNNER:
            return [v for v in versions if runner_authority.may_read(principal, v, self._runs)]
        return versions

    def download(self, principal: Principal, sv_id: str) -> bytes:
        """The raw state, verified through EOF (at most ``max_bytes``, so it fits a response)."""
        version = self.get(principal, sv_id)
        if version.status != FINALIZED or version.artifact_id is None:
            raise NotFound("state version content", sv_id)
        return self._artifacts.read(version.organization_id, version.artifact_id)

    def download_json(self, principal: Principal, sv_id: str) -> bytes:
        """The JSON state a newer client uploaded beside the raw state."""
        version = self.get(principal, sv_id)
        if version.json_artifact_id is None:
            raise NotFound("JSON state of state version", sv_id)
        return self._artifacts.read(version.organization_id, version.json_artifact_id)

    def outputs(self, principal: Principal, workspace_id: str) -> tuple[StateVersion, list[Output]]:
        version = self.current(principal, workspace_id)
        state = json.loads(self.download(principal, version.id))
        outputs = [
            Output(name, spec.get("value"), spec.get("type"), bool(spec.get("sensitive")))
            for name, spec in sorted((state.get("outputs") or {}).items())
        ]
        return version, outputs

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
        principal.require(Permission.STATE_WRITE)
        workspace = self._workspaces.by_id(principal, workspace_id)
        authority = self._authority(principal, workspace)
        if serial < 0:
            raise StateRejected("serial must be zero or more")
        if not _MD5.match(md5):
            raise StateRejected("md5 must be 32 lowercase hexadecimal characters")
        if not lineage:
            raise StateRejected("lineage must not be empty")
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
            raise StateRejected("state is not valid base64") from None
        return self._publish(version, authority, raw)

    def upload(self, token: str, body: bytes) -> StateVersion:
        """The bytes PUT to a single-purpose upload URL (no Authorization header)."""
        token_hash = handle_hash(token)
        found = (
            store.get_upload_token(token_hash) if token.startswith(UPLOAD_TOKEN_PREFIX) else None
        )
        if found is None:
            raise NotFound("upload", "this URL")
        if found.used:
            raise UploadUrlUsed()
        if found.valid_until <= self._clock.now():
            raise UploadUrlExpired()
        version = store.get(found.sv_id)
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

    def _authority(self, principal: Principal, workspace: Workspace) -> Authority:
        if workspace.writer_run_id is not None and workspace.writer_run_id != principal.run_id:
            raise self._workspaces.held_by_run(workspace.id, workspace.writer_run_id)
        if principal.kind is PrincipalKind.RUNNER:
            granted = runner_authority.apply_authority(principal, workspace, self._runs)
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

    @staticmethod
    def _current_of(workspace: Workspace) -> StateVersion | None:
        if workspace.current_state_version_id is None:
            return None
        return store.get(workspace.current_state_version_id)

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
        state_token = UPLOAD_TOKEN_PREFIX + secrets.token_urlsafe(32)
        json_token = UPLOAD_TOKEN_PREFIX + secrets.token_urlsafe(32)
        valid_until = self._clock.now() + UPLOAD_URL_LIFETIME
        store.put_pending(version).extend(
            [
                store.put_upload_token(handle_hash(state_token), version.id, "state", valid_until),
                store.put_upload_token(handle_hash(json_token), version.id, "json", valid_until),
            ]
        ).commit()
        return PendingUpload(version, state_token, json_token)

    def _publish(
        self,
        version: StateVersion,
        authority: Authority,
        raw: bytes,
        *,
        token_hash: str | None = None,
    ) -> StateVersion:
        if len(raw) > self._max_bytes:
            raise ArtifactTooLarge(self._max_bytes)
        if hashlib.md5(raw, usedforsecurity=False).hexdigest() != version.md5:
            raise StateRejected("the state's MD5 does not match the declared md5")
        _check_content(raw, version)
        artifact = self._artifacts.put(version.organization_id, ArtifactKind.STATE, [raw])
        assert artifact.sha256 is not None
        now = self._clock.now()
        event_id = self._ids.new(IdKind.AUDIT_EVENT)
        # A run's write commits only while the run applies and its attempt is open.
        guard = (
            runner_authority.still_applying(authority.run_id) if authority.run_id else Transaction()
        )
        try:
            if token_hash is None:
                published = StateVersion(
                    **{
                        **version.__dict__,
                        "status": FINALIZED,
                        "artifact_id": artifact.id,
                        "sha256": artifact.sha256,
                        "size": len(raw),
                    }
                )
                guard.extend([store.publish(published, authority, event_id)]).commit()
                return published
            guard.extend(
                [
                    store.use_upload_token(token_hash, now),
                    store.finalize(
                        version,
                        authority,
                        artifact_id=artifact.id,
                        sha256=artifact.sha256,
                        size=len(raw),
                        event_id=event_id,
                        now=now,
                    ),
                ]
            ).commit()
        except BaseException:
            self._artifacts.discard(artifact.id)
            raise
        return store.get(version.id)

    def _attach_json(self, version: StateVersion, token_hash: str, body: bytes) -> StateVersion:
        if len(body) > self._max_bytes:
            raise ArtifactTooLarge(self._max_bytes)
        try:
            json.loads(body)
        except ValueError:
            raise StateRejected("the JSON state is not valid JSON") from None
        artifact = self._artifacts.put(version.organization_id, ArtifactKind.STATE_JSON, [body])
        try:
            store.use_upload_token(token_hash, self._clock.now()).extend(
                [store.attach_json(version.id, artifact.id)]
            ).commit()
        except BaseException:
            self._artifacts.discard(artifact.id)
            raise
        return store.get(version.id)


def _check_content(raw: bytes, version: StateVersion) -> None:
    try:
        state = json.loads(raw)
    except ValueError:
        raise StateRejected("the state is not valid JSON") from None
    if not isinstance(state, dict):
        raise StateRejected("the state must be a JSON object")
    if state.get("serial") != version.serial:
        raise StateRejected(
            f"the state's serial {state.get('serial')} differs from the declared {version.serial}"
        )
    if state.get("lineage") != version.lineage:
        raise StateRejected("the state's lineage differs from the declared lineage")


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
