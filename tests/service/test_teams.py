"""Teams and workspace permissions (``services/teams.py``) over the service tier's fakes:
what a member may see and do through their teams, read per request; who may change
teams; refusals writing nothing; two organizations; separation of duties. Over HTTP,
with the real API, Cloud API, dashboard and CLI: tests/e2e/test_teams.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import (
    ConcurrentChange,
    InvalidInput,
    NotFound,
    SeparationOfDuties,
)
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.parts import RunPart
from runplane.domain.teams import TeamNameTaken
from runplane.services.identity import Identity
from runplane.services.teams import Teams, with_teams
from tests.fakes_access import InMemoryApiTokens
from tests.fakes_teams import InMemoryTeams
from tests.service.conftest import Tier
from tests.service.scenarios import awaiting_approval

PLAN = {"plan_sha256": "sha256:p"}


class Scene:
    def __init__(self, tier: Tier) -> None:
        self.tier = tier
        self.store = InMemoryTeams()
        self.tokens = InMemoryApiTokens()
        self.identity = Identity(
            tier.clock,
            tier.ids,
            self.tokens,
            _never,  # type: ignore[arg-type]
            _never,  # type: ignore[arg-type]
        )
        self.teams = Teams(tier.clock, tier.ids, self.store, tier.workspaces, lambda: self.identity)

    def org(self, name: str) -> tuple[Organization, Principal]:
        org = self.tier.tenancy.create_organization(name)
        return org, self.tier.admin(org)

    def person(
        self,
        org: Organization,
        user: str,
        *,
        groups: tuple[str, ...] = (),
        roles: frozenset[Permission] = frozenset(),
    ) -> Principal:
        """``user`` as one request sees them: their teams read afresh."""
        return with_teams(
            self.store,
            Principal(
                kind=PrincipalKind.USER,
                id=user,
                organization_id=org.id,
                permissions=roles,
                display=user,
                user=user,
                groups=groups,
            ),
        )


def _never() -> object:
    raise AssertionError("not used by team tokens")


@pytest.fixture
def scene(tier: Tier) -> Scene:
    return Scene(tier)


def _workspaces(scene: Scene, admin: Principal, org: Organization, *names: str) -> list[Workspace]:
    return [scene.tier.workspaces.create(admin, org.name, n) for n in names]


def test_a_member_sees_only_the_workspaces_their_teams_grant(scene: Scene) -> None:
    # Given acme's workspaces net and app, and a team of bea's with read on net
    org, admin = scene.org("acme")
    net, app = _workspaces(scene, admin, org, "net", "app")
    team = scene.teams.create(admin, "net-readers", members=["bea"])
    scene.teams.set_access(admin, net.id, team.id, level="read")
    bea = scene.person(org, "bea")
    # When bea lists and reads workspaces
    # Then she sees net only, and app is not found (as another organization's)
    assert [w.name for w in scene.tier.workspaces.list_own(bea)] == ["net"]
    assert scene.tier.workspaces.by_id(bea, net.id).id == net.id
    with pytest.raises(NotFound):
        scene.tier.workspaces.by_id(bea, app.id)
    # And reading does not let her change: variables and settings are refused
    with pytest.raises(Forbidden):
        scene.tier.variables.set(bea, net.id, "region", "eu-west-1")
    with pytest.raises(Forbidden):
        scene.tier.workspaces.update(bea, net, description="x")
    assert scene.tier.variable_store.variables.get(net.id, {}) == {}


def test_each_level_grants_what_it_names_and_capabilities_add_to_it(scene: Scene) -> None:
    # Given a workspace and a team of bea's at each level in turn
    org, admin = scene.org("acme")
    (net,) = _workspaces(scene, admin, org, "net")
    team = scene.teams.create(admin, "ops", members=["bea"])
    expected = {
        "read": {Permission.RUN_READ, Permission.STATE_READ},
        "plan": {Permission.RUN_PLAN},
        "write": {Permission.RUN_CREATE, Permission.RUN_APPROVE, Permission.VARIABLES_MANAGE},
        "admin": {Permission.WORKSPACE_UPDATE, Permission.WORKSPACE_DELETE},
    }
    never = {Permission.POLICY_OVERRIDE, Permission.RUN_RECOVER, Permission.CREDENTIALS_MANAGE}
    held: set[Permission] = set()
    for level, adds in expected.items():
        # When the team is set to that level
        scene.teams.set_access(admin, net.id, team.id, level=level)
        granted = scene.person(org, "bea").permissions_in(net.id)
        # Then bea holds the level's permissions and every lower one's, never a capability
        held |= adds
        assert held <= granted, level
        assert not never & granted, level
    # And a capability adds exactly its permissions to a level
    scene.teams.set_access(admin, net.id, team.id, level="read", capability_names=["recover"])
    granted = scene.person(org, "bea").permissions_in(net.id)
    assert {Permission.RUN_RECOVER, Permission.STATE_RECOVER} <= granted
    assert Permission.RUN_CREATE not in granted


def test_a_membership_change_applies_to_the_next_request(scene: Scene) -> None:
    # Given a team with write on net, and bea not in it
    org, admin = scene.org("acme")
    (net,) = _workspaces(scene, admin, org, "net")
    team = scene.teams.create(admin, "ops")
    scene.teams.set_access(admin, net.id, team.id, level="write")
    assert not scene.person(org, "bea").may(Permission.RUN_CREATE, net.id)
    # When she is added, her next request may create runs; when removed, it may not
    scene.teams.add_member(admin, team.id, "bea")
    assert scene.person(org, "bea").may(Permission.RUN_CREATE, net.id)
    scene.teams.remove_member(admin, team.id, "bea")
    assert not scene.person(org, "bea").may(Permission.RUN_CREATE, net.id)
    # And removing someone who is not a member is not found, writing nothing
    events = len(scene.store.events)
    with pytest.raises(NotFound):
        scene.teams.remove_member(admin, team.id, "bea")
    assert len(scene.store.events) == events


def test_identity_provider_groups_map_people_into_teams(scene: Scene) -> None:
    # Given a team mapped from the identity provider's group "platform"
    org, admin = scene.org("acme")
    (net,) = _workspaces(scene, admin, org, "net")
    team = scene.teams.create(admin, "platform", groups=["platform"])
    scene.teams.set_access(admin, net.id, team.id, level="admin")
    # Then someone in that group holds the access, someone else nothing
    assert scene.person(org, "cy", groups=("platform",)).may(Permission.WORKSPACE_UPDATE, net.id)
    assert not scene.person(org, "cy", groups=("finance",)).may(Permission.WORKSPACE_READ, net.id)


def test_an_owners_team_holds_every_organization_permission(scene: Scene) -> None:
    org, admin = scene.org("acme")
    (net,) = _workspaces(scene, admin, org, "net")
    scene.teams.create(admin, "owners", members=["dee"], owners=True)
    dee = scene.person(org, "dee")
    assert dee.may(Permission.TEAMS_MANAGE)
    assert dee.may(Permission.RUN_RECOVER, net.id)
    assert not dee.may(Permission.PLATFORM_OPERATE)


def test_a_team_token_acts_as_its_team_read_per_request(scene: Scene) -> None:
    # Given a team with plan on net and a token issued for it
    org, admin = scene.org("acme")
    net, app = _workspaces(scene, admin, org, "net", "app")
    team = scene.teams.create(admin, "ci")
    scene.teams.set_access(admin, net.id, team.id, level="plan")
    issued = scene.teams.create_token(admin, team.id, "pipeline")
    # When the token authenticates
    caller = with_teams(scene.store, scene.identity.authenticate(f"Bearer {issued.token}"))
    # Then it plans on net, may not apply there, and does not see app
    assert caller.team_id == team.id
    assert caller.may(Permission.RUN_PLAN, net.id)
    assert not caller.may(Permission.RUN_CREATE, net.id)
    assert not caller.can_see_workspace(org.id, app.id)
    # And once the team loses the access, the same token's next request has none
    scene.teams.remove_access(admin, net.id, team.id)
    again = with_teams(scene.store, scene.identity.authenticate(f"Bearer {issued.token}"))
    assert not again.can_see_workspace(org.id, net.id)


def test_only_team_managers_change_teams_and_a_refusal_writes_nothing(scene: Scene) -> None:
    # Given acme with a team, and bea, an operator-level person without teams:manage
    org, admin = scene.org("acme")
    (net,) = _workspaces(scene, admin, org, "net")
    team = scene.teams.create(admin, "ops", members=["bea"])
    scene.teams.set_access(admin, net.id, team.id, level="admin")
    bea = scene.person(org, "bea")
    before = (dict(scene.store.by_id), dict(scene.store.access), len(scene.store.events))
    # When she (a workspace admin) tries to change teams or grant herself a capability
    # Then each is refused and nothing is written
    for attempt in (
        lambda: scene.teams.create(bea, "mine"),
        lambda: scene.teams.add_member(bea, team.id, "eve"),
        lambda: scene.teams.set_access(
            bea, net.id, team.id, level="admin", capability_names=["override-policy"]
        ),
        lambda: scene.teams.create_token(bea, team.id, "t"),
        lambda: scene.teams.delete(bea, team.id),
    ):
        with pytest.raises(Forbidden):
            attempt()
    assert (dict(scene.store.by_id), dict(scene.store.access), len(scene.store.events)) == before
    assert scene.tokens.tokens == {}


def test_invalid_or_taken_names_are_refused_writing_nothing(scene: Scene) -> None:
    _, admin = scene.org("acme")
    scene.teams.create(admin, "ops")
    for name, error in (("ops", TeamNameTaken), ("Ops!", InvalidInput), ("", InvalidInput)):
        with pytest.raises(error):
            scene.teams.create(admin, name)
    for bad in ({"groups": "x"}, {"organization_access_names": ["root"]}, {"members": ["a b"]}):
        with pytest.raises(InvalidInput):
            scene.teams.create(admin, "other", **bad)
    with pytest.raises(InvalidInput):
        scene.teams.set_access(admin, "ws-x", "team-x", level="superuser")
    assert [t.name for t in scene.teams.all(admin)] == ["ops"]
    assert len(scene.store.events) == 1


def test_a_stale_update_is_refused(scene: Scene) -> None:
    _, admin = scene.org("acme")
    team = scene.teams.create(admin, "ops")
    scene.teams.update(admin, team.id, groups=["g1"], expected_version=1)
    with pytest.raises(ConcurrentChange):
        scene.teams.update(admin, team.id, groups=["g2"], expected_version=1)
    assert scene.teams.get(admin, team.id).groups == frozenset({"g1"})


def test_two_organizations_never_reach_each_others_teams_or_workspaces(scene: Scene) -> None:
    # Given acme and globex, each with a team and a workspace
    acme, acme_admin = scene.org("acme")
    globex, globex_admin = scene.org("globex")
    (acme_ws,) = _workspaces(scene, acme_admin, acme, "net")
    (globex_ws,) = _workspaces(scene, globex_admin, globex, "net")
    acme_team = scene.teams.create(acme_admin, "ops", members=["bea"])
    globex_team = scene.teams.create(globex_admin, "ops", members=["bea"])
    scene.teams.set_access(globex_admin, globex_ws.id, globex_team.id, level="admin")
    # When acme's admin reaches for globex's team or workspace, it is not found
    with pytest.raises(NotFound):
        scene.teams.get(acme_admin, globex_team.id)
    with pytest.raises(NotFound):
        scene.teams.set_access(acme_admin, globex_ws.id, acme_team.id, level="read")
    with pytest.raises(NotFound):
        scene.teams.set_access(acme_admin, acme_ws.id, globex_team.id, level="read")
    # And bea of acme, though a member of globex's "ops" too, holds nothing in acme
    bea = scene.person(acme, "bea")
    with pytest.raises(Forbidden):
        scene.tier.workspaces.list_own(bea)
    assert [t.id for t in scene.teams.all(acme_admin)] == [acme_team.id]


def test_separation_of_duties_refuses_the_creators_approval_only(scene: Scene) -> None:
    # Given a run created by ada, awaiting approval under separation of duties
    run = awaiting_approval(scene.tier, binding=PLAN)
    approval = scene.tier.run_reader.parts(run.id)["approval"]
    separated = {**approval.body, "separation_of_duties": True}
    scene.tier.run_reader.set_part(
        RunPart(
            run.id,
            "approval",
            approval.state,
            separated,
            approval.token,
            approval.created_at,
            approval.updated_at,
        )
    )
    everything = frozenset(Permission)
    ada = Principal(PrincipalKind.USER, "ada", "org-acme", everything, "ada", user="ada")
    # When ada approves her own run, it is refused and nothing is written
    saved = scene.tier.run_reader.saved()
    with pytest.raises(SeparationOfDuties):
        scene.tier.runs.decide(ada, run.id, "approve", None, PLAN)
    assert scene.tier.run_reader.saved() == saved
    # And bob's approval is recorded
    bob = replace(ada, id="bob", user="bob", display="bob")
    decided = scene.tier.runs.decide(bob, run.id, "approve", None, PLAN)
    assert decided.decision == "approve"
