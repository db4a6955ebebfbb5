"""The teams page over real HTTP: an admin manages teams with its forms, a member's next
page follows the change, and someone without teams:manage sees no form and is refused
a forged one, writing nothing."""

from __future__ import annotations

import requests

from runplane.client import Client, Connection
from tests.e2e.conftest import Local, unique
from tests.e2e.test_dashboard import form_fields


def _session(local: Local, org_id: str, user: str, *, admin: bool) -> requests.Session:
    services = local.stack.services
    assert services is not None
    from runplane.domain.identity import Permission

    granted = frozenset(Permission) - {Permission.PLATFORM_OPERATE} if admin else frozenset()
    code = services.web_sessions.issue_login_code(org_id, user, granted, created_by="tests")
    browser = requests.Session()
    answer = browser.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    assert answer.status_code == 303
    return browser


def _post(
    local: Local, browser: requests.Session, path: str, data: dict[str, str]
) -> requests.Response:
    csrf = form_fields(browser.get(f"{local.url}/", timeout=30).text, "logout-form")["csrf"]
    return browser.post(
        f"{local.url}{path}",
        data={"csrf": csrf, **data},
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )


def test_an_admin_manages_teams_from_the_page_and_a_member_follows_at_the_next_page(
    local: Local,
) -> None:
    # Given an organization with workspaces net and app, its admin and bea signed in
    name, token = local.other_organization(unique("dash-teams"))
    client = Client(Connection(local.url, token, name))
    net, app = client.create_workspace("net")["id"], client.create_workspace("app")["id"]
    services = local.stack.services
    assert services is not None
    org_id = services.workspaces.organization_id_of(name)
    admin = _session(local, org_id, "ada", admin=True)
    bea = _session(local, org_id, "bea", admin=False)
    # When the admin creates a team with bea, and gives it write on net, from the page
    created = _post(
        local,
        admin,
        "/ui/teams",
        {"name": "net-ops", "members": "bea", "org_access_manage-policies": "yes"},
    )
    assert (created.status_code, created.headers["Location"]) == (303, "/ui/teams")
    team = client.list_teams()[0]
    assert (team["name"], team["members"], team["organization_access"]) == (
        "net-ops",
        ["bea"],
        ["manage-policies"],
    )
    granted = _post(
        local,
        admin,
        f"/ui/teams/{team['id']}/access",
        {"workspace_id": net, "level": "write", "capability_recover": "yes"},
    )
    assert granted.status_code == 303
    # Then the page lists the team, its member and its access
    page = admin.get(f"{local.url}/ui/teams", timeout=30).text
    assert "net-ops" in page
    assert "<code>bea</code>" in page
    assert "recover" in page
    # And bea's very next page shows net and not app, and no team form
    home = bea.get(f"{local.url}/ui", timeout=30).text
    assert f"/ui/workspaces/{net}" in home
    assert f"/ui/workspaces/{app}" not in home
    teams_page = bea.get(f"{local.url}/ui/teams", timeout=30)
    assert teams_page.status_code == 200
    assert 'id="team-create-form"' not in teams_page.text
    # When bea forges the admin's forms, each is refused and nothing changes
    before = (client.list_teams(), client.team_access(team["id"]))
    for path, data in (
        ("/ui/teams", {"name": "mine"}),
        (f"/ui/teams/{team['id']}/members", {"user": "eve"}),
        (f"/ui/teams/{team['id']}/access", {"workspace_id": app, "level": "admin"}),
        (f"/ui/teams/{team['id']}/delete", {}),
    ):
        refused = _post(local, bea, path, data)
        assert refused.status_code == 403, path
    assert (client.list_teams(), client.team_access(team["id"])) == before
    # When the admin removes bea, her next page no longer shows net
    removed = _post(local, admin, f"/ui/teams/{team['id']}/members/remove", {"user": "bea"})
    assert removed.status_code == 303
    assert bea.get(f"{local.url}/ui/workspaces/{net}", timeout=30).status_code == 404
    # And a form without its CSRF token is refused
    no_csrf = admin.post(
        f"{local.url}/ui/teams",
        data={"name": "x"},
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )
    assert no_csrf.status_code == 403
    assert [t["name"] for t in client.list_teams()] == ["net-ops"]
