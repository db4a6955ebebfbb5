"""The teams page and its forms (docs/teams.md, "In the dashboard"): the organization's
teams, their members, mapped groups, organization access and workspace access; for
holders of ``teams:manage``, forms to create and delete teams, add and remove members,
and set or remove a team's access to a workspace.

Handlers only read the form and call the teams service with the signed-in principal:
the service holds every rule (who may, names, levels, limits); a refusal writes nothing
and answers the typed error page.
"""

from __future__ import annotations

from typing import Any

from functions.dashboard.pages import Session, render
from functions.dashboard.web import Page, Request, redirect
from runplane.domain.identity import Permission
from runplane.domain.teams import ORGANIZATION_ACCESS, AccessLevel, Capability
from runplane.wiring import services

PAGE_PATH = "/ui/teams"


def _names(text: str) -> list[str]:
    """A comma- or newline-separated field as its names, blanks dropped."""
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


def page(request: Request, session: Session) -> Page:
    s = services()
    principal = session.principal
    teams = s.teams.all(principal)
    readable = principal.may_somewhere(Permission.WORKSPACE_READ)
    workspaces = {w.id: w.name for w in s.workspaces.list_own(principal)} if readable else {}
    shown: list[dict[str, Any]] = []
    for team in teams:
        access = [
            {**a.view(), "workspace_name": workspaces.get(a.workspace_id, a.workspace_id)}
            for a in s.teams.access_of(principal, team.id)
        ]
        shown.append({**team.view(), "access": sorted(access, key=lambda a: a["workspace_name"])})
    return render(
        200,
        "teams.html",
        session=session,
        teams=shown,
        workspaces=sorted(workspaces.items(), key=lambda item: item[1]),
        may_manage=principal.may(Permission.TEAMS_MANAGE),
        levels=[level.value for level in AccessLevel],
        capabilities=[c.value for c in Capability],
        organization_access=sorted(ORGANIZATION_ACCESS),
    )


def _checked(form: dict[str, str], prefix: str) -> list[str]:
    """The names of the ticked boxes ``<prefix><name>``."""
    return sorted(
        key.removeprefix(prefix)
        for key, value in form.items()
        if key.startswith(prefix) and value == "yes"
    )


def create(request: Request, session: Session) -> Page:
    form = request.form()
    session.check_post(request, form)
    services().teams.create(
        session.principal,
        form.get("name", "").strip(),
        members=_names(form.get("members", "")),
        groups=_names(form.get("groups", "")),
        organization_access_names=_checked(form, "org_access_"),
        owners=form.get("owners") == "yes",
    )
    return redirect(PAGE_PATH)


def delete(request: Request, session: Session, team_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    services().teams.delete(session.principal, team_id)
    return redirect(PAGE_PATH)


def add_member(request: Request, session: Session, team_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    services().teams.add_member(session.principal, team_id, form.get("user", "").strip())
    return redirect(f"{PAGE_PATH}#{team_id}")


def remove_member(request: Request, session: Session, team_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    services().teams.remove_member(session.principal, team_id, form.get("user", ""))
    return redirect(f"{PAGE_PATH}#{team_id}")


def set_access(request: Request, session: Session, team_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    services().teams.set_access(
        session.principal,
        form.get("workspace_id", ""),
        team_id,
        level=form.get("level") or None,
        capability_names=_checked(form, "capability_"),
    )
    return redirect(f"{PAGE_PATH}#{team_id}")


def remove_access(request: Request, session: Session, team_id: str) -> Page:
    form = request.form()
    session.check_post(request, form)
    services().teams.remove_access(session.principal, form.get("workspace_id", ""), team_id)
    return redirect(f"{PAGE_PATH}#{team_id}")
