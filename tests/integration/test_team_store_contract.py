"""The team store's contract: the same cases against the table (on moto) and the
in-memory fake the service tier uses, so the fake cannot drift."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from runplane.domain.audit import AuditAction, AuditOutcome, AuditQuery, AuditRecord
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.teams import AccessLevel, Capability, Team, TeamAccess, TeamNameTaken
from runplane.services.repositories.access import TeamStore
from runplane.store.security_records import trail_page
from runplane.store.teams import DynamoTeams
from tests.fakes_teams import InMemoryTeams

AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["dynamodb", "memory"])
def store(request: pytest.FixtureRequest) -> TeamStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoTeams()
    return InMemoryTeams()


def _team(team_id: str = "team-1", name: str = "ops", org: str = "org-acme") -> Team:
    return Team(
        id=team_id,
        organization_id=org,
        name=name,
        members=frozenset({"bea"}),
        groups=frozenset({"platform"}),
        organization_access=frozenset({"manage-policies"}),
        owners=False,
        version=1,
        created_at=AT,
        created_by="user:ada",
    )


_events = iter(range(1_000_000))


def _event(
    org: str = "org-acme", action: AuditAction = AuditAction.TEAM_CREATED, team_id: str = "team-1"
) -> AuditRecord:
    return AuditRecord(
        id=f"evt-{next(_events)}",
        organization_id=org,
        at=AT,
        action=action,
        actor="user:ada",
        actor_display="ada",
        source_address="127.0.0.1",
        object_kind="team",
        object_id=team_id,
        outcome=AuditOutcome.SUCCEEDED,
    )


def _access(team_id: str, workspace_id: str, level: AccessLevel | None) -> TeamAccess:
    return TeamAccess(team_id, workspace_id, level, frozenset({Capability.APPROVE}), AT, "user:ada")


def test_a_team_reads_back_whole_and_its_name_is_unique(store: TeamStore) -> None:
    # Given a team
    store.create(_team(), _event())
    # Then it reads back whole, listed with its organization's only
    assert store.team("org-acme", "team-1") == _team()
    assert store.teams("org-acme") == [_team()]
    assert store.teams("org-globex") == []
    with pytest.raises(NotFound):
        store.team("org-globex", "team-1")
    # And another team of that name is refused, writing nothing
    with pytest.raises(TeamNameTaken):
        store.create(_team("team-2"), _event())
    assert store.teams("org-acme") == [_team()]
    # But another organization may use the name
    store.create(_team("team-3", org="org-globex"), _event("org-globex"))
    assert [t.id for t in store.teams("org-globex")] == ["team-3"]


def test_an_update_wins_only_at_the_version_it_read(store: TeamStore) -> None:
    # Given a team at version 1
    store.create(_team(), _event())
    renamed = replace(_team(), name="platform", version=2)
    # When it is renamed at version 1, a second change from version 1 loses
    store.update(_team(), renamed, _event(action=AuditAction.TEAM_UPDATED))
    with pytest.raises(ConcurrentChange):
        store.update(_team(), replace(_team(), owners=True, version=2), _event())
    assert store.team("org-acme", "team-1") == renamed
    # And the old name is free again, the new one taken
    store.create(_team("team-2", "ops"), _event())
    with pytest.raises(TeamNameTaken):
        store.create(_team("team-4", "platform"), _event())


def test_access_is_set_replaced_and_removed_while_the_team_exists(store: TeamStore) -> None:
    # Given a team with read on ws-1 then write
    store.create(_team(), _event())
    store.set_access("org-acme", _access("team-1", "ws-1", AccessLevel.READ), _event())
    store.set_access("org-acme", _access("team-1", "ws-1", AccessLevel.WRITE), _event())
    store.set_access("org-acme", _access("team-1", "ws-2", None), _event())
    # Then the latest grant per workspace reads back, by team and by workspace
    assert {a.workspace_id: a.level for a in store.access_of("org-acme", "team-1")} == {
        "ws-1": AccessLevel.WRITE,
        "ws-2": None,
    }
    assert store.access_to("org-acme", ["team-1", "team-9"], "ws-1") == [
        _access("team-1", "ws-1", AccessLevel.WRITE)
    ]
    # And a grant for a team that does not exist is refused
    with pytest.raises(NotFound):
        store.set_access("org-acme", _access("team-9", "ws-1", AccessLevel.READ), _event())
    assert store.access_of("org-acme", "team-9") == []
    # And removing one twice is not found the second time
    store.remove_access("org-acme", "team-1", "ws-2", _event())
    with pytest.raises(NotFound):
        store.remove_access("org-acme", "team-1", "ws-2", _event())
    # And a deleted workspace's grants go
    store.forget_workspace("org-acme", "ws-1")
    assert store.access_of("org-acme", "team-1") == []


def test_a_deleted_team_takes_its_access_and_frees_its_name(store: TeamStore) -> None:
    store.create(_team(), _event())
    store.set_access("org-acme", _access("team-1", "ws-1", AccessLevel.READ), _event())
    store.delete(_team(), _event(action=AuditAction.TEAM_DELETED))
    assert store.teams("org-acme") == []
    assert store.access_of("org-acme", "team-1") == []
    with pytest.raises(NotFound):
        store.delete(_team(), _event())
    store.create(_team("team-2"), _event())


def test_the_table_writes_each_change_with_its_audit_event(stack: object) -> None:
    # Given the table's store
    teams = DynamoTeams()
    # When a team is created and a refused creation is tried
    teams.create(_team(), _event())
    with pytest.raises(TeamNameTaken):
        teams.create(_team("team-2"), _event(team_id="team-2"))
    # Then exactly the committed change's event is in the organization's trail
    trail = trail_page("org-acme", AuditQuery()).records
    assert [(r.action, r.object_id) for r in trail] == [(AuditAction.TEAM_CREATED, "team-1")]
