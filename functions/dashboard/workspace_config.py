"""The workspace page's configuration sections: variables, schedules, run triggers,
notification destinations and the source binding, and their forms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runplane.domain.entities import Workspace

if TYPE_CHECKING:
    from functions.dashboard.app import Session


def context(session: Session, workspace: Workspace) -> dict[str, Any]:
    """What ``ws_config.html`` shows of ``workspace`` to ``session``'s caller."""
    return {}
