"""Organization variable sets: named groups of variables (both categories, sensitive or
not) applied to chosen workspaces, or to every workspace of the organization (global).

A set's variables are the same records as a workspace's (``StoredVariable``), sealed to
the set, its category and its name. What a run takes from its sets, and in what order,
is ``domain/variable_precedence.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from runplane.domain.entities import valid_name
from runplane.domain.errors import InvalidInput

MAX_SETS_PER_ORGANIZATION: Final = 100
MAX_GLOBAL_SETS: Final = 10
"""Of an organization's sets, how many may be global."""
MAX_SETS_PER_WORKSPACE: Final = 20
"""How many sets may be applied to one workspace by name (global ones not counted)."""
MAX_SET_VARIABLES: Final = 100
MAX_SET_BYTES: Final = 256 * 1024
"""The most bytes a set's values may add up to (both categories)."""
MAX_SET_DESCRIPTION: Final = 512


@dataclass(frozen=True)
class VariableSet:
    """A set's head: its name, where it applies, how many variables it holds and how
    many bytes their values add up to. ``version`` moves with every change of the head
    (not with its variables', which keep their own versions)."""

    id: str
    organization_id: str
    name: str
    description: str | None
    global_: bool
    workspace_ids: tuple[str, ...]
    variables: int
    bytes: int
    version: int
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str

    def applies_to(self, workspace_id: str) -> bool:
        return self.global_ or workspace_id in self.workspace_ids

    def specific_to(self, workspace_id: str) -> bool:
        """Applied to the workspace by name (it then takes precedence over global sets)."""
        return workspace_id in self.workspace_ids

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "global": self.global_,
            "workspace_ids": list(self.workspace_ids),
            "variable_count": self.variables,
            "created_at": self.created_at.isoformat(),
            "created_by": self.created_by,
            "updated_at": self.updated_at.isoformat(),
            "updated_by": self.updated_by,
        }


@dataclass(frozen=True)
class WorkspaceSets:
    """The sets applied to a workspace by name, as its own record lists them (IDs of
    sets deleted since may remain until the workspace's next application), at the
    record's version (0: none yet)."""

    workspace_id: str
    set_ids: tuple[str, ...]
    version: int


def check_set_name(name: str, pointer: str = "/name") -> str:
    return valid_name("variable set", name, pointer)


def check_description(description: str | None, pointer: str = "/description") -> None:
    if description is not None and len(description) > MAX_SET_DESCRIPTION:
        raise InvalidInput(f"a description has at most {MAX_SET_DESCRIPTION} characters", pointer)
