"""Teams and their workspace access (docs/teams.md): create, list, show, change and
delete teams, their members and tokens; set and remove a team's access to a workspace.
Handlers parse, call one service, map the result."""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field, StrictBool, StrictInt, StrictStr

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.teams import Team, TeamAccess
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class TeamCreate(BaseModel):
    # The name and member rules are the service's (422 with a pointer).
    name: StrictStr = Field(min_length=1, max_length=64)
    members: list[StrictStr] = Field(default_factory=list, max_length=500)
    groups: list[StrictStr] = Field(
        default_factory=list,
        description="Identity-provider groups whose members belong to the team",
    )
    organization_access: list[StrictStr] = Field(
        default_factory=list,
        description="manage-workspaces, manage-policies, manage-variable-sets, manage-vcs, "
        "read-workspaces",
    )
    owners: StrictBool = Field(
        default=False, description="Organization owners: every permission of the admin role"
    )


class TeamChange(BaseModel):
    """Only the fields given change (``groups`` and ``organization_access`` whole)."""

    name: StrictStr | None = Field(default=None, min_length=1, max_length=64)
    groups: list[StrictStr] | None = None
    organization_access: list[StrictStr] | None = None
    owners: StrictBool | None = None
    expected_version: StrictInt | None = Field(
        default=None, description="Refuse (409) unless the team is still at this version"
    )


class AccessBody(BaseModel):
    level: Literal["read", "plan", "write", "admin"] | None = None
    capabilities: list[StrictStr] = Field(
        default_factory=list,
        description="approve, override-policy, recover, manage-variables, manage-credentials",
    )


class TokenBody(BaseModel):
    name: StrictStr = Field(min_length=1, max_length=100)


class TeamView(oas.Doc):
    id: str
    name: str
    members: list[str] = Field(description="People named by hand, by user name")
    groups: list[str]
    organization_access: list[str]
    owners: bool
    version: int
    created_at: str
    created_by: str


class TeamList(oas.Doc):
    teams: list[TeamView]


class TeamDeleted(oas.Doc):
    id: str
    deleted: Literal[True]


class AccessView(oas.Doc):
    team_id: str
    workspace_id: str
    level: str | None
    capabilities: list[str]
    permissions: list[str] = Field(description="What the level and capabilities grant")
    set_at: str
    set_by: str


class AccessList(oas.Doc):
    access: list[AccessView]


class AccessRemoved(oas.Doc):
    team_id: str
    workspace_id: str
    removed: Literal[True]


class TeamTokenCreated(oas.Doc):
    id: str
    name: str
    team_id: str
    token: str = Field(description="Shown once: store it now")


def _team(found: Team) -> TeamView:
    return TeamView.model_validate(found.view())


def _access(found: TeamAccess) -> AccessView:
    return AccessView.model_validate(found.view())


@router.post(
    "/api/v1/teams",
    responses=oas.responses(201, TeamView, *oas.WRITE),
    security=oas.PEOPLE,
)
def create_team(body: TeamCreate) -> Reply:
    created = services().teams.create(
        principal(),
        body.name,
        members=body.members,
        groups=body.groups,
        organization_access_names=body.organization_access,
        owners=body.owners,
    )
    return json_reply(201, _team(created))


@router.get(
    "/api/v1/teams",
    responses=oas.responses(200, TeamList, *oas.READ),
    security=oas.PEOPLE,
)
def list_teams() -> Reply:
    return json_reply(200, TeamList(teams=[_team(t) for t in services().teams.all(principal())]))


@router.get(
    "/api/v1/teams/<team_id>",
    responses=oas.responses(200, TeamView, *oas.READ),
    security=oas.PEOPLE,
)
def show_team(team_id: str) -> Reply:
    return json_reply(200, _team(services().teams.get(principal(), team_id)))


@router.patch(
    "/api/v1/teams/<team_id>",
    responses=oas.responses(200, TeamView, *oas.WRITE),
    security=oas.PEOPLE,
)
def change_team(team_id: str, body: TeamChange) -> Reply:
    updated = services().teams.update(
        principal(),
        team_id,
        name=body.name,
        groups=body.groups,
        organization_access_names=body.organization_access,
        owners=body.owners,
        expected_version=body.expected_version,
    )
    return json_reply(200, _team(updated))


@router.delete(
    "/api/v1/teams/<team_id>",
    responses=oas.responses(200, TeamDeleted, *oas.WRITE),
    security=oas.PEOPLE,
)
def delete_team(team_id: str) -> Reply:
    services().teams.delete(principal(), team_id)
    return json_reply(200, TeamDeleted(id=team_id, deleted=True))


@router.put(
    "/api/v1/teams/<team_id>/members/<user>",
    responses=oas.responses(200, TeamView, *oas.WRITE),
    security=oas.PEOPLE,
)
def add_member(team_id: str, user: str) -> Reply:
    return json_reply(200, _team(services().teams.add_member(principal(), team_id, user)))


@router.delete(
    "/api/v1/teams/<team_id>/members/<user>",
    responses=oas.responses(200, TeamView, *oas.WRITE),
    security=oas.PEOPLE,
)
def remove_member(team_id: str, user: str) -> Reply:
    return json_reply(200, _team(services().teams.remove_member(principal(), team_id, user)))


@router.post(
    "/api/v1/teams/<team_id>/tokens",
    responses=oas.responses(201, TeamTokenCreated, *oas.WRITE),
    security=oas.PEOPLE,
)
def create_team_token(team_id: str, body: TokenBody) -> Reply:
    issued = services().teams.create_token(principal(), team_id, body.name)
    created = TeamTokenCreated(
        id=issued.record.id, name=issued.record.name, team_id=team_id, token=issued.token
    )
    return json_reply(201, created)


@router.get(
    "/api/v1/teams/<team_id>/access",
    responses=oas.responses(200, AccessList, *oas.READ),
    security=oas.PEOPLE,
)
def team_access(team_id: str) -> Reply:
    found = services().teams.access_of(principal(), team_id)
    return json_reply(200, AccessList(access=[_access(a) for a in found]))


@router.get(
    "/api/v1/workspaces/<workspace_id>/team-access",
    responses=oas.responses(200, AccessList, *oas.READ),
    security=oas.PEOPLE,
)
def workspace_access(workspace_id: str) -> Reply:
    found = services().teams.workspace_access(principal(), workspace_id)
    return json_reply(200, AccessList(access=[_access(a) for a in found]))


@router.put(
    "/api/v1/workspaces/<workspace_id>/team-access/<team_id>",
    responses=oas.responses(200, AccessView, *oas.WRITE),
    security=oas.PEOPLE,
)
def set_access(workspace_id: str, team_id: str, body: AccessBody) -> Reply:
    access = services().teams.set_access(
        principal(), workspace_id, team_id, level=body.level, capability_names=body.capabilities
    )
    return json_reply(200, _access(access))


@router.delete(
    "/api/v1/workspaces/<workspace_id>/team-access/<team_id>",
    responses=oas.responses(200, AccessRemoved, *oas.WRITE),
    security=oas.PEOPLE,
)
def remove_access(workspace_id: str, team_id: str) -> Reply:
    services().teams.remove_access(principal(), workspace_id, team_id)
    return json_reply(200, AccessRemoved(team_id=team_id, workspace_id=workspace_id, removed=True))
