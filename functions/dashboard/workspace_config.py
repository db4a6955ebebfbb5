"""The workspace page's configuration sections: variables, schedules, run triggers,
notification destinations and the source binding (docs/dashboard.md, "Workspace
configuration"). Their forms are in ``workspace_config_forms``.

Each section is read through the same service as the run API, with the signed-in
principal, so what a section shows is what the API would answer that person. The
``may_*`` flags only hide buttons: the services refuse anyone else anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from functions.dashboard.pages import Session
from runplane.domain.entities import Workspace
from runplane.domain.errors import NotFound
from runplane.domain.identity import Forbidden, Permission, Principal
from runplane.domain.notifications import DestinationKind
from runplane.domain.run_events import NOTIFIABLE
from runplane.domain.schedules import ScheduleKind
from runplane.domain.variables import VariableCategory
from runplane.wiring import services

T = TypeVar("T")
# The run kinds a run trigger may queue, as the run API names them.
TRIGGER_RUN_KINDS = ("plan_and_apply", "plan_only")


def context(session: Session, workspace: Workspace) -> dict[str, Any]:
    """What ``ws_config.html`` shows of ``workspace`` to ``session``'s caller."""
    principal = session.principal
    # Loaded with the first workspace page, not with every dashboard cold start.
    from runplane.services.schedules import view as schedule_view

    s = services()
    granted = principal.permissions_in(workspace.id)
    may_edit = Permission.WORKSPACE_UPDATE in granted
    may_edit_variables = Permission.VARIABLES_MANAGE in granted
    triggers = s.run_triggers.show(principal, workspace.id)
    now = s.clock.now()
    return {
        "ws_config": {
            "variables": s.workspace_variables.list(principal, workspace.id),
            "variable_sets": _readable(lambda: _variable_sets(principal, workspace)),
            "schedules": [
                schedule_view(each, now)
                for each in s.schedules.of_workspace(principal, workspace.id)
            ],
            "triggers": triggers,
            # The workspaces an editor may add as a source: only then worth a listing.
            "trigger_candidates": _trigger_candidates(principal, workspace, triggers)
            if may_edit
            else [],
            "destinations": s.notifications.list_for(principal, workspace.id),
            "binding": _binding(principal, workspace),
            "may_edit": may_edit,
            "may_edit_variables": may_edit_variables,
            # A schedule creates runs: the service asks for both permissions.
            "may_schedule": may_edit and Permission.RUN_CREATE in granted,
            "categories": [c.value for c in VariableCategory],
            "schedule_kinds": [k.value for k in ScheduleKind],
            "trigger_run_kinds": TRIGGER_RUN_KINDS,
            "destination_kinds": [k.value for k in DestinationKind],
            "events": sorted(e.value for e in NOTIFIABLE),
        }
    }


def _readable(read: Callable[[], T]) -> T | None:
    """What ``read`` returns, or None when the caller may not read it (the section
    then says so instead of failing the whole page)."""
    try:
        return read()
    except Forbidden:
        return None


def _variable_sets(principal: Principal, workspace: Workspace) -> list[dict[str, Any]]:
    """The organization's variable sets that apply to the workspace, with their
    variables' names (never a value)."""
    s = services()
    applied = []
    for each in s.variable_sets.list(principal):
        if not each.applies_to(workspace.id):
            continue
        detail = s.variable_sets.show(principal, each.id)
        applied.append(
            {
                "name": each.name,
                "global": each.global_,
                "variables": [(v.category.value, v.name) for v in detail.variables],
            }
        )
    return applied


def _trigger_candidates(
    principal: Principal, workspace: Workspace, triggers: dict[str, Any]
) -> list[Workspace]:
    taken = {source["id"] for source in triggers["sources"]} | {workspace.id}
    return [w for w in services().workspaces.list_own(principal) if w.id not in taken]


def _binding(principal: Principal, workspace: Workspace) -> dict[str, Any] | None:
    """The workspace's source binding, GitHub's or GitLab's (never its secrets: the
    views name none); GitLab's is read only for a workspace GitHub is not bound to."""
    try:
        return services().github.binding(principal, workspace.id).to_dict()
    except NotFound:
        pass
    try:
        return services().gitlab.binding(principal, workspace.id).to_dict()
    except NotFound:
        return None
