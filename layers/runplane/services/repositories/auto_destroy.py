"""The seam of workspaces' auto-destroys (``services.auto_destroy``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from runplane.domain.auto_destroy import AutoDestroy
from runplane.domain.entities import AuditEvent, Workspace


class AutoDestroyStore(Protocol):
    """Each workspace's auto-destroy, replaced whole at a version.

    - ``get`` is the workspace's auto-destroy as last written, or None.
    - ``put`` writes ``record`` only while the stored one is at ``previous_version``
      (0: none yet), with the organization audit event ``event`` and the outbox write
      ``announce`` (``RunEvents.announce``: a notice) if given, in one write; otherwise
      it raises ``ConcurrentChange`` and writes nothing. ``delete`` likewise removes it.
    - ``armed`` is every workspace's auto-destroy, of every organization (the sweep's).
    - ``last_activity`` is when ``workspace``'s current state version (as it was read)
      was published, or None.
    - ``latest_configuration_id`` is the workspace's newest uploaded configuration
      version that may apply, or None.
    """

    def get(self, workspace_id: str) -> AutoDestroy | None: ...

    def put(
        self,
        record: AutoDestroy,
        *,
        previous_version: int,
        event: AuditEvent | None = None,
        announce: Any = None,
    ) -> None: ...

    def delete(self, workspace_id: str, *, previous_version: int, event: AuditEvent) -> None: ...

    def armed(self) -> list[AutoDestroy]: ...

    def last_activity(self, workspace: Workspace) -> datetime | None: ...

    def latest_configuration_id(self, workspace_id: str) -> str | None: ...
