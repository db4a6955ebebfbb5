"""Teams and their workspace access in the table.

Keys (one partition per organization):

| item | partition | sort |
| --- | --- | --- |
| a team | ``TEAMS#<org>`` | ``TEAM#<team id>`` |
| its name's claim | ``TEAMS#<org>`` | ``NAME#<name>`` |
| the organization's team count | ``TEAMS#<org>`` | ``TALLY`` |
| a team's access to a workspace | ``TEAMS#<org>`` | ``ACCESS#<team id>#<workspace id>`` |

A team is rewritten whole, conditioned on the version read (a concurrent change makes
the later writer lose, writing nothing). Creation and deletion move the tally in the
same transaction, conditioned on the limit. What a caller's teams grant is read per
request: one query for the teams, one per team of the caller for its access.
"""

from __future__ import annotations

from pynamodb.attributes import (
    BooleanAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)

from runplane.domain.audit import AuditRecord
from runplane.domain.errors import ConcurrentChange, InvalidInput, NotFound
from runplane.domain.teams import (
    MAX_TEAMS_PER_ORGANIZATION,
    AccessLevel,
    Capability,
    Team,
    TeamAccess,
    TeamNameTaken,
)
from runplane.store.models import NameClaimItem, TableItem
from runplane.store.security_records import security_record
from runplane.store.transaction import Item, Transaction

TEAM_PREFIX = "TEAM#"
ACCESS_PREFIX = "ACCESS#"


def partition(org_id: str) -> str:
    return f"TEAMS#{org_id}"


def team_key(org_id: str, team_id: str) -> tuple[str, str]:
    return partition(org_id), f"{TEAM_PREFIX}{team_id}"


def name_key(org_id: str, name: str) -> tuple[str, str]:
    return partition(org_id), f"NAME#{name}"


def tally_key(org_id: str) -> tuple[str, str]:
    return partition(org_id), "TALLY"


def access_key(org_id: str, team_id: str, workspace_id: str) -> tuple[str, str]:
    return partition(org_id), f"{ACCESS_PREFIX}{team_id}#{workspace_id}"


class TeamItem(TableItem):
    team_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    members: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    groups: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    organization_access: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    owners = BooleanAttribute()
    version = NumberAttribute()
    created_at = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()


class TeamTallyItem(TableItem):
    teams = NumberAttribute()


class TeamAccessItem(TableItem):
    team_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    level = UnicodeAttribute(null=True)
    capabilities: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    set_at = UTCDateTimeAttribute()
    set_by = UnicodeAttribute()


# -- mapping -------------------------------------------------------------------------------


def _team(item: TeamItem) -> Team:
    return Team(
        id=item.team_id,
        organization_id=item.org_id,
        name=item.name,
        members=frozenset(item.members or ()),
        groups=frozenset(item.groups or ()),
        organization_access=frozenset(item.organization_access or ()),
        owners=bool(item.owners),
        version=int(item.version),
        created_at=item.created_at,
        created_by=item.created_by,
    )


def _team_item(team: Team) -> TeamItem:
    return TeamItem(
        *team_key(team.organization_id, team.id),
        team_id=team.id,
        org_id=team.organization_id,
        name=team.name,
        members=sorted(team.members),
        groups=sorted(team.groups),
        organization_access=sorted(team.organization_access),
        owners=team.owners,
        version=team.version,
        created_at=team.created_at,
        created_by=team.created_by,
    )


def _access(item: TeamAccessItem) -> TeamAccess:
    return TeamAccess(
        team_id=item.team_id,
        workspace_id=item.workspace_id,
        level=AccessLevel(item.level) if item.level else None,
        capabilities=frozenset(Capability(c) for c in item.capabilities or ()),
        set_at=item.set_at,
        set_by=item.set_by,
    )


def _access_item(org_id: str, access: TeamAccess) -> TeamAccessItem:
    return TeamAccessItem(
        *access_key(org_id, access.team_id, access.workspace_id),
        team_id=access.team_id,
        workspace_id=access.workspace_id,
        level=access.level.value if access.level else None,
        capabilities=sorted(c.value for c in access.capabilities),
        set_at=access.set_at,
        set_by=access.set_by,
    )


# -- reads ----------------------------------------------------------------------------------


def teams(org_id: str) -> list[Team]:
    items = TeamItem.query(
        partition(org_id), TeamItem.sk.startswith(TEAM_PREFIX), consistent_read=True
    )
    return sorted((_team(item) for item in items), key=lambda t: t.name)


def team(org_id: str, team_id: str) -> Team:
    try:
        return _team(TeamItem.get(*team_key(org_id, team_id), consistent_read=True))
    except TeamItem.DoesNotExist:
        raise NotFound("team", team_id) from None


def access_of(org_id: str, team_id: str) -> list[TeamAccess]:
    items = TeamAccessItem.query(
        partition(org_id),
        TeamAccessItem.sk.startswith(f"{ACCESS_PREFIX}{team_id}#"),
        consistent_read=True,
    )
    return [_access(item) for item in items]


def access_to(org_id: str, team_ids: list[str], workspace_id: str) -> list[TeamAccess]:
    """The access each of ``team_ids`` has to the workspace (one batch read)."""
    if not team_ids:
        return []
    keys = [access_key(org_id, t, workspace_id) for t in team_ids]
    found = [_access(item) for item in TeamAccessItem.batch_get(keys, consistent_read=True)]
    return sorted(found, key=lambda a: a.team_id)


# -- writes ---------------------------------------------------------------------------------


def _stale(team: Team) -> Exception:
    return ConcurrentChange(f"team {team.name} changed meanwhile; nothing was written")


def _gone_or_stale(team: Team, current: Item | None) -> Exception:
    return NotFound("team", team.id) if current is None else _stale(team)


def create(team: Team, event: AuditRecord) -> Transaction:
    org = team.organization_id
    tally = TeamTallyItem(*tally_key(org))

    def too_many(current: Item | None) -> Exception:
        return InvalidInput(
            f"an organization has at most {MAX_TEAMS_PER_ORGANIZATION} teams", "/name"
        )

    return (
        Transaction()
        .put_new(_team_item(team))
        .put_new(
            NameClaimItem(*name_key(org, team.name), owner_id=team.id),
            on_refused=lambda current: TeamNameTaken(team.name),
        )
        .update(
            tally,
            [TeamTallyItem.teams.add(1)],
            condition=TeamTallyItem.pk.does_not_exist()
            | (TeamTallyItem.teams < MAX_TEAMS_PER_ORGANIZATION),
            on_refused=too_many,
        )
        .extend([security_record(event)])
    )


def update(current: Team, updated: Team, event: AuditRecord) -> Transaction:
    """``updated`` (its version one past ``current``'s) in place of ``current``, if the
    team is still at that version; a new name claims it and frees the old one."""
    org = current.organization_id
    write = Transaction().put(
        _team_item(updated),
        condition=TeamItem.version == current.version,
        on_refused=lambda held: _gone_or_stale(current, held),
    )
    if updated.name != current.name:
        write.put_new(
            NameClaimItem(*name_key(org, updated.name), owner_id=current.id),
            on_refused=lambda held: TeamNameTaken(updated.name),
        ).delete(NameClaimItem(*name_key(org, current.name)))
    return write.extend([security_record(event)])


def delete(current: Team, event: AuditRecord) -> Transaction:
    org = current.organization_id
    return (
        Transaction()
        .delete(
            TeamItem(*team_key(org, current.id)),
            condition=TeamItem.version == current.version,
            on_refused=lambda held: _gone_or_stale(current, held),
        )
        .delete(NameClaimItem(*name_key(org, current.name)))
        .update(TeamTallyItem(*tally_key(org)), [TeamTallyItem.teams.add(-1)])
        .extend([security_record(event)])
    )


def set_access(org_id: str, access: TeamAccess, event: AuditRecord) -> Transaction:
    """The team's access to the workspace, replacing what it had, while the team exists."""
    return (
        Transaction()
        .check(
            TeamItem,
            team_key(org_id, access.team_id),
            TeamItem.pk.exists(),
            on_refused=lambda held: NotFound("team", access.team_id),
        )
        .put(_access_item(org_id, access))
        .extend([security_record(event)])
    )


def remove_access(org_id: str, team_id: str, workspace_id: str, event: AuditRecord) -> Transaction:
    return (
        Transaction()
        .delete(
            TeamAccessItem(*access_key(org_id, team_id, workspace_id)),
            condition=TeamAccessItem.pk.exists(),
            on_refused=lambda held: NotFound("team access to workspace", workspace_id),
        )
        .extend([security_record(event)])
    )


def forget_access(org_id: str, team_id: str) -> None:
    """Delete a deleted team's access items (nothing reads them once the team is gone)."""
    for access in access_of(org_id, team_id):
        TeamAccessItem(*access_key(org_id, team_id, access.workspace_id)).delete()


def forget_workspace(org_id: str, workspace_id: str) -> None:
    """Delete every team's access to a deleted workspace."""
    for found in teams(org_id):
        TeamAccessItem(*access_key(org_id, found.id, workspace_id)).delete()


class DynamoTeams:
    """``TeamStore`` on the table (services/repositories/access.py)."""

    def teams(self, org_id: str) -> list[Team]:
        return teams(org_id)

    def team(self, org_id: str, team_id: str) -> Team:
        return team(org_id, team_id)

    def access_of(self, org_id: str, team_id: str) -> list[TeamAccess]:
        return access_of(org_id, team_id)

    def access_to(self, org_id: str, team_ids: list[str], workspace_id: str) -> list[TeamAccess]:
        return access_to(org_id, team_ids, workspace_id)

    def create(self, team: Team, event: AuditRecord) -> None:
        create(team, event).commit()

    def update(self, current: Team, updated: Team, event: AuditRecord) -> None:
        update(current, updated, event).commit()

    def delete(self, current: Team, event: AuditRecord) -> None:
        delete(current, event).commit()
        forget_access(current.organization_id, current.id)

    def set_access(self, org_id: str, access: TeamAccess, event: AuditRecord) -> None:
        set_access(org_id, access, event).commit()

    def remove_access(
        self, org_id: str, team_id: str, workspace_id: str, event: AuditRecord
    ) -> None:
        remove_access(org_id, team_id, workspace_id, event).commit()

    def forget_workspace(self, org_id: str, workspace_id: str) -> None:
        forget_workspace(org_id, workspace_id)
