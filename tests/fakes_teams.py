"""An in-memory ``TeamStore`` (services/repositories/access.py), held to the same cases as
the table's by tests/integration/test_team_store_contract.py."""

from __future__ import annotations

from runplane.domain.audit import AuditRecord
from runplane.domain.errors import ConcurrentChange, InvalidInput, NotFound
from runplane.domain.teams import MAX_TEAMS_PER_ORGANIZATION, Team, TeamAccess, TeamNameTaken


class InMemoryTeams:
    def __init__(self) -> None:
        self.by_id: dict[tuple[str, str], Team] = {}
        self.access: dict[tuple[str, str, str], TeamAccess] = {}
        self.events: list[AuditRecord] = []
        # Reads made, to count what a request costs.
        self.reads = 0

    def teams(self, org_id: str) -> list[Team]:
        self.reads += 1
        return sorted((t for (o, _), t in self.by_id.items() if o == org_id), key=lambda t: t.name)

    def team(self, org_id: str, team_id: str) -> Team:
        found = self.by_id.get((org_id, team_id))
        if found is None:
            raise NotFound("team", team_id)
        return found

    def access_of(self, org_id: str, team_id: str) -> list[TeamAccess]:
        self.reads += 1
        return [a for (o, t, _), a in self.access.items() if (o, t) == (org_id, team_id)]

    def access_to(self, org_id: str, team_ids: list[str], workspace_id: str) -> list[TeamAccess]:
        found = [self.access.get((org_id, t, workspace_id)) for t in team_ids]
        return sorted((a for a in found if a is not None), key=lambda a: a.team_id)

    def create(self, team: Team, event: AuditRecord) -> None:
        org = team.organization_id
        if any(t.name == team.name for t in self.teams(org)):
            raise TeamNameTaken(team.name)
        if len(self.teams(org)) >= MAX_TEAMS_PER_ORGANIZATION:
            raise InvalidInput(f"an organization has at most {MAX_TEAMS_PER_ORGANIZATION} teams")
        self.by_id[(org, team.id)] = team
        self.events.append(event)

    def update(self, current: Team, updated: Team, event: AuditRecord) -> None:
        key = (current.organization_id, current.id)
        held = self.by_id.get(key)
        if held is None:
            raise NotFound("team", current.id)
        if held.version != current.version:
            raise ConcurrentChange(f"team {current.name} changed meanwhile")
        if updated.name != current.name and any(
            t.name == updated.name for t in self.teams(current.organization_id)
        ):
            raise TeamNameTaken(updated.name)
        self.by_id[key] = updated
        self.events.append(event)

    def delete(self, current: Team, event: AuditRecord) -> None:
        key = (current.organization_id, current.id)
        held = self.by_id.get(key)
        if held is None:
            raise NotFound("team", current.id)
        if held.version != current.version:
            raise ConcurrentChange(f"team {current.name} changed meanwhile")
        del self.by_id[key]
        self.events.append(event)
        for access_key in [k for k in self.access if k[:2] == key]:
            del self.access[access_key]

    def set_access(self, org_id: str, access: TeamAccess, event: AuditRecord) -> None:
        if (org_id, access.team_id) not in self.by_id:
            raise NotFound("team", access.team_id)
        self.access[(org_id, access.team_id, access.workspace_id)] = access
        self.events.append(event)

    def remove_access(
        self, org_id: str, team_id: str, workspace_id: str, event: AuditRecord
    ) -> None:
        if self.access.pop((org_id, team_id, workspace_id), None) is None:
            raise NotFound("team access to workspace", workspace_id)
        self.events.append(event)

    def forget_workspace(self, org_id: str, workspace_id: str) -> None:
        for key in [k for k in self.access if (k[0], k[2]) == (org_id, workspace_id)]:
            del self.access[key]
