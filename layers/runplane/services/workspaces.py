"""Workspaces as callers see them: scoped reads, settings, and the workspace lock.

Native OpenTofu clients lock a workspace around every state change. A run
holding the workspace's writer authority always wins: while it does, nobody
else can lock, and the refusal says which run holds it and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from runplane.domain.audit import AuditAction, AuditRecord, settings_change_details
from runplane.domain.clock import Clock
from runplane.domain.entities import (
    MAX_APPROVAL_WINDOW,
    MIN_APPROVAL_WINDOW,
    LockHolder,
    Organization,
    Workspace,
    valid_name,
    valid_tags,
)
from runplane.domain.errors import (
    ConcurrentChange,
    InvalidInput,
    NotFound,
    TooMuchContention,
    WorkspaceAlreadyLocked,
    WorkspaceHeldByRun,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.paging import Page
from runplane.domain.read_ahead import ReadAhead
from runplane.domain.run import INTERVENTION_STATUSES, RunStatus
from runplane.domain.second_approval import SecondApprovalRule
from runplane.domain.tfe_runs import ExecutionMode

if TYPE_CHECKING:
    from runplane.services.repositories import WorkspaceDirectory
    from runplane.services.repositories.access import EngineStartReads
    from runplane.services.repositories.state import WorkspaceLocks
    from runplane.services.runner_authority import ApplyAuthority

TAGS_POINTER = "/data/attributes/tag-names"
# As the Cloud API's workspace attributes allow.
MAX_DESCRIPTION = 1000
MAX_ENGINE_VERSION = 40
_ATTEMPTS = 5
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class EngineStart:
    organization_name: str
    workspace: Workspace
    items: ReadAhead
    """The items its reads read, as one consistent read found them, to serve each."""


class Workspaces:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        directory: WorkspaceDirectory,
        *,
        locks: WorkspaceLocks,
        engine_reads: EngineStartReads,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._directory = directory
        self._locks = locks
        self._engine_reads = engine_reads
        # Organization names are claimed for good (no rename, no delete): resolved once.
        self._organizations: dict[str, Organization] = {}
        self._organization_names: dict[str, str] = {}
        # Workspace names within an organization: (org id, name) -> workspace id,
        # remembered once found (a missing name is asked again: it may be created). A
        # deleted workspace frees its name: a remembered ID found deleted is forgotten
        # and the name asked again.
        self._workspace_ids: dict[tuple[str, str], str] = {}

    # -- reads ----------------------------------------------------------------------------

    def organization(self, principal: Principal, name: str) -> Organization:
        """The caller's own organization by name; any other is 'not found'."""
        found = self._organizations.get(name)
        if found is None:
            org_id = self._directory.find_organization_id(name)
            if org_id is None:
                raise NotFound("organization", name)
            found = self._directory.get_organization(org_id)
            _remember(self._organizations, name, found)
        if found.id != principal.organization_id:
            raise NotFound("organization", name)
        return found

    def organizations(self, principal: Principal) -> list[Organization]:
        """Every organization the caller sees: its own."""
        principal.require(Permission.ORGANIZATION_READ)
        return [self._directory.get_organization(principal.organization_id)]

    def read_organization(self, principal: Principal, name: str) -> Organization:
        """The organization itself, for callers who may read it (a runner session,
        confined to its run's workspace, may not)."""
        principal.require(Permission.ORGANIZATION_READ)
        return self.organization(principal, name)

    def organization_id_of(self, name: str) -> str:
        org_id = self._directory.find_organization_id(name)
        if org_id is None:
            raise NotFound("organization", name)
        return org_id

    def organization_name(self, organization_id: str) -> str:
        name = self._organization_names.get(organization_id)
        if name is None:
            name = self._directory.get_organization(organization_id).name
            _remember(self._organization_names, organization_id, name)
        return name

    def by_id(self, principal: Principal, workspace_id: str) -> Workspace:
        """The workspace, if the caller may read it (else not found, as another
        organization's)."""
        try:
            workspace = self._directory.get_workspace(workspace_id)
        except NotFound:
            raise NotFound("workspace", workspace_id) from None
        if not principal.can_see_workspace(workspace.organization_id, workspace.id):
            raise NotFound("workspace", workspace_id)
        principal.require(Permission.WORKSPACE_READ, workspace.id)
        return workspace

    def writer_of(self, workspace_id: str) -> str | None:
        """The run holding the workspace's writer reservation, if any, for a caller that
        has already read one of its runs (and so may list them all)."""
        return self._directory.get_workspace(workspace_id).writer_run_id

    def engine_start(self, principal: Principal) -> EngineStart:
        """What a runner's engine starts a phase by reading: its organization's name, its
        run's workspace, and the items those reads read (``EngineStart.items``). Only a
        runner session has one."""
        if (
            principal.kind is not PrincipalKind.RUNNER
            or principal.workspace_id is None
            or principal.run_id is None
        ):
            raise Forbidden(Permission.STATE_READ)
        items = self._engine_reads.read_ahead(principal.run_id, principal.workspace_id)
        with self._engine_reads.serving(items):
            workspace = self.by_id(principal, principal.workspace_id)
        return EngineStart(self.organization_name(workspace.organization_id), workspace, items)

    def by_name(self, principal: Principal, org_name: str, name: str) -> Workspace:
        org = self.organization(principal, org_name)
        remembered = self._workspace_ids.get((org.id, name))
        if remembered is not None:
            try:
                return self.by_id(principal, remembered)
            except NotFound:
                # Deleted since: the name may name another workspace now.
                self._workspace_ids.pop((org.id, name), None)
        workspace_id = self._directory.find_workspace_id(org.id, name)
        if workspace_id is None:
            raise NotFound("workspace", name)
        _remember(self._workspace_ids, (org.id, name), workspace_id)
        return self.by_id(principal, workspace_id)

    def forget(self, workspace: Workspace) -> None:
        """Forget a deleted workspace's name (this process's memory of it)."""
        self._workspace_ids.pop((workspace.organization_id, workspace.name), None)

    def list_own(self, principal: Principal) -> list[Workspace]:
        """Every workspace of the caller's own organization it may see, by name (refused
        to a caller who may read none)."""
        principal.require_somewhere(Permission.WORKSPACE_READ)
        return sorted(
            (
                w
                for w in self._directory.list_workspaces(principal.organization_id)
                if principal.can_see_workspace(w.organization_id, w.id)
                and principal.may(Permission.WORKSPACE_READ, w.id)
            ),
            key=lambda w: w.name,
        )

    def search(
        self,
        principal: Principal,
        org_name: str,
        *,
        search: str | None = None,
        tags: tuple[str, ...] = (),
        page: int = 1,
        size: int = 20,
    ) -> Page[Workspace]:
        principal.require_somewhere(Permission.WORKSPACE_READ)
        org = self.organization(principal, org_name)
        found = [
            w
            for w in self._directory.list_workspaces(org.id)
            if (not search or search.lower() in w.name.lower())
            and set(tags) <= set(w.tag_names)
            and principal.can_see_workspace(w.organization_id, w.id)
            and principal.may(Permission.WORKSPACE_READ, w.id)
        ]
        return Page.of(found, page, size)

    # -- writes ---------------------------------------------------------------------------

    def create(
        self,
        principal: Principal,
        org_name: str,
        name: str,
        *,
        terraform_version: str | None = None,
        description: str | None = None,
        tags: tuple[str, ...] = (),
        execution_mode: ExecutionMode = ExecutionMode.LOCAL,
        workspace_id: str | None = None,
        preview_of: str | None = None,
    ) -> Workspace:
        """``workspace_id``: an ID the caller drew (a pull request's preview, recorded
        before it is created), else a new one; ``preview_of``: the bound workspace a
        preview is made from."""
        principal.require(Permission.WORKSPACE_CREATE)
        org = self.organization(principal, org_name)
        return create_workspace(
            self._directory,
            self._clock,
            self._ids,
            org.id,
            name,
            name_pointer="/data/attributes/name",
            terraform_version=terraform_version,
            description=description,
            tags=tags,
            execution_mode=execution_mode,
            workspace_id=workspace_id,
            preview_of=preview_of,
        )

    def update(
        self,
        principal: Principal,
        workspace: Workspace,
        *,
        terraform_version: str | None = None,
        description: str | None = None,
        tags: tuple[str, ...] | None = None,
        approval_window_seconds: int | None = None,
        execution_mode: ExecutionMode | None = None,
        second_approval: SecondApprovalRule | None = None,
        expected_settings_version: int | None = None,
    ) -> Workspace:
        """Change the settings given (None: unchanged). ``expected_settings_version``:
        the version the caller showed; if they changed since, ``ConcurrentChange`` (409)
        and nothing is written."""
        principal.require(Permission.WORKSPACE_UPDATE, workspace.id)
        if description is not None and len(description) > MAX_DESCRIPTION:
            raise InvalidInput(
                f"the description is at most {MAX_DESCRIPTION} characters", "/description"
            )
        if terraform_version is not None and len(terraform_version) > MAX_ENGINE_VERSION:
            raise InvalidInput(
                f"the engine version is at most {MAX_ENGINE_VERSION} characters",
                "/terraform_version",
            )
        if tags is not None:
            tags = valid_tags(tags, TAGS_POINTER)
        if approval_window_seconds is not None and not (
            MIN_APPROVAL_WINDOW <= approval_window_seconds <= MAX_APPROVAL_WINDOW
        ):
            raise InvalidInput(
                f"the approval window is {MIN_APPROVAL_WINDOW} s to {MAX_APPROVAL_WINDOW} s",
                "/approval_window_seconds",
            )
        mode = None if execution_mode is None else ExecutionMode(execution_mode).value
        given = {
            "terraform_version": terraform_version,
            "description": description,
            "tag_names": tags,
            "approval_window_seconds": approval_window_seconds,
            "execution_mode": mode,
            "second_approval": second_approval,
        }
        self._directory.update_settings(
            workspace.id,
            terraform_version=terraform_version,
            description=description,
            tag_names=tags,
            approval_window_seconds=approval_window_seconds,
            execution_mode=mode,
            second_approval=second_approval,
            expected_settings_version=expected_settings_version,
            audit=self._settings_record(principal, workspace, given),
        )
        return self._directory.get_workspace(workspace.id)

    def _settings_record(
        self, principal: Principal, workspace: Workspace, given: Mapping[str, object]
    ) -> AuditRecord | None:
        """The ``workspace.settings_changed`` record of a change that changes something."""
        details = settings_change_details(workspace, given)
        if not details:
            return None
        return AuditRecord.of(
            principal,
            AuditAction.WORKSPACE_SETTINGS_CHANGED,
            "workspace",
            workspace.id,
            at=self._clock.now(),
            id=self._ids.new(IdKind.AUDIT_EVENT),
            details=details,
        )

    # -- locking --------------------------------------------------------------------------

    def lock(self, principal: Principal, workspace_id: str, reason: str | None) -> Workspace:
        workspace = self.by_id(principal, workspace_id)
        if principal.kind is PrincipalKind.RUNNER:
            # The workflow locked the workspace for this run's apply attempt; the
            # engine's own lock call only confirms that this session holds it.
            self.apply_authority(principal, workspace)
            return workspace
        principal.require(Permission.WORKSPACE_LOCK, workspace.id)
        holder = LockHolder(principal.ref, principal.display)
        for _ in range(_ATTEMPTS):
            if workspace.writer_run_id is not None:
                raise self.held_by_run(workspace.id, workspace.writer_run_id)
            if workspace.lock_id is not None:
                # Exclusive whoever asks, the holder included (as TFE): a lock
                # is held by one client process, not by a set of credentials.
                raise WorkspaceAlreadyLocked(workspace.id, workspace.lock_holder_display)
            try:
                self._locks.acquire(
                    workspace.id,
                    holder,
                    lock_id=self._ids.new(IdKind.LOCK),
                    observed_fence=workspace.fence,
                    reason=reason,
                    now=self._clock.now(),
                )
            except WorkspaceHeldByRun as held:
                raise self.held_by_run(workspace.id, held.run_id) from None
            except ConcurrentChange:
                workspace = self._directory.get_workspace(workspace.id)
                continue
            return self._directory.get_workspace(workspace.id)
        raise TooMuchContention(f"workspace {workspace_id}: the lock kept changing")

    def unlock(self, principal: Principal, workspace_id: str) -> Workspace:
        workspace = self.by_id(principal, workspace_id)
        if principal.kind is PrincipalKind.RUNNER:
            # A run's lock is released by the control plane when it commits the
            # apply's result, never by the engine.
            self.apply_authority(principal, workspace)
            return workspace
        principal.require(Permission.WORKSPACE_LOCK, workspace.id)
        if workspace.lock_id is None:
            raise WorkspaceNotLocked(workspace.id)
        if workspace.lock_holder != principal.ref:
            raise WorkspaceLocked(
                f"workspace {workspace.id} is locked by {workspace.lock_holder_display}"
            )
        self._locks.release(workspace.id, workspace.lock_id, holder_ref=principal.ref)
        return self._directory.get_workspace(workspace.id)

    def force_unlock(self, principal: Principal, workspace_id: str) -> Workspace:
        workspace = self.by_id(principal, workspace_id)
        principal.require(Permission.WORKSPACE_FORCE_UNLOCK, workspace.id)
        if workspace.lock_id is None:
            raise WorkspaceNotLocked(workspace.id)
        if workspace.lock_run_id is not None:
            raise self.held_by_run(workspace.id, workspace.lock_run_id)
        self._locks.release(workspace.id, workspace.lock_id, holder_ref=None)
        return self._directory.get_workspace(workspace.id)

    def apply_authority(self, principal: Principal, workspace: Workspace) -> ApplyAuthority:
        """The apply authority a runner session holds on ``workspace`` (see
        ``runner_authority``), or its typed refusal."""
        # A runner's authority (its attempt, its run's parts) is loaded by runners' calls only.
        from runplane.services import runner_authority

        return runner_authority.apply_authority(principal, workspace, self._locks)

    def held_by_run(self, workspace_id: str, run_id: str) -> WorkspaceHeldByRun:
        try:
            status: RunStatus | None = self._locks.run(run_id).status
        except NotFound:
            status = None
        recovering = status in INTERVENTION_STATUSES or status is RunStatus.APPLY_FAILED
        return WorkspaceHeldByRun(
            workspace_id, run_id, status.value if status else None, needs_recovery=recovering
        )


def create_workspace(
    directory: WorkspaceDirectory,
    clock: Clock,
    ids: IdGenerator,
    organization_id: str,
    name: str,
    *,
    name_pointer: str | None = None,
    terraform_version: str | None = None,
    description: str | None = None,
    tags: tuple[str, ...] = (),
    execution_mode: ExecutionMode = ExecutionMode.LOCAL,
    workspace_id: str | None = None,
    preview_of: str | None = None,
) -> Workspace:
    """Write a new, unreserved, unlocked workspace; refused if its name is taken."""
    workspace = Workspace(
        id=workspace_id or ids.new(IdKind.WORKSPACE),
        organization_id=organization_id,
        name=valid_name("workspace", name, name_pointer),
        created_at=clock.now(),
        fence=0,
        writer_run_id=None,
        lock_id=None,
        lock_run_id=None,
        queue_length=0,
        terraform_version=terraform_version,
        description=description,
        tag_names=valid_tags(tags, TAGS_POINTER),
        execution_mode=ExecutionMode(execution_mode).value,
        preview_of=preview_of,
        # Counted from its creation (its destinations and dependents are none yet).
        destination_count=0,
        dependent_count=0,
    )
    directory.create_workspace(workspace)
    return workspace


_REMEMBERED = 10_000


def _remember(memory: dict[K, V], key: K, value: V) -> None:
    """Keep an immutable fact, forgetting the oldest once full."""
    if len(memory) >= _REMEMBERED:
        memory.pop(next(iter(memory)))
    memory[key] = value
