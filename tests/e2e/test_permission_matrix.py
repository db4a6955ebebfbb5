"""The permission walk: every workspace-scoped and organization-scoped route of the run
API, the Cloud API and the dashboard, probed over real HTTP as a person holding each
level and each capability alone through a team (tests/permission_rules.py says what
each route needs and what its probe sends). An allowed probe is never answered 401,
403 or 404; a refused one is 403, or 404 exactly when the grant does not let the person
see the workspace, and writes nothing. Another organization's admin is answered 404 on
every workspace route; a member removed from their team loses access at the very next
request of both their bearer token and their dashboard session."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from functions.route_groups import route_pattern
from runplane.client import Client, Connection
from runplane.domain.identity import Permission
from runplane.domain.teams import (
    MEMBER_PERMISSIONS,
    AccessLevel,
    Capability,
    access_permissions,
)
from runplane.domain.web_session import SESSION_COOKIE, csrf_token
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO
from tests.permission_rules import TABLES, Probe, Rule, Scope, Surface

pytestmark = pytest.mark.e2e

NOT_ALLOWED = {401, 403, 404}
SURFACE_OF_BEARER = {Surface.API, Surface.CLOUD_API}


@dataclass(frozen=True)
class Grant:
    """A person in a team holding exactly ``level`` and ``capabilities`` on the
    workspace (nothing at all for neither), or in no team at all."""

    label: str
    level: AccessLevel | None
    capabilities: frozenset[Capability]
    in_a_team: bool = True

    @property
    def on_workspace(self) -> frozenset[Permission]:
        return access_permissions(self.level, self.capabilities)

    @property
    def across_organization(self) -> frozenset[Permission]:
        # A team without organization access: membership alone.
        return MEMBER_PERMISSIONS if self.in_a_team else frozenset()

    def expected(self, rule: Rule) -> tuple[bool, int | None]:
        """Whether the rule allows this grant, and if not, the answer it gets."""
        if rule.scope is Scope.WORKSPACE:
            if rule.allows(self.on_workspace):
                return True, None
            return False, 403 if Permission.WORKSPACE_READ in self.on_workspace else 404
        if rule.scope is Scope.SOMEWHERE:
            held = self.on_workspace | self.across_organization
            return (True, None) if rule.allows(held) else (False, 403)
        assert rule.scope is Scope.ORGANIZATION
        return (True, None) if rule.allows(self.across_organization) else (False, 403)


GRANTS = [
    Grant("no-team", None, frozenset(), in_a_team=False),
    Grant("none", None, frozenset()),
    *(Grant(level.value, level, frozenset()) for level in AccessLevel),
    *(Grant(capability.value, None, frozenset({capability})) for capability in Capability),
]


@dataclass
class Person:
    bearer: str
    browser: requests.Session
    csrf: str
    # A token of the person's team (acting as the team), if they are in one.
    team_token: str | None = None

    def as_team_token(self) -> Person | None:
        """The same grant through the team's own token (the APIs only)."""
        if self.team_token is None:
            return None
        return Person(self.team_token, self.browser, self.csrf)


@dataclass
class World:
    """One organization of the walk's own and everything its routes name."""

    local: Local
    name: str
    org_id: str
    admin: Client
    admin_token: str
    objects: dict[str, str]
    people: dict[str, Person]

    @property
    def url(self) -> str:
        return self.local.url

    def admin_call(self, method: str, path: str, body: Any = None) -> requests.Response:
        return requests.request(
            method,
            f"{self.url}{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=30,
        )


def _bearer(local: Local, org_id: str, user: str) -> str:
    services = local.stack.services
    assert services is not None
    assert local.stack.issuer is not None
    return local.stack.issuer.issue(
        subject=user, now=services.clock.now(), extra={"custom:organization": org_id}
    )


def _signed_in(local: Local, org_id: str, user: str) -> tuple[requests.Session, str]:
    services = local.stack.services
    assert services is not None
    code = services.web_sessions.issue_login_code(org_id, user, frozenset(), created_by="tests")
    browser = requests.Session()
    answer = browser.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    assert answer.status_code == 303, answer.text
    # The token every form of the session carries (a person who sees no workspace gets
    # no page with a form to read it from).
    return browser, csrf_token(str(browser.cookies[SESSION_COOKIE]))


def _new_destination(world: World) -> str:
    created = world.admin_call(
        "POST",
        f"/api/v1/workspaces/{world.objects['workspace_id']}/notifications",
        {"name": "probe", "url": "http://127.0.0.1:9/hook", "events": ["applied"]},
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


@pytest.fixture(scope="module")
def world(embedded: Local) -> World:
    local = embedded
    local.stack.activate()
    services = local.stack.services
    assert services is not None
    name, token = local.other_organization(unique("matrix"))
    org_id = services.workspaces.organization_id_of(name)
    admin = Client(Connection(local.url, token, name))
    workspace = admin.create_workspace("main")
    source = admin.create_workspace("source")
    # One engine-backed run, applied: it leaves a state version, a plan, an apply and a
    # decided approval (every decision route is then refused after its check).
    run = admin.create_run(workspace["id"], HELLO)
    admin.watch(run["id"], until=["awaiting_approval"], timeout=180)
    admin.decide(run["id"], "approve")
    applied = admin.watch(run["id"], timeout=180)
    assert applied["status"] == "succeeded", applied
    admin.set_variable(workspace["id"], "region", "eu")
    schedule = admin.create_schedule(workspace["id"], "0 3 * * *")
    variable_set = admin.create_variable_set("shared")
    world = World(local, name, org_id, admin, token, {}, {})
    pending = world.admin_call(
        "POST", f"/api/v1/workspaces/{workspace['id']}/configuration-versions"
    )
    assert pending.status_code == 201, pending.text
    world.objects.update(
        workspace_id=workspace["id"],
        workspace="main",
        org_name=name,
        source_workspace=source["id"],
        run_id=run["id"],
        plan_id="plan-" + run["id"].removeprefix("run-"),
        apply_id="apply-" + run["id"].removeprefix("run-"),
        policy_check_id="polchk-" + run["id"].removeprefix("run-"),
        pending_cv=pending.json()["id"],
        variable="region",
        category="terraform",
        schedule=schedule["id"],
        set_id=variable_set["id"],
        missing_token="tok-missing",
        missing_policy="missing",
        missing_installation="424242",
        outsider="outsider",
        member="probe-member",
    )
    world.objects["destination"] = _new_destination(world)
    assert (
        world.admin_call(
            "POST",
            f"/api/v1/workspaces/{workspace['id']}/run-triggers",
            {"source_workspace_id": source["id"]},
        ).status_code
        < 300
    )
    current = world.admin_call("GET", f"/api/v2/workspaces/{workspace['id']}").json()
    state_version = current["data"]["relationships"]["current-state-version"]["data"]["id"]
    world.objects["state_version"] = state_version
    world.objects["output"] = "wsout-" + state_version.removeprefix("sv-") + "-message"
    # The team the team routes act on, with a member to remove.
    probe_team = admin.create_team("probed", members=["probe-member"])
    world.objects["team_id"] = probe_team["id"]
    for grant in GRANTS:
        user = f"user-{grant.label}"
        if not grant.in_a_team:
            browser, csrf = _signed_in(local, org_id, user)
            world.people[grant.label] = Person(_bearer(local, org_id, user), browser, csrf)
            continue
        team = admin.create_team(f"grant-{grant.label}", members=[user])
        if grant.level is not None or grant.capabilities:
            admin.set_team_access(
                workspace["id"],
                team["id"],
                grant.level.value if grant.level else None,
                sorted(c.value for c in grant.capabilities),
            )
        browser, csrf = _signed_in(local, org_id, user)
        issued = admin.create_team_token(team["id"], "walk")
        world.people[grant.label] = Person(
            _bearer(local, org_id, user), browser, csrf, str(issued["token"])
        )
    return world


# -- probes ------------------------------------------------------------------------------


def _fill(template: str, world: World, grant: str) -> str:
    values = {**world.objects, "grant": grant}
    return template.format(**values)


def _path(template: str, probe: Probe, world: World) -> str:
    parts = []
    for segment in template.split("/"):
        if segment.startswith("<") and segment.endswith(">"):
            placeholder = segment[1:-1]
            named = probe.path.get(placeholder, placeholder)
            # A walk object by name, else the literal the probe gives (a phase, a decision).
            parts.append(world.objects.get(named, named))
        else:
            parts.append(segment)
    return "/".join(parts)


def _filled(value: Any, world: World, grant: str) -> Any:
    """``value`` with the placeholders of every text in it filled."""
    if isinstance(value, str):
        return _fill(value, world, grant)
    if isinstance(value, dict):
        return {k: _filled(v, world, grant) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, world, grant) for v in value]
    return value


def _body(probe: Probe, world: World, grant: str) -> dict[str, Any] | None:
    return None if probe.body is None else dict(_filled(probe.body, world, grant))


def send(
    world: World,
    surface: Surface,
    method: str,
    template: str,
    probe: Probe,
    person: Person,
    grant: str = "probe",
) -> requests.Response:
    path = _path(template, probe, world)
    if probe.query:
        path += "?" + urlencode(_filled(probe.query, world, grant))
    body = _body(probe, world, grant)
    if surface in SURFACE_OF_BEARER:
        headers = {"Authorization": f"Bearer {person.bearer}"}
        if surface is Surface.CLOUD_API:
            headers["Content-Type"] = "application/vnd.api+json"
            return requests.request(
                method,
                f"{world.url}{path}",
                data=json.dumps(body) if body is not None else None,
                headers=headers,
                timeout=30,
            )
        return requests.request(
            method, f"{world.url}{path}", json=body, headers=headers, timeout=30
        )
    if method == "GET":
        return person.browser.get(f"{world.url}{path}", allow_redirects=False, timeout=30)
    return person.browser.post(
        f"{world.url}{path}",
        data={**(body or {}), "csrf": person.csrf},
        headers={"Origin": world.url},
        allow_redirects=False,
        timeout=30,
    )


def _absent(answer: requests.Response, probe: Probe) -> bool:
    """An allowed probe answered 404 for what it acts on, past the permission check."""
    return answer.status_code == 404 and bool(probe.absent) and probe.absent in answer.text


# -- what a refused probe must not change, and what an allowed one is put back to ---------


def _read(world: World, path: str) -> Any:
    answer = world.admin_call("GET", path)
    return answer.status_code, answer.json() if answer.content else None


def _fingerprint(world: World, names: tuple[str, ...]) -> dict[str, Any]:
    ws = world.objects["workspace_id"]
    readers: dict[str, Callable[[], Any]] = {
        "workspace": lambda: _read(world, f"/api/v1/workspaces/{ws}"),
        "lock": lambda: _read(world, f"/api/v2/workspaces/{ws}")[1]["data"]["attributes"]["locked"],
        "variables": lambda: _read(world, f"/api/v1/workspaces/{ws}/variables"),
        "cloud_settings": lambda: _read(world, f"/api/v1/workspaces/{ws}/cloud-settings"),
        "auto_destroy": lambda: _read(world, f"/api/v1/workspaces/{ws}/auto-destroy"),
        "runs": lambda: _read(world, f"/api/v1/workspaces/{ws}/runs"),
        "run": lambda: _read(world, f"/api/v1/runs/{world.objects['run_id']}")[1]["status"],
        "team": lambda: _read(world, f"/api/v1/teams/{world.objects['team_id']}"),
        "teams": lambda: _read(world, "/api/v1/teams"),
        "workspaces": lambda: _read(world, "/api/v1/workspaces"),
        "variable_sets": lambda: _read(world, "/api/v1/variable-sets"),
        "variable_set": lambda: _read(world, f"/api/v1/variable-sets/{world.objects['set_id']}"),
        "team_access": lambda: _read(world, f"/api/v1/workspaces/{ws}/team-access"),
        "github": lambda: _read(world, f"/api/v1/workspaces/{ws}/github"),
        "gitlab": lambda: _read(world, f"/api/v1/workspaces/{ws}/gitlab"),
        "schedules": lambda: _read(world, f"/api/v1/workspaces/{ws}/schedules"),
        "run_triggers": lambda: _read(world, f"/api/v1/workspaces/{ws}/run-triggers"),
        "notifications": lambda: _read(world, f"/api/v1/workspaces/{ws}/notifications"),
        "state": lambda: _read(world, f"/api/v2/workspaces/{ws}/state-versions"),
    }
    return {name: readers[name]() for name in names}


def _restore(world: World, what: str | None) -> None:
    ws = world.objects["workspace_id"]
    if what == "variable":
        world.admin.set_variable(ws, "region", "eu")
    elif what == "run_trigger":
        world.admin_call(
            "POST",
            f"/api/v1/workspaces/{ws}/run-triggers",
            {"source_workspace_id": world.objects["source_workspace"]},
        )
    elif what == "notification":
        listed = _read(world, f"/api/v1/workspaces/{ws}/notifications")[1]
        destinations = listed.get("destinations", listed) if isinstance(listed, dict) else listed
        for destination in destinations:
            if destination["id"] != world.objects["destination"]:
                world.admin_call(
                    "DELETE", f"/api/v1/workspaces/{ws}/notifications/{destination['id']}"
                )
        if not any(d["id"] == world.objects["destination"] for d in destinations):
            world.objects["destination"] = _new_destination(world)
    elif what == "schedules":
        for schedule in world.admin.list_schedules(ws):
            if schedule["id"] != world.objects["schedule"]:
                world.admin.delete_schedule(schedule["id"])
        answer = world.admin_call("GET", f"/api/v1/schedules/{world.objects['schedule']}")
        if answer.status_code == 404:
            world.objects["schedule"] = world.admin.create_schedule(ws, "0 3 * * *")["id"]
        elif answer.json().get("paused"):
            world.admin.pause_schedule(world.objects["schedule"], paused=False)
    elif what == "unlocked":
        world.admin_call("POST", f"/api/v2/workspaces/{ws}/actions/force-unlock")


# -- the walk ----------------------------------------------------------------------------

WALKED = [
    (surface, method, template, rule)
    for surface, table in TABLES.items()
    for (method, template), rule in table.items()
    if rule.probe is not None
    and rule.scope in {Scope.WORKSPACE, Scope.ORGANIZATION, Scope.SOMEWHERE}
]


def _callers(
    grants: list[Grant], world: World, surface: Surface
) -> Iterator[tuple[Grant, Person, str]]:
    """Each grant's callers on ``surface``: the person (a bearer token of theirs, or their
    dashboard session), and for the APIs the team's own token too."""
    for grant in grants:
        person = world.people[grant.label]
        yield grant, person, "person"
        token = person.as_team_token()
        if surface in SURFACE_OF_BEARER and token is not None:
            yield grant, token, "team token"


def test_every_route_answers_each_level_and_capability_as_its_rule_says(world: World) -> None:
    findings: list[str] = []
    for surface, method, template, rule in WALKED:
        probe = rule.probe
        assert probe is not None
        refused = [g for g in GRANTS if not g.expected(rule)[0]]
        allowed = [g for g in GRANTS if g.expected(rule)[0]]
        # Given what the route could change, when every refused grant calls it
        before = _fingerprint(world, probe.changes)
        for grant, caller, how in _callers(refused, world, surface):
            answer = send(world, surface, method, template, probe, caller, grant.label)
            # Then each is refused as its grant says
            wanted = grant.expected(rule)[1]
            if answer.status_code != wanted:
                findings.append(
                    f"{surface} {method} {template} as {grant.label} ({how}): "
                    f"{answer.status_code} (wanted {wanted}) {answer.text[:160]}"
                )
        # And nothing was written
        after = _fingerprint(world, probe.changes)
        if after != before:
            findings.append(f"{surface} {method} {template}: a refused probe wrote {after}")
        # When every allowed grant calls it, none is refused
        for grant, caller, how in _callers(allowed, world, surface):
            answer = send(world, surface, method, template, probe, caller, grant.label)
            if answer.status_code in NOT_ALLOWED and not _absent(answer, probe):
                findings.append(
                    f"{surface} {method} {template} as {grant.label} ({how}): "
                    f"{answer.status_code} (allowed) {answer.text[:160]}"
                )
            _restore(world, probe.restore)
    assert findings == [], "\n".join(findings)


def test_another_organizations_admin_finds_no_workspace_route(world: World) -> None:
    # Given the admin of a second organization, by token and by dashboard session
    local = world.local
    services = local.stack.services
    assert services is not None
    other_name, other_token = local.other_organization(unique("matrix-other"))
    other_id = services.workspaces.organization_id_of(other_name)
    code = services.web_sessions.issue_login_code(
        other_id, "admin", frozenset(Permission), created_by="tests"
    )
    browser = requests.Session()
    browser.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    csrf = csrf_token(str(browser.cookies[SESSION_COOKIE]))
    outsider = Person(other_token, browser, csrf)
    before = _fingerprint(world, ("workspace", "variables", "runs", "schedules", "run"))
    # When it calls every workspace route of the first organization
    answers = {
        f"{surface} {method} {template}": send(
            world, surface, method, template, rule.probe, outsider
        ).status_code
        for surface, method, template, rule in WALKED
        if rule.scope is Scope.WORKSPACE and rule.probe is not None
    }
    # Then every one is not found, and nothing changed
    found = [f"{route}: {status}" for route, status in answers.items() if status != 404]
    assert found == [], "\n".join(found)
    assert _fingerprint(world, ("workspace", "variables", "runs", "schedules", "run")) == before


def test_a_member_removed_mid_session_is_refused_at_the_next_request(world: World) -> None:
    # Given mover, in a team with read on the workspace, signed in both ways
    local, admin = world.local, world.admin
    ws = world.objects["workspace_id"]
    team = admin.create_team("movers", members=["mover"])
    admin.set_team_access(ws, team["id"], "read", [])
    bearer = _bearer(local, world.org_id, "mover")
    browser, _ = _signed_in(local, world.org_id, "mover")

    def reads() -> tuple[int, int]:
        by_token = requests.get(
            f"{world.url}/api/v1/workspaces/{ws}",
            headers={"Authorization": f"Bearer {bearer}"},
            timeout=30,
        )
        by_page = browser.get(f"{world.url}/ui/workspaces/{ws}", timeout=30)
        return by_token.status_code, by_page.status_code

    assert reads() == (200, 200)
    # When the admin removes mover from the team
    admin.team_member(team["id"], "mover", add=False)
    # Then the very next request of both is not found
    assert reads() == (404, 404)
    # And adding mover back restores access at the next request again
    admin.team_member(team["id"], "mover", add=True)
    assert reads() == (200, 200)


# -- what the pages offer ------------------------------------------------------------------

_FORM_ACTION = re.compile(r'<form[^>]*\saction="([^"]+)"')
# Forms the workspace page shows whenever the person may use them, whatever its state
# (adding a trigger source needs a candidate the person can see; unlocking, a lock).
ALWAYS_OFFERED = (
    "/ui/workspaces/<workspace_id>/variables",
    "/ui/workspaces/<workspace_id>/schedules",
    "/ui/workspaces/<workspace_id>/notifications",
    "/ui/workspaces/<workspace_id>/settings",
    "/ui/workspaces/<workspace_id>/lock",
    "/ui/workspaces/<workspace_id>/cloud-settings",
)


def _offered(page: str) -> set[str]:
    """The dashboard route templates the page's forms post to."""
    templates = [t for (method, t) in TABLES[Surface.DASHBOARD] if method == "POST"]
    offered = set()
    for action in _FORM_ACTION.findall(page):
        path = html.unescape(action).split("?")[0].split("#")[0]
        matching = [t for t in templates if route_pattern(t).match(path)]
        assert matching, f"a form posts to {path}, which no dashboard rule names"
        # The most specific template (a literal segment beats a parameter).
        offered.add(min(matching, key=lambda t: t.count("<")))
    return offered


def test_the_pages_offer_exactly_the_forms_each_grant_may_use(world: World) -> None:
    ws, run = world.objects["workspace_id"], world.objects["run_id"]
    findings = []
    for grant in GRANTS:
        person = world.people[grant.label]
        for page_path in (f"/ui/workspaces/{ws}", f"/ui/runs/{run}"):
            # Given the page as the person sees it
            page = person.browser.get(f"{world.url}{page_path}", timeout=30)
            if Permission.WORKSPACE_READ not in grant.on_workspace:
                assert page.status_code == 404, (grant.label, page_path)
                continue
            assert page.status_code == 200, (grant.label, page_path, page.text[:300])
            offered = _offered(page.text)
            # And its header links the inbox for anyone who may read runs somewhere
            if ('href="/ui/attention"' in page.text) != (Permission.RUN_READ in grant.on_workspace):
                findings.append(f"{page_path}: the inbox link is wrong for {grant.label}")
            # Then every form on it is one the grant may use
            for template in offered - {"/ui/logout"}:
                if not grant.expected(TABLES[Surface.DASHBOARD][("POST", template)])[0]:
                    findings.append(f"{page_path} offers {template} to {grant.label}")
            # And the workspace page hides none that the grant may use
            if page_path.startswith("/ui/workspaces/"):
                for template in ALWAYS_OFFERED:
                    rule = TABLES[Surface.DASHBOARD][("POST", template)]
                    if grant.expected(rule)[0] and template not in offered:
                        findings.append(f"{page_path} hides {template} from {grant.label}")
    assert findings == [], "\n".join(findings)


def test_signed_in_routes_serve_any_caller_of_the_organization_and_nobody_else(
    world: World,
) -> None:
    # Given a person of the organization in no team, and a request with no credential
    found = []
    for surface in SURFACE_OF_BEARER:
        for (method, template), rule in TABLES[surface].items():
            if rule.scope is not Scope.SIGNED_IN:
                continue
            probe = Probe(path={"org": "org_name"})
            # When each calls a route any signed-in caller may call
            answer = send(world, surface, method, template, probe, world.people["no-team"])
            url = f"{world.url}{_path(template, probe, world)}"
            anonymous = requests.request(method, url, timeout=30)
            # Then the person is served and the anonymous request is not
            if answer.status_code in NOT_ALLOWED:
                found.append(f"{method} {template}: {answer.status_code} to a member")
            if anonymous.status_code != 401:
                found.append(f"{method} {template}: {anonymous.status_code} without credentials")
    assert found == [], "\n".join(found)


# Well-formed bodies of the runner's routes, so that what refuses them is the caller.
_RUNNER_BODIES: dict[str, dict[str, Any]] = {
    "/api/v1/runner/sessions": {
        "bootstrap": "not-a-bootstrap-secret",
        "run_id": "run-x",
        "attempt_id": "att-x",
        "phase": "plan",
        "sandbox_id": "sbx-x",
    },
    # A standby's claim carries its ticket (no bearer); one no standby holds is refused.
    "/api/v1/runner/standby/claim": {"ticket": "rsb_sby-x." + "A" * 43},
    "/api/v1/runner/uploads": {"kind": "plan"},
    "/api/v1/runner/uploads/register": {
        "uploads": [{"ticket": "t", "size": 0, "sha256": "0" * 64, "artifact_id": "art-x"}]
    },
    "/api/v1/runner/uploads/<artifact_id>/register": {
        "ticket": "t",
        "size": 0,
        "sha256": "0" * 64,
    },
    "/api/v1/runner/apply-start": {"handle": "not-a-handle", "request": {}},
    "/api/v1/runner/credentials": {"handle": "not-a-handle"},
    "/api/v1/runner/log-chunks": {"sequence": 0, "offset": 0, "data": "aGk="},
}
# The runner's report is read by the contract's own reader before anything else: a
# report that is not one is refused as such (422) to any caller.
_REPORT_READ_FIRST = "/api/v1/runner/result"


def test_runner_routes_refuse_people_and_organization_tokens(world: World) -> None:
    # Given a person with admin on the workspace and the organization's admin token
    callers = {"person": world.people["admin"].bearer, "admin token": world.admin_token}
    found = []
    for surface in SURFACE_OF_BEARER:
        for (method, template), rule in TABLES[surface].items():
            if rule.scope is not Scope.RUNNER:
                continue
            concrete = template.replace("<", "").replace(">", "")
            refused = {401, 403, 422} if template == _REPORT_READ_FIRST else {401, 403}
            # When either calls a route only a run's runner session may call
            for caller, token in callers.items():
                answer = requests.request(
                    method,
                    f"{world.url}{concrete}",
                    json=_RUNNER_BODIES.get(template, {}) if method == "POST" else None,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=30,
                )
                # Then it is refused as unauthenticated or forbidden, never served
                if answer.status_code not in refused:
                    found.append(f"{caller} {method} {template}: {answer.status_code}")
    assert found == [], "\n".join(found)
