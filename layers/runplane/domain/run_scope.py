"""What a run's execution input names besides the run: its organization and workspace.

Neither ever changes for a run, so a workflow step given them can read the items it
needs of them together with the run, in one request, instead of one after another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunScope:
    organization_id: str
    workspace_id: str

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> RunScope | None:
        """The scope a step's input names; None for an input without one (an execution
        started before inputs named it)."""
        organization_id, workspace_id = event.get("organization_id"), event.get("workspace_id")
        if isinstance(organization_id, str) and isinstance(workspace_id, str):
            return cls(organization_id, workspace_id)
        return None
