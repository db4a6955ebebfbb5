"""Organizations and workspaces: creation with unique names, and scoped reads."""

from __future__ import annotations

import re

from runplane.domain.clock import Clock
from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import NotFound, RunplaneError
from runplane.domain.ids import IdGenerator, IdKind
from runplane.store import workspaces as store

# The names TFE accepts for organizations and workspaces.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,90}$")


class InvalidName(RunplaneError):
    code = "INVALID_NAME"
    http_status = 422


def _valid(kind: str, name: str) -> str:
    if not _NAME.match(name):
        raise InvalidName(f"{kind} name {name!r} must be 1-90 letters, digits, '-' or '_'")
    return name


class Tenancy:
    def __init__(self, clock: Clock, ids: IdGenerator) -> None:
        self._clock = clock
        self._ids = ids

    def create_organization(self, name: str) -> Organization:
        org = Organization(
            id=self._ids.new(IdKind.ORGANIZATION),
            name=_valid("organization", name),
            created_at=self._clock.now(),
        )
        store.create_organization(org).commit()
        return org

    def create_workspace(self, organization_id: str, name: str) -> Workspace:
        store.get_organization(organization_id)
        workspace = Workspace(
            id=self._ids.new(IdKind.WORKSPACE),
            organization_id=organization_id,
            name=_valid("workspace", name),
            created_at=self._clock.now(),
            fence=0,
            writer_run_id=None,
            lock_id=None,
            lock_run_id=None,
            queue_length=0,
        )
        store.create_workspace(workspace).commit()
        return workspace

    def workspace(self, organization_id: str, workspace_id: str) -> Workspace:
        """Another organization's workspace is reported exactly like a missing one."""
        workspace = store.get_workspace(workspace_id)
        if workspace.organization_id != organization_id:
            raise NotFound("workspace", workspace_id)
        return workspace
