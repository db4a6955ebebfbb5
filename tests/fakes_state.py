"""In-memory seams of a workspace's state (runplane.services.repositories.state): the
workspaces of ``InMemoryWorkspaces``, the runs and parts of ``InMemoryRuns`` and the
versions of ``InMemoryStateVersions``, changed as the DynamoDB store changes them, the
same cases holding both (tests/integration/test_state_publication_contract.py). Every
condition is checked before anything changes, in the order the store's transaction
reports them: a refused write changes nothing and raises the store's typed error.

The writer reservation is the one the workspace records (``Workspace.writer_run_id``),
as the service reads it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from runplane.domain.entities import LockHolder, Run, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    Conflict,
    NotFound,
    NotWriter,
    RunnerAuthorityRefused,
    RunNotApplying,
    UploadUrlExpired,
    UploadUrlUsed,
    WorkspaceAlreadyLocked,
    WorkspaceHeldByRun,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.domain.parts import OPEN_ATTEMPT, RunPart
from runplane.domain.publications import publication_of
from runplane.domain.run import RunStatus
from runplane.domain.state import (
    FINALIZED,
    PENDING,
    ApplyGuard,
    Authority,
    StateVersion,
    UploadToken,
)
from tests.fakes import InMemoryRuns, InMemoryStateVersions, InMemoryWorkspaces

APPLY_ATTEMPT = "attempt#apply"


@dataclass(frozen=True)
class PublishedEvent:
    """The organization audit event a publication recorded."""

    event_id: str
    organization_id: str
    type: str
    subject_id: str
    actor: str
    at: datetime
    details: dict[str, str]


class InMemoryStatePublication:
    """``StatePublication``: versions, single-use upload tokens and the workspace's
    state pointer, with an apply guard checked against the runs."""

    def __init__(
        self, workspaces: InMemoryWorkspaces, versions: InMemoryStateVersions, runs: InMemoryRuns
    ) -> None:
        self._workspaces = workspaces
        self._versions = versions
        self._runs = runs
        self.tokens: dict[str, UploadToken] = {}
        self.events: list[PublishedEvent] = []

    def upload_token(self, token_hash: str) -> UploadToken | None:
        return self.tokens.get(token_hash)

    def open_upload(
        self,
        version: StateVersion,
        *,
        state_token_hash: str,
        json_token_hash: str,
        valid_until: datetime,
    ) -> None:
        taken = version.id in self._versions.versions or {state_token_hash, json_token_hash} & set(
            self.tokens
        )
        if taken or state_token_hash == json_token_hash:
            raise ConcurrentChange(f"state version {version.id} changed concurrently")
        self._versions.versions[version.id] = version
        self.tokens[state_token_hash] = UploadToken(version.id, "state", valid_until, False)
        self.tokens[json_token_hash] = UploadToken(version.id, "json", valid_until, False)

    def publish(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        event_id: str,
        guard: ApplyGuard | None,
    ) -> None:
        self._check_guard(guard)
        if version.id in self._versions.versions:
            raise ConcurrentChange(f"state version {version.id} changed concurrently")
        workspace = self._check_pointer(authority)
        self._check_event(event_id)
        self._versions.versions[version.id] = version
        self._move_pointer(workspace, version)
        self._record(version, event_id, version.created_at)

    def publish_write(self, version: StateVersion, authority: Authority, **kw: Any) -> object:
        # The fakes' registrations take a write as a callable that makes it.
        return lambda: self.publish(version, authority, **kw)

    def finalize_write(self, version: StateVersion, authority: Authority, **kw: Any) -> object:
        return lambda: self.finalize(version, authority, **kw)

    def finalize(
        self,
        version: StateVersion,
        authority: Authority,
        *,
        token_hash: str,
        artifact_id: str,
        sha256: str,
        size: int,
        event_id: str,
        now: datetime,
        guard: ApplyGuard | None,
    ) -> None:
        self._check_guard(guard)
        self._check_token(token_hash, now)
        stored = self._versions.versions.get(version.id)
        if stored is None or stored.status != PENDING:
            raise Conflict(f"state version {version.id} is not pending")
        finalized = replace(
            stored,
            status=FINALIZED,
            artifact_id=artifact_id,
            sha256=sha256,
            size=size,
            predecessor_id=authority.predecessor_id,
        )
        workspace = self._check_pointer(authority)
        self._check_event(event_id)
        self._use_token(token_hash)
        self._versions.versions[version.id] = finalized
        self._move_pointer(workspace, finalized)
        self._record(finalized, event_id, now)

    def attach_json(self, sv_id: str, *, token_hash: str, artifact_id: str, now: datetime) -> None:
        self._check_token(token_hash, now)
        stored = self._versions.get(sv_id)
        if stored.json_artifact_id is not None:
            raise Conflict(f"state version {sv_id} already has its JSON state")
        self._use_token(token_hash)
        self._versions.versions[sv_id] = replace(
            stored, json_artifact_id=artifact_id, claimed_at=stored.claimed_at or now
        )

    # -- conditions, as the store's writes state them ----------------------------------

    def _check_guard(self, guard: ApplyGuard | None) -> None:
        if guard is None:
            return
        attempt = self._runs.parts(guard.run_id).get(APPLY_ATTEMPT)
        if attempt is None or attempt.state not in OPEN_ATTEMPT:
            raise RunnerAuthorityRefused(guard.run_id, "its apply attempt has ended")
        run = self._runs.runs.get(guard.run_id)
        if run is None or run.status is not RunStatus.APPLYING:
            raise RunNotApplying(guard.run_id, None if run is None else run.status.value)

    def _check_token(self, token_hash: str, now: datetime) -> None:
        token = self.tokens.get(token_hash)
        if token is None:
            raise NotFound("upload", "this URL")
        if token.used:
            raise UploadUrlUsed()
        if not token.valid_until > now:
            raise UploadUrlExpired()

    def _use_token(self, token_hash: str) -> None:
        self.tokens[token_hash] = replace(self.tokens[token_hash], used=True)

    def _check_pointer(self, authority: Authority) -> Workspace | None:
        workspace = self._workspaces.workspaces.get(authority.workspace_id)
        writer = None if workspace is None else workspace.writer_run_id
        lock_id = None if workspace is None else workspace.lock_id
        fence = None if workspace is None else workspace.fence
        if (
            workspace is not None
            and lock_id == authority.lock_id
            and workspace.lock_holder == authority.holder_ref
            and workspace.current_state_version_id == authority.predecessor_id
            and writer == authority.run_id
            and (authority.fence is None or fence == authority.fence)
        ):
            return workspace
        if writer and writer != authority.run_id:
            raise WorkspaceHeldByRun(authority.workspace_id, writer)
        if lock_id != authority.lock_id or (
            authority.fence is not None and fence != authority.fence
        ):
            raise WorkspaceLocked(
                f"workspace {authority.workspace_id} is no longer locked by this writer; "
                "it only accepts state uploads from the lock holder"
            )
        current = None if workspace is None else workspace.current_state_version_id
        raise Conflict(
            f"the state of workspace {authority.workspace_id} changed meanwhile "
            f"(current version {current}); pull it and retry"
        )

    def _check_event(self, event_id: str) -> None:
        if any(event.event_id == event_id for event in self.events):
            raise ConcurrentChange(f"audit event {event_id} changed concurrently")

    def _move_pointer(self, workspace: Workspace | None, version: StateVersion) -> None:
        assert workspace is not None
        self._workspaces.workspaces[workspace.id] = replace(
            workspace,
            current_state_version_id=version.id,
            current_serial=version.serial,
            current_lineage=version.lineage,
            current_publication=publication_of(version),
        )

    def _record(self, version: StateVersion, event_id: str, at: datetime) -> None:
        self.events.append(
            PublishedEvent(
                event_id,
                version.organization_id,
                "state.published",
                version.workspace_id,
                version.created_by,
                at,
                {
                    "state_version": version.id,
                    "serial": str(version.serial),
                    "predecessor": version.predecessor_id or "",
                    "forced": str(version.forced).lower(),
                },
            )
        )


class InMemoryWorkspaceLocks:
    """``WorkspaceLocks``: the lock fields of ``InMemoryWorkspaces``' workspaces, and the
    runs of ``InMemoryRuns``."""

    def __init__(self, workspaces: InMemoryWorkspaces, runs: InMemoryRuns) -> None:
        self._workspaces = workspaces
        self._runs = runs

    def acquire(
        self,
        workspace_id: str,
        holder: LockHolder,
        *,
        lock_id: str,
        observed_fence: int,
        reason: str | None,
        now: datetime,
    ) -> None:
        workspace = self._workspaces.workspaces.get(workspace_id)
        if workspace is None:
            raise ConcurrentChange(f"workspace {workspace_id} fence moved")
        writer = workspace.writer_run_id
        if holder.run_id is not None and writer != holder.run_id:
            raise NotWriter(workspace_id, holder.run_id, writer)
        if holder.run_id is None and writer is not None:
            raise WorkspaceHeldByRun(workspace_id, writer)
        if workspace.lock_id is not None:
            held_by = workspace.lock_holder_display or workspace.lock_holder
            raise WorkspaceAlreadyLocked(workspace_id, held_by)
        if workspace.fence != observed_fence:
            raise ConcurrentChange(f"workspace {workspace_id} fence moved")
        self._workspaces.workspaces[workspace_id] = replace(
            workspace,
            lock_id=lock_id,
            lock_holder=holder.ref,
            lock_holder_display=holder.display,
            locked_at=now,
            fence=observed_fence + 1,
            lock_reason=reason or None,
            lock_run_id=holder.run_id,
        )

    def release(self, workspace_id: str, lock_id: str, *, holder_ref: str | None) -> None:
        workspace = self._workspaces.workspaces.get(workspace_id)
        if workspace is None:
            raise WorkspaceNotLocked(workspace_id)
        held = workspace.lock_id == lock_id and (
            workspace.lock_holder == holder_ref
            if holder_ref is not None
            else workspace.lock_run_id is None
        )
        if not held:
            if workspace.lock_id is None:
                raise WorkspaceNotLocked(workspace_id)
            if workspace.lock_run_id is not None:
                raise WorkspaceLocked(
                    f"workspace {workspace_id} is locked by Run {workspace.lock_run_id}"
                )
            raise WorkspaceLocked(
                f"workspace {workspace_id} is locked by "
                f"{workspace.lock_holder_display or workspace.lock_holder}"
            )
        self._workspaces.workspaces[workspace_id] = replace(
            workspace,
            lock_id=None,
            lock_run_id=None,
            locked_at=None,
            lock_holder=None,
            lock_holder_display=None,
            lock_reason=None,
        )

    def run(self, run_id: str) -> Run:
        return self._runs.get_run(run_id)

    def apply_attempt(self, run_id: str) -> tuple[Run, RunPart | None]:
        return self._runs.get_run(run_id), self._runs.parts(run_id).get(APPLY_ATTEMPT)
