"""Creating organizations and workspaces with unique names (bootstrap and tests;
callers with a principal go through ``Workspaces``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runplane.domain.clock import Clock
from runplane.domain.entities import Organization, Workspace, valid_name
from runplane.domain.ids import IdGenerator, IdKind
from runplane.services.workspaces import create_workspace
from runplane.store.workspace_directory import DynamoWorkspaceDirectory

if TYPE_CHECKING:
    from runplane.services.repositories import WorkspaceDirectory


class Tenancy:
    def __init__(
        self, clock: Clock, ids: IdGenerator, directory: WorkspaceDirectory | None = None
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._directory = directory or DynamoWorkspaceDirectory()

    def create_organization(self, name: str) -> Organization:
        org = Organization(
            id=self._ids.new(IdKind.ORGANIZATION),
            name=valid_name("organization", name),
            created_at=self._clock.now(),
        )
        self._directory.create_organization(org)
        return org

    def create_workspace(self, organization_id: str, name: str) -> Workspace:
        self._directory.get_organization(organization_id)
        return create_workspace(self._directory, self._clock, self._ids, organization_id, name)
