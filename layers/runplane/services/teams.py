"""Teams: who belongs to them, what they may do across the organization and on each
workspace, and team tokens (docs/teams.md).

Only holders of ``teams:manage`` (the admin role, an owners team) change teams or
their access: a workspace admin could otherwise grant their own team a capability
no level gives. What a caller's teams grant is read per request (``MemberGrants``), so
a membership or access change applies to the next request of every session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from runplane.domain.audit import AuditAction, AuditRecord
from runplane.domain.clock import Clock
from runplane.domain.entities import Workspace, valid_flag
from runplane.domain.errors import ConcurrentChange, InvalidInput, NotFound
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.teams import (
    MAX_MEMBERS_PER_TEAM,
    Team,
    TeamAccess,
    access_level,
    capabilities,
    group_names,
    member_name,
    organization_access,
    team_name,
)
from runplane.services.identity import Identity, IssuedToken
from runplane.services.repositories.access import TeamStore
from runplane.services.workspaces import Workspaces

# A team changed by someone else between our read and our write is read again.
_ATTEMPTS = 5


class MemberGrants:
    """What one caller's teams grant, read when first asked and kept for the request:
    the organization's teams (one query), then each of the caller's teams' workspace
    access (one query per team)."""

    def __init__(self, store: TeamStore, principal: Principal) -> None:
        self._store = store
        self._principal = principal
        self._lock = threading.Lock()
        self._teams: list[Team] | None = None
        self._by_workspace: dict[str, frozenset[Permission]] | None = None

    def teams(self) -> list[Team]:
        with self._lock:
            if self._teams is None:
                p = self._principal
                self._teams = [
                    t
                    for t in self._store.teams(p.organization_id)
                    if t.includes(user=p.user, groups=p.groups, team_id=p.team_id)
                ]
            return self._teams

    def organization_permissions(self) -> frozenset[Permission]:
        granted: frozenset[Permission] = frozenset()
        for team in self.teams():
            granted |= team.organization_permissions()
        return granted

    def workspace_permissions(self, workspace_id: str) -> frozenset[Permission]:
        return self._workspaces().get(workspace_id, frozenset())

    def anywhere(self) -> frozenset[Permission]:
        granted = self.organization_permissions()
        for held in self._workspaces().values():
            granted |= held
        return granted

    def _workspaces(self) -> dict[str, frozenset[Permission]]:
        teams = self.teams()
        with self._lock:
            if self._by_workspace is None:
                by_workspace: dict[str, frozenset[Permission]] = {}
                for team in teams:
                    for access in self._store.access_of(team.organization_id, team.id):
                        held = by_workspace.get(access.workspace_id, frozenset())
                        by_workspace[access.workspace_id] = held | access.permissions
                self._by_workspace = by_workspace
            return self._by_workspace


def with_teams(store: TeamStore, principal: Principal) -> Principal:
    """``principal`` with what its teams grant (people and API tokens only: runners,
    schedules and sources act with exactly what they were given)."""
    if principal.kind not in {PrincipalKind.USER, PrincipalKind.API_TOKEN}:
        return principal
    return replace(principal, teams=MemberGrants(store, principal))


class Teams:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        store: TeamStore,
        workspaces: Workspaces,
        identity: Callable[[], Identity],
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._store = store
        self._workspaces = workspaces
        self._identity = identity

    # -- reads ------------------------------------------------------------------------------

    def all(self, principal: Principal) -> list[Team]:
        principal.require(Permission.ORGANIZATION_READ)
        return self._store.teams(principal.organization_id)

    def get(self, principal: Principal, team_id: str) -> Team:
        principal.require(Permission.ORGANIZATION_READ)
        return self._store.team(principal.organization_id, _team_id(team_id))

    def access_of(self, principal: Principal, team_id: str) -> list[TeamAccess]:
        """The team's grants on the workspaces the caller may see."""
        team = self.get(principal, team_id)
        return [
            a
            for a in self._store.access_of(team.organization_id, team.id)
            if principal.can_see_workspace(team.organization_id, a.workspace_id)
        ]

    def workspace_access(self, principal: Principal, workspace_id: str) -> list[TeamAccess]:
        workspace = self._workspaces.by_id(principal, workspace_id)
        teams = self._store.teams(workspace.organization_id)
        return self._store.access_to(workspace.organization_id, [t.id for t in teams], workspace.id)

    # -- teams ------------------------------------------------------------------------------

    def create(
        self,
        principal: Principal,
        name: str,
        *,
        members: Iterable[str] = (),
        groups: Any = (),
        organization_access_names: Any = (),
        owners: bool = False,
    ) -> Team:
        principal.require(Permission.TEAMS_MANAGE)
        people = _members(members)
        team = Team(
            id=self._ids.new(IdKind.TEAM),
            organization_id=principal.organization_id,
            name=team_name(name),
            members=people,
            groups=group_names(groups),
            organization_access=organization_access(organization_access_names),
            owners=valid_flag(owners, "/owners"),
            version=1,
            created_at=self._clock.now(),
            created_by=principal.ref,
        )
        self._store.create(
            team, self._event(principal, team, AuditAction.TEAM_CREATED, team_details(team))
        )
        return team

    def update(
        self,
        principal: Principal,
        team_id: str,
        *,
        name: str | None = None,
        groups: Any = None,
        organization_access_names: Any = None,
        owners: bool | None = None,
        expected_version: int | None = None,
    ) -> Team:
        """Change what is given (None: unchanged); with ``expected_version``, only while
        the team is still at it (else ``ConcurrentChange``, nothing written)."""
        principal.require(Permission.TEAMS_MANAGE)
        current = self._store.team(principal.organization_id, _team_id(team_id))
        if expected_version is not None and expected_version != current.version:
            raise ConcurrentChange(f"team {current.name} changed meanwhile; nothing was written")
        updated = replace(
            current,
            name=current.name if name is None else team_name(name),
            groups=current.groups if groups is None else group_names(groups),
            organization_access=(
                current.organization_access
                if organization_access_names is None
                else organization_access(organization_access_names)
            ),
            owners=current.owners if owners is None else valid_flag(owners, "/owners"),
            version=current.version + 1,
        )
        if updated == replace(current, version=updated.version):
            return current
        self._store.update(
            current,
            updated,
            self._event(principal, current, AuditAction.TEAM_UPDATED, team_details(updated)),
        )
        return updated

    def delete(self, principal: Principal, team_id: str) -> None:
        principal.require(Permission.TEAMS_MANAGE)
        current = self._store.team(principal.organization_id, _team_id(team_id))
        self._store.delete(current, self._event(principal, current, AuditAction.TEAM_DELETED, {}))

    def add_member(self, principal: Principal, team_id: str, user: str) -> Team:
        person = member_name(user)
        return self._change_members(
            principal, team_id, lambda held: held | {person}, AuditAction.TEAM_MEMBER_ADDED, person
        )

    def remove_member(self, principal: Principal, team_id: str, user: str) -> Team:
        person = member_name(user)

        def without(held: frozenset[str]) -> frozenset[str]:
            if person not in held:
                raise NotFound("member of team", person)
            return held - {person}

        return self._change_members(
            principal, team_id, without, AuditAction.TEAM_MEMBER_REMOVED, person
        )

    def _change_members(
        self,
        principal: Principal,
        team_id: str,
        change: Callable[[frozenset[str]], frozenset[str]],
        event_type: AuditAction,
        person: str,
    ) -> Team:
        principal.require(Permission.TEAMS_MANAGE)
        for _ in range(_ATTEMPTS):
            current = self._store.team(principal.organization_id, _team_id(team_id))
            members = change(current.members)
            if members == current.members:
                return current
            if len(members) > MAX_MEMBERS_PER_TEAM:
                raise InvalidInput(f"a team has at most {MAX_MEMBERS_PER_TEAM} members", "/user")
            updated = replace(current, members=members, version=current.version + 1)
            try:
                self._store.update(
                    current, updated, self._event(principal, current, event_type, {"user": person})
                )
            except ConcurrentChange:
                continue
            return updated
        raise ConcurrentChange("the team kept changing; nothing was written")

    def create_token(self, principal: Principal, team_id: str, name: str) -> IssuedToken:
        """A token that acts as the team (its access, read per request)."""
        principal.require(Permission.TEAMS_MANAGE)
        principal.require(Permission.TOKEN_MANAGE)
        team = self._store.team(principal.organization_id, _team_id(team_id))
        if not isinstance(name, str) or not 1 <= len(name) <= 100:
            raise InvalidInput("a token's name is 1-100 characters", "/name")
        return self._identity().issue_token(
            team.organization_id,
            name,
            (),
            created_by=principal.ref,
            team_id=team.id,
            recorded_for=principal,
            recorded_as=AuditAction.TEAM_TOKEN_CREATED,
        )

    # -- workspace access -------------------------------------------------------------------

    def set_access(
        self,
        principal: Principal,
        workspace_id: str,
        team_id: str,
        *,
        level: Any,
        capability_names: Any = (),
    ) -> TeamAccess:
        principal.require(Permission.TEAMS_MANAGE)
        given_level, given_capabilities = access_level(level), capabilities(capability_names)
        if given_level is None and not given_capabilities:
            raise InvalidInput("give a level, a capability or both", "/level")
        workspace = self._workspaces.by_id(principal, workspace_id)
        team = self._store.team(workspace.organization_id, _team_id(team_id))
        access = TeamAccess(
            team_id=team.id,
            workspace_id=workspace.id,
            level=given_level,
            capabilities=given_capabilities,
            set_at=self._clock.now(),
            set_by=principal.ref,
        )
        details = {
            "workspace_id": workspace.id,
            "level": access.level.value if access.level else "",
            "capabilities": ",".join(sorted(c.value for c in access.capabilities)),
        }
        self._store.set_access(
            workspace.organization_id,
            access,
            self._event(principal, team, AuditAction.TEAM_ACCESS_SET, details),
        )
        return access

    def remove_access(self, principal: Principal, workspace_id: str, team_id: str) -> None:
        principal.require(Permission.TEAMS_MANAGE)
        workspace = self._workspaces.by_id(principal, workspace_id)
        team = self._store.team(workspace.organization_id, _team_id(team_id))
        self._store.remove_access(
            workspace.organization_id,
            team.id,
            workspace.id,
            self._event(
                principal, team, AuditAction.TEAM_ACCESS_REMOVED, {"workspace_id": workspace.id}
            ),
        )

    def forget_workspace(self, workspace: Workspace, actor: str) -> None:
        """Remove every team's access to a deleted workspace (its deletion has committed)."""
        self._store.forget_workspace(workspace.organization_id, workspace.id)

    def _event(
        self, principal: Principal, team: Team, action: AuditAction, details: dict[str, str]
    ) -> AuditRecord:
        """The security record of a change to ``team`` (its organization is the team's,
        which is always the caller's)."""
        return AuditRecord.of(
            principal,
            action,
            "team",
            team.id,
            at=self._clock.now(),
            id=self._ids.new(IdKind.AUDIT_EVENT),
            details={"team": team.name, **details},
        )


def team_details(team: Team) -> dict[str, str]:
    return {
        "groups": ",".join(sorted(team.groups)),
        "organization_access": ",".join(sorted(team.organization_access)),
        "owners": "true" if team.owners else "false",
    }


def _team_id(team_id: str) -> str:
    # Anything else is no team's ID: not found, as another organization's.
    if not isinstance(team_id, str) or not team_id.startswith("team-") or len(team_id) > 64:
        raise NotFound("team", str(team_id)[:64])
    return team_id


def _members(members: Iterable[str]) -> frozenset[str]:
    people = list(members)
    if len(people) > MAX_MEMBERS_PER_TEAM:
        raise InvalidInput(f"a team has at most {MAX_MEMBERS_PER_TEAM} members", "/members")
    return frozenset(member_name(p, f"/members/{i}") for i, p in enumerate(people))
