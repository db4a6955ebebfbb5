"""Creating organizations and workspaces with unique names (bootstrap and tests;
callers with a principal go through ``Workspaces``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from runplane.domain.clock import Clock
from runplane.domain.entities import Organization, Workspace, valid_name
from runplane.domain.errors import Conflict
from runplane.domain.ids import IdGenerator, IdKind
from runplane.services.workspaces import create_workspace

if TYPE_CHECKING:
    from runplane.services.repositories import WorkspaceDirectory


class Tenancy:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        directory: WorkspaceDirectory,
        *,
        single_organization: bool = False,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._directory = directory
        # The embedded stack without sandbox isolation: one process, one organization
        # (organizations are created only here, so this process has seen every one).
        self._single_organization = single_organization
        self._created: list[str] = []
        self._creating = threading.Lock()

    def create_organization(self, name: str) -> Organization:
        org = Organization(
            id=self._ids.new(IdKind.ORGANIZATION),
            name=valid_name("organization", name),
            created_at=self._clock.now(),
        )
        with self._creating:
            if self._single_organization and self._created:
                raise Conflict(
                    "this embedded stack serves one organization: its sandboxes are not "
                    "isolated from each other (run it as root with bubblewrap installed "
                    "to serve more; see docs/security.md)"
                )
            self._directory.create_organization(org)
            self._created.append(org.id)
        return org

    def create_workspace(self, organization_id: str, name: str) -> Workspace:
        self._directory.get_organization(organization_id)
        return create_workspace(self._directory, self._clock, self._ids, organization_id, name)
