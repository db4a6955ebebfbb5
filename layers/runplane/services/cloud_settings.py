"""Workspace cloud settings: read, replace and clear them, and what a new run pins.

Reading needs ``workspace:read``; changing them ``credentials:manage`` (admins): they
decide which cloud identities every later run of the workspace may assume. Each change
is one write of the whole settings at the next version, conditioned on the version
read, with its organization audit event (the actor and which settings changed, never
the external ID's value). The external ID is sealed with a KMS data key bound to the
workspace, never returned (only ``aws_external_id_set``), logged or audited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runplane.adapters.keys import DataKeys
from runplane.adapters.sealed import Sealed, seal, unseal
from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.cloud_settings import (
    CloudSettings,
    CloudSettingsChange,
    CredentialDecisions,
    PinnedCredentials,
    SealedExternalId,
    StoredCloudSettings,
    check_cloud_settings,
    external_id_context,
)
from runplane.domain.entities import AuditEvent, Workspace
from runplane.domain.errors import ConcurrentChange
from runplane.domain.identity import Permission, Principal
from runplane.domain.ids import IdGenerator, IdKind
from runplane.services.workspaces import Workspaces

if TYPE_CHECKING:
    from runplane.services.repositories.cloud_settings import CloudSettingsStore

SET_EVENT = "workspace.cloud_settings_set"
CLEARED_EVENT = "workspace.cloud_settings_cleared"


class WorkspaceCloudSettings:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        workspaces: Workspaces,
        keys: DataKeys,
        store: CloudSettingsStore,
        *,
        deployment_region: str,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._workspaces = workspaces
        self._keys = keys
        self._store = store
        self._region = deployment_region

    def get(self, principal: Principal, workspace_id: str) -> StoredCloudSettings | None:
        """The workspace's settings (None: it never had any)."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        return self._store.get(workspace.id)

    def put(
        self,
        principal: Principal,
        workspace_id: str,
        change: CloudSettingsChange,
        *,
        expected_version: int | None = None,
    ) -> StoredCloudSettings | None:
        """Replace the settings whole with ``change``; with ``expected_version``, only
        while they are still at that version (0: none yet), else ``ConcurrentChange``.
        A change that changes nothing writes nothing."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.CREDENTIALS_MANAGE, workspace.id)
        current = self._current(workspace, expected_version)
        before = current.settings if current is not None else CloudSettings()
        settings = check_cloud_settings(
            change,
            deployment_region=self._region,
            external_id_stored=current is not None and current.external_id is not None,
        )
        sealed: SealedExternalId | None = None
        if change.aws_external_id is not None:
            made = seal(
                self._keys,
                external_id_context(workspace.id),
                change.aws_external_id.encode("utf-8"),
            )
            sealed = SealedExternalId(made.wrapped_key, made.ciphertext)
        elif settings.aws_external_id_set and current is not None:
            sealed = current.external_id
        changed = settings.changed_from(before)
        if change.aws_external_id is not None and "aws_external_id" not in changed:
            # A value given is a change, even if it is the one stored (never compared).
            changed.append("aws_external_id")
        if not changed:
            return current
        return self._write(principal, workspace, current, settings, sealed, changed, SET_EVENT)

    def clear(
        self, principal: Principal, workspace_id: str, *, expected_version: int | None = None
    ) -> StoredCloudSettings | None:
        """Remove every setting (a write of no settings at the next version); nothing is
        written when there are none."""
        workspace = self._workspaces.by_id(principal, workspace_id)
        principal.require(Permission.CREDENTIALS_MANAGE, workspace.id)
        current = self._current(workspace, expected_version)
        if current is None or current.settings.empty:
            return current
        changed = CloudSettings().changed_from(current.settings)
        return self._write(
            principal, workspace, current, CloudSettings(), None, changed, CLEARED_EVENT
        )

    def _current(
        self, workspace: Workspace, expected_version: int | None
    ) -> StoredCloudSettings | None:
        current = self._store.get(workspace.id)
        version = current.version if current is not None else 0
        if expected_version is not None and expected_version != version:
            raise ConcurrentChange(
                f"the cloud settings of workspace {workspace.id} are at version {version}, "
                f"not {expected_version}; nothing was written: read them again"
            )
        return current

    def _write(
        self,
        principal: Principal,
        workspace: Workspace,
        current: StoredCloudSettings | None,
        settings: CloudSettings,
        sealed: SealedExternalId | None,
        changed: list[str],
        event_type: str,
    ) -> StoredCloudSettings:
        now = self._clock.now()
        previous = current.version if current is not None else 0
        stored = StoredCloudSettings(
            workspace_id=workspace.id,
            settings=settings,
            version=previous + 1,
            updated_at=now,
            updated_by=principal.ref,
            external_id=sealed,
        )
        event = AuditEvent(
            id=self._ids.new(IdKind.AUDIT_EVENT),
            organization_id=workspace.organization_id,
            subject_id=workspace.id,
            type=event_type,
            actor=principal.ref,
            at=now,
            details=_details(settings, changed, stored.version),
        )
        record = AuditRecord.of(
            principal,
            AuditAction.CLOUD_SETTINGS_CLEARED
            if event_type == CLEARED_EVENT
            else AuditAction.CLOUD_SETTINGS_SET,
            "workspace",
            workspace.id,
            at=now,
            id=self._ids.new(IdKind.AUDIT_EVENT),
            # Which settings changed, not their values (the external ID least of all).
            details={"changed": ",".join(changed)[:200], "version": str(stored.version)},
        )
        self._store.put(
            stored,
            org_id=workspace.organization_id,
            previous_version=previous,
            event=event,
            audit=record,
        )
        return stored

    # -- what runs pin -----------------------------------------------------------------------

    def pinned(self, workspace: Workspace, *, may_apply: bool) -> PinnedCredentials:
        """What a new run of ``workspace`` pins: its credential decisions from the
        settings as they are now, and the external ID as it is sealed now. No
        permission is checked: the caller creating the run was."""
        stored = self._store.get(workspace.id)
        if stored is None:
            return PinnedCredentials(CredentialDecisions())
        settings = None if stored.settings.empty else stored.settings
        decisions = CredentialDecisions.decide(
            settings, stored.version, may_apply=may_apply, deployment_region=self._region
        )
        aws = decisions.aws
        sealed = stored.external_id if aws is not None and aws.external_id_set else None
        return PinnedCredentials(decisions, sealed)

    def external_id(self, workspace_id: str, pinned: PinnedCredentials) -> str | None:
        """The external ID a run pinned, opened (None: it pinned none). Only for
        assuming the run's role; never for a reply, a log or an audit event."""
        if pinned.external_id is None:
            return None
        opened = unseal(
            self._keys,
            external_id_context(workspace_id),
            Sealed(pinned.external_id.wrapped_key, pinned.external_id.ciphertext),
        )
        return opened.decode("utf-8")


def _details(settings: CloudSettings, changed: list[str], version: int) -> dict[str, str]:
    """The audit event's details: which settings changed and their new values ("" when
    unset), the external ID only as ``set`` or ""."""
    details = {"changed": ",".join(changed), "version": str(version)}
    for name in changed:
        if name == "aws_external_id":
            details[name] = "set" if settings.aws_external_id_set else ""
        else:
            value = getattr(settings, name)
            details[name] = "" if value is None else str(value)
    return details
