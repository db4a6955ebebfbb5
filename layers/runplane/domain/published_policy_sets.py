"""A published policy set's head: its current version and where it is attached.

The versions behind a head are immutable and content-addressed; the head moves by one
conditional write naming the head version it replaces (``store.policy_sets``). How a
set's content is packaged and evaluated is ``domain.policy_packaging``'s and
``domain.policy``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class PolicySetHead:
    org_id: str
    name: str
    current_digest: str
    current_artifact_id: str
    policies: list[dict[str, Any]]
    # How many distinct contents were published under this name.
    versions: int
    attached_workspaces: tuple[str, ...]
    all_workspaces: bool
    updated_at: datetime
    updated_by: str
    # The head's own version, which each move names and increments.
    version: int

    def applies_to(self, workspace_id: str) -> bool:
        return self.all_workspaces or workspace_id in self.attached_workspaces
