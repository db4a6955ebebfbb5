"""Teams and workspace permissions on the embedded stack over real HTTP: managed with the
CLI, enforced for a person's bearer token, a team token, a dashboard session and the
Cloud API, membership changes taking effect at the next request, and two organizations
at once."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import requests

from runplane.cli import main
from runplane.client import ApiError, Client, Connection
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO
from tests.integration.dynamodb_requests import DynamoDBRequests


@pytest.fixture
def org(local: Local) -> tuple[str, str, Client]:
    """An organization of this test's own, its admin token and client."""
    name, token = local.other_organization(unique("teams"))
    return name, token, Client(Connection(local.url, token, name))


def _cli(
    capsys: pytest.CaptureFixture[str], local: Local, token: str, org: str, *args: str
) -> object:
    capsys.readouterr()
    code = main([*args, "--url", local.url, "--token", token, "--organization", org, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _person(local: Local, org_name: str, user: str, groups: tuple[str, ...] = ()) -> str:
    """A bearer token of ``user``, signed by the stack's issuer: no role, only teams."""
    services = local.stack.services
    assert services is not None
    assert local.stack.issuer is not None
    org_id = services.workspaces.organization_id_of(org_name)
    return local.stack.issuer.issue(
        subject=user,
        now=services.clock.now(),
        groups=groups,
        extra={"custom:organization": org_id},
    )


def _get(local: Local, token: str, path: str) -> requests.Response:
    return requests.get(
        f"{local.url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def test_a_team_grants_a_person_exactly_its_workspaces_and_a_change_applies_next_request(
    local: Local, org: tuple[str, str, Client], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an organization with workspaces net and app, and bea with no role
    name, admin, client = org
    net, app = client.create_workspace("net")["id"], client.create_workspace("app")["id"]
    bea = _person(local, name, "bea")
    refused = _get(local, bea, "/api/v1/workspaces")
    assert (refused.status_code, refused.json()["code"]) == (403, "FORBIDDEN")
    # When the admin creates a team with bea in it, with read on net, through the CLI
    team = _cli(capsys, local, admin, name, "team", "create", "net-readers", "--member", "bea")
    assert isinstance(team, dict)
    _cli(
        capsys,
        local,
        admin,
        name,
        "team",
        "grant",
        "net-readers",
        "--workspace",
        "net",
        "--level",
        "read",
    )
    # Then bea's next request sees net only; app is not found
    listed = _get(local, bea, "/api/v1/workspaces").json()["workspaces"]
    assert [w["id"] for w in listed] == [net]
    assert _get(local, bea, f"/api/v1/workspaces/{app}").status_code == 404
    # And reading does not allow writing: a variable is refused 403, nothing written
    writing = requests.put(
        f"{local.url}/api/v1/workspaces/{net}/variables/region",
        json={"value": "eu"},
        headers={"Authorization": f"Bearer {bea}"},
        timeout=30,
    )
    assert (writing.status_code, writing.json()["code"]) == (403, "FORBIDDEN")
    assert client.list_variables(net) == []
    # When she is removed from the team, the same token's next request sees nothing
    _cli(capsys, local, admin, name, "team", "remove-member", "net-readers", "bea")
    assert _get(local, bea, f"/api/v1/workspaces/{net}").status_code == 404


def test_a_plan_level_team_token_plans_but_may_not_apply(
    local: Local, org: tuple[str, str, Client], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a team with the plan level on net, and a token of the team
    name, admin, client = org
    client.create_workspace("net")
    _cli(capsys, local, admin, name, "team", "create", "ci")
    _cli(capsys, local, admin, name, "team", "grant", "ci", "--workspace", "net", "--level", "plan")
    issued = _cli(capsys, local, admin, name, "team", "token", "ci", "--name", "pipeline")
    assert isinstance(issued, dict)
    ci = Client(Connection(local.url, issued["token"], name))
    # When the token asks for a run that could apply, it is refused
    with pytest.raises(ApiError) as refused:
        ci.create_run("net", HELLO, kind="plan_and_apply")
    assert (refused.value.status, refused.value.body["code"]) == (403, "FORBIDDEN")
    assert client.list_runs(client.workspace_id("net")) == []
    # And a speculative plan runs to the end with the real engine
    run = ci.create_run("net", HELLO, kind="plan_only")
    assert ci.watch(run["id"], timeout=120)["status"] == "succeeded"
    # And the run is not the token's to approve or its workspace's to change
    with pytest.raises(ApiError) as changing:
        ci.update_workspace(client.workspace_id("net"), approval_window_seconds=60)
    assert changing.value.status == 403


def test_a_team_reaches_its_members_by_name_in_the_dashboard_and_by_group_mapping(
    local: Local, org: tuple[str, str, Client]
) -> None:
    # Given a team mapped from the group "platform" with admin on net
    name, _admin, client = org
    net, app = client.create_workspace("net")["id"], client.create_workspace("app")["id"]
    team = client.create_team("platform", groups=["platform"], members=["dee"])
    client.set_team_access(net, team["id"], "admin", [])
    services = local.stack.services
    assert services is not None
    org_id = services.workspaces.organization_id_of(name)
    # When dee, a member by name, signs in to the dashboard
    code = services.web_sessions.issue_login_code(org_id, "dee", frozenset(), created_by="tests")
    browser = requests.Session()
    assert (
        browser.get(
            f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30
        ).status_code
        == 303
    )
    # Then the workspace list shows net only, and app's page is not found
    page = browser.get(f"{local.url}/ui", timeout=30)
    assert page.status_code == 200
    assert "net" in page.text
    assert f"/ui/workspaces/{app}" not in page.text
    assert browser.get(f"{local.url}/ui/workspaces/{app}", timeout=30).status_code == 404
    # And cy, in the group "platform", reaches net through the mapping; in another, not
    cy = _person(local, name, "cy", groups=("platform",))
    assert _get(local, cy, f"/api/v1/workspaces/{net}").status_code == 200
    assert (
        _get(
            local, _person(local, name, "cy", groups=("finance",)), f"/api/v1/workspaces/{net}"
        ).status_code
        == 404
    )


def test_two_organizations_manage_teams_at_once_and_never_reach_each_other(
    local: Local,
) -> None:
    # Given two organizations with a workspace each
    first = local.other_organization(unique("teams-a"))
    second = local.other_organization(unique("teams-b"))
    clients = [Client(Connection(local.url, token, name)) for name, token in (first, second)]
    workspaces = [c.create_workspace("net")["id"] for c in clients]

    # When both create a team of the same name and grant it at the same time
    def set_up(index: int) -> dict[str, object]:
        team = clients[index].create_team("ops", members=["bea"])
        clients[index].set_team_access(workspaces[index], team["id"], "write", ["approve"])
        return team

    with ThreadPoolExecutor(2) as pool:
        teams = list(pool.map(set_up, range(2)))
    # Then each has its own team, and neither reaches the other's team or workspace
    assert [c.list_teams()[0]["id"] for c in clients] == [t["id"] for t in teams]
    for mine, theirs in ((0, 1), (1, 0)):
        with pytest.raises(ApiError) as refused:
            clients[mine].set_team_access(workspaces[theirs], str(teams[mine]["id"]), "read", [])
        assert refused.value.status == 404
        with pytest.raises(ApiError) as other_team:
            clients[mine].team(str(teams[theirs]["id"]))
        assert other_team.value.status == 404
    # And bea of the first sees only the first's workspace
    bea = _person(local, first[0], "bea")
    assert [w["id"] for w in _get(local, bea, "/api/v1/workspaces").json()["workspaces"]] == [
        workspaces[0]
    ]


def test_the_cloud_api_answers_a_members_workspace_permissions(
    local: Local, org: tuple[str, str, Client]
) -> None:
    # Given bea with read on net through a team
    name, _, client = org
    net = client.create_workspace("net")["id"]
    team = client.create_team("readers", members=["bea"])
    client.set_team_access(net, team["id"], "read", [])
    bea = _person(local, name, "bea")
    # When a native client reads the workspace through the Cloud API
    answer = _get(local, bea, f"/api/v2/organizations/{name}/workspaces/net")
    # Then its permissions say what she may do there
    assert answer.status_code == 200, answer.text
    can = answer.json()["data"]["attributes"]["permissions"]
    assert can["can-read-state-versions"] is True
    assert can["can-queue-run"] is False
    assert can["can-lock"] is False
    # And another workspace of the organization is not found
    client.create_workspace("app")
    assert _get(local, bea, f"/api/v2/organizations/{name}/workspaces/app").status_code == 404


def test_a_bearer_token_past_its_lifetime_is_refused(
    local: Local, org: tuple[str, str, Client]
) -> None:
    name, _, client = org
    client.create_workspace("net")
    services = local.stack.services
    assert services is not None
    assert local.stack.issuer is not None
    expired = local.stack.issuer.issue(
        subject="bea",
        now=services.clock.now() - timedelta(hours=2),
        extra={"custom:organization": services.workspaces.organization_id_of(name)},
    )
    assert _get(local, expired, "/api/v1/workspaces").status_code == 401


def test_teams_cost_a_role_holder_nothing_and_a_member_one_query_per_team(
    local: Local, org: tuple[str, str, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace, an admin token (a role) and bea, a member of two teams with access
    name, admin, client = org
    net = client.create_workspace("net")["id"]
    for team_name in ("readers", "writers"):
        team = client.create_team(team_name, members=["bea"])
        client.set_team_access(net, team["id"], "read", [])
    bea = _person(local, name, "bea")

    def reads(token: str) -> list[str]:
        # Once to warm what a process remembers (organization names), then counted.
        assert _get(local, token, f"/api/v1/workspaces/{net}").status_code == 200
        counted = DynamoDBRequests(monkeypatch)
        assert _get(local, token, f"/api/v1/workspaces/{net}").status_code == 200
        operations = list(counted.operations)
        monkeypatch.undo()
        return operations

    # When each reads the workspace
    by_role, by_team = reads(admin), reads(bea)
    # Then the role holder's request reads no team, and bea's reads the teams once and
    # each of her two teams' access once, on top of the same reads (an API token is
    # looked up by one GetItem, a person's signed token by none)
    print(f"DynamoDB requests: role {by_role}, two teams {by_team}")
    assert by_team.count("Query") - by_role.count("Query") == 3, (by_role, by_team)
