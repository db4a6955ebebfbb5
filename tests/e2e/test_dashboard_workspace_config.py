"""The workspace page's configuration sections over real HTTP: variables, variable sets,
schedules, run triggers, notification destinations and the source binding show what
the run API holds, no sensitive value or secret is ever in the page, and every form
works for an admin and is refused, writing nothing, for a reader, without its CSRF
token, with invalid input, and from another organization."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from functions.dashboard import workspace_config
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local, unique
from tests.e2e.github_connect import held_once
from tests.e2e.test_dashboard import form_fields, signed_in, signed_in_as
from tests.e2e.test_managed_runs import new_workspace
from tests.integration.dynamodb_requests import DynamoDBRequests

SECRET = "s3cr3t-dash-config-9f1c"
SET_SECRET = "set-s3cr3t-dash-7b2e"
NEW_SECRET = "n3w-s3cr3t-dash-41aa"
SLACK_PATH = "/services/T0DASH/B0DASH/pathIsTheCredential"
INSTALLATION = 4242


def api(local: Local, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The run API, as the stack's admin."""
    answer = requests.request(
        method,
        f"{local.url}/api/v1{path}",
        json=body,
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )
    assert answer.status_code < 300, answer.text
    return answer.json()


def page_of(browser: requests.Session, local: Local, ws: str) -> str:
    answer = browser.get(f"{local.url}/ui/workspaces/{ws}", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.text


def send(
    browser: requests.Session,
    local: Local,
    ws: str,
    path: str,
    data: dict[str, str],
    origin: str | None = None,
) -> requests.Response:
    """A form posted as a browser on the page would (from this origin by default)."""
    return browser.post(
        f"{local.url}/ui/workspaces/{ws}/{path}",
        data=data,
        headers={"Origin": origin or local.url},
        allow_redirects=False,
        timeout=30,
    )


def csrf_of(browser: requests.Session, local: Local) -> str:
    return form_fields(browser.get(f"{local.url}/", timeout=30).text, "logout-form")["csrf"]


def configuration(local: Local, ws: str) -> dict[str, Any]:
    """Everything the sections show, as the run API reads it back."""
    return {
        "variables": local.client.list_variables(ws),
        "schedules": local.client.list_schedules(ws),
        "triggers": api(local, "GET", f"/workspaces/{ws}/run-triggers"),
        "destinations": api(local, "GET", f"/workspaces/{ws}/notifications"),
    }


def workspace_of(ws: str) -> Any:
    return workspace_store.get_workspace(ws, reads=IdentityMap())


def pinned_value(local: Local, ws: str, name: str) -> str:
    """A variable's value as a new run would pin it (sensitive ones opened)."""
    services = local.stack.services
    assert services is not None
    return services.workspace_variables.pinned(workspace_of(ws)).values[name]


def test_each_section_shows_what_the_api_holds_and_no_secret(
    local: Local, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="runplane")
    # Given a workspace with variables (one sensitive, one an environment variable)
    ws = new_workspace(local, "dash-config-show")
    local.client.set_variable(ws, "region", "eu-west-3", description="where it runs")
    local.client.set_variable(ws, "db_password", SECRET, sensitive=True)
    local.client.set_variable(ws, "APP_MODE", "debug", category="env")
    # And a variable set applied to it (with a sensitive variable), and one that is not
    applied = local.client.create_variable_set(unique("dash-net"))
    local.client.set_set_variable(applied["id"], "terraform", "vpc_cidr", "10.0.0.0/16")
    local.client.set_set_variable(applied["id"], "env", "NET_TOKEN", SET_SECRET, sensitive=True)
    local.client.apply_variable_set(applied["id"], ws)
    elsewhere = local.client.create_variable_set(unique("dash-elsewhere"))
    # And a schedule, a source workspace and a dependent one
    schedule = local.client.create_schedule(ws, "rate(1 day)", "plan_only")
    source = local.client.create_workspace(unique("dash-source"))
    dependent = local.client.create_workspace(unique("dash-dependent"))
    api(local, "POST", f"/workspaces/{ws}/run-triggers", {"source_workspace_id": source["id"]})
    api(local, "POST", f"/workspaces/{dependent['id']}/run-triggers", {"source_workspace_id": ws})
    # And a Slack destination (its URL's path is the credential) and a signed webhook
    slack = api(
        local,
        "POST",
        f"/workspaces/{ws}/notifications",
        {
            "name": "ops channel",
            "kind": "slack",
            "url": f"https://hooks.slack.com{SLACK_PATH}",
            "events": ["applied", "needs_attention"],
        },
    )
    hook = api(
        local,
        "POST",
        f"/workspaces/{ws}/notifications",
        {
            "name": "audit hook",
            "kind": "webhook",
            "url": "https://hooks.example.com/runplane",
            "events": ["errored"],
        },
    )
    # And a GitHub binding
    held_once(local, INSTALLATION, account="acme")
    local.client.bind_github(
        ws,
        repository="acme/dash-config",
        branch="main",
        working_directory="envs/prod",
        installation_id=INSTALLATION,
        push_run_kind="plan_only",
    )

    # When an admin and a reader open the workspace page
    admin_page = page_of(signed_in(local), local, ws)
    reader_page = page_of(signed_in_as(local, "reader"), local, ws)

    for page in (admin_page, reader_page):
        # Then every variable shows its name and category; a plain value is shown, the
        # sensitive one only as sensitive
        assert 'id="var-terraform-region"' in page
        assert "eu-west-3" in page
        assert "where it runs" in page
        assert 'id="var-terraform-db_password"' in page
        assert 'id="var-env-APP_MODE"' in page
        assert "debug" in page
        # And the applied set shows with its variables' names, the other set not at all
        assert applied["name"] in page
        assert "vpc_cidr" in page
        assert "NET_TOKEN" in page
        assert elsewhere["name"] not in page
        # And the schedule with its next fire as a time
        assert f'id="schedule-{schedule["id"]}"' in page
        assert "rate(1 day)" in page
        assert f'datetime="{schedule["next_fire_at"]}"' in page
        # And the source and dependent workspaces by name
        assert source["name"] in page
        assert dependent["name"] in page
        # And both destinations by name, kind and host only
        assert f'id="destination-{slack["id"]}"' in page
        assert f'id="destination-{hook["id"]}"' in page
        assert "https://hooks.slack.com/…" in page
        assert "needs attention" in page
        # And the binding
        assert "acme/dash-config" in page
        assert "envs/prod" in page
        assert 'href="/ui/github"' in page
        # And no sensitive value, webhook path or signing secret is anywhere in it
        for secret in (SECRET, SET_SECRET, SLACK_PATH, "pathIsTheCredential"):
            assert secret not in page

    # And only the admin has the forms
    for form in (
        "variable-add-form",
        "var-edit-terraform-region",
        "var-delete-terraform-region",
        "schedule-add-form",
        f"schedule-delete-{schedule['id']}",
        "trigger-add-form",
        f"trigger-remove-{source['id']}",
        "destination-add-form",
        f"destination-delete-{slack['id']}",
    ):
        assert f'id="{form}"' in admin_page
        assert f'id="{form}"' not in reader_page
    # And the sensitive variable's edit form has an empty password field
    start = admin_page.index('id="var-edit-terraform-db_password"')
    edit = admin_page[start : admin_page.index("</form>", start)]
    assert 'type="password" name="value" id="var-value-terraform-db_password"' in edit
    assert "value=" not in edit.split('name="value"')[1].split(">")[0]
    # And no log line of the stack (in this process) holds a secret
    assert SECRET not in caplog.text
    assert SET_SECRET not in caplog.text


def test_an_empty_workspace_says_so_in_each_section(local: Local) -> None:
    # Given a workspace with no configuration
    ws = new_workspace(local, "dash-config-empty")
    # When an admin opens its page
    page = page_of(signed_in(local), local, ws)
    # Then each section says it has nothing
    for empty in (
        "variables-none",
        "schedules-none",
        "trigger-sources-none",
        "destinations-none",
        "source-none",
    ):
        assert f'id="{empty}"' in page
    # And the page stays one page: the sections render without a binding or a set
    assert 'id="source-github"' in page


def test_variable_forms_add_edit_keep_a_sensitive_value_and_delete(local: Local) -> None:
    # Given an admin on an empty workspace's page
    ws = new_workspace(local, "dash-config-vars")
    browser = signed_in(local)
    token = form_fields(page_of(browser, local, ws), "variable-add-form")["csrf"]

    # When a plain multi-line variable and a sensitive one are added with the add form
    plain = {"csrf": token, "name": "zones", "category": "terraform", "value": "a\r\nb"}
    added = send(browser, local, ws, "variables", plain)
    secret = {
        "csrf": token,
        "name": "api_key",
        "category": "env",
        "value": SECRET,
        "sensitive": "yes",
        "description": "the key",
    }
    added_secret = send(browser, local, ws, "variables", secret)

    # Then each sends the browser back to the variables, and the API lists both (the
    # browser's line break as the value's), the sensitive one without a value
    for answer in (added, added_secret):
        assert answer.status_code == 303, answer.text
        assert answer.headers["Location"] == f"/ui/workspaces/{ws}#variables"
    listed = {v["name"]: v for v in local.client.list_variables(ws)}
    assert listed["zones"]["value"] == "a\nb"
    assert (listed["api_key"]["category"], listed["api_key"]["sensitive"]) == ("env", True)
    assert listed["api_key"]["value"] is None
    # And the page never holds the sensitive value
    page = page_of(browser, local, ws)
    assert SECRET not in page

    # When the sensitive variable's edit form is sent as shown, with a new description
    fields = form_fields(page, "var-edit-env-api_key")
    kept = send(browser, local, ws, "variables", {**fields, "value": "", "description": "new"})

    # Then the description changed and the stored value is kept
    assert kept.status_code == 303, kept.text
    listed = {v["name"]: v for v in local.client.list_variables(ws)}
    assert listed["api_key"]["description"] == "new"
    assert listed["api_key"]["sensitive"] is True
    services = local.stack.services
    assert services is not None
    assert services.workspace_variables.pinned(workspace_of(ws)).env["api_key"] == SECRET

    # When it is sent with a new value
    replaced = send(browser, local, ws, "variables", {**fields, "value": NEW_SECRET})
    # Then the new value is stored, and is in no page
    assert replaced.status_code == 303, replaced.text
    assert services.workspace_variables.pinned(workspace_of(ws)).env["api_key"] == NEW_SECRET
    assert NEW_SECRET not in page_of(browser, local, ws) + replaced.text

    # When the plain variable is edited and then deleted
    fields = form_fields(page_of(browser, local, ws), "var-edit-terraform-zones")
    assert send(browser, local, ws, "variables", {**fields, "value": "c"}).status_code == 303
    assert pinned_value(local, ws, "zones") == "c"
    fields = form_fields(page_of(browser, local, ws), "var-delete-terraform-zones")
    deleted = send(browser, local, ws, "variables/delete", fields)
    # Then only the sensitive variable is left
    assert deleted.status_code == 303, deleted.text
    assert [v["name"] for v in local.client.list_variables(ws)] == ["api_key"]


def test_a_sensitive_value_is_kept_only_when_one_is_stored(local: Local) -> None:
    # Given a workspace with a plain variable, and an admin's add form
    ws = new_workspace(local, "dash-config-keep")
    local.client.set_variable(ws, "zone", "a")
    browser = signed_in(local)
    token = form_fields(page_of(browser, local, ws), "variable-add-form")["csrf"]
    before = local.client.list_variables(ws)

    # When a sensitive variable is sent without a value, new or in place of the plain one
    answers = [
        send(
            browser,
            local,
            ws,
            "variables",
            {"csrf": token, "name": name, "category": "terraform", "sensitive": "yes"},
        )
        for name in ("fresh", "zone")
    ]

    # Then each is refused, naming the value, and nothing was written
    for answer in answers:
        assert answer.status_code == 422, answer.text
        assert "no stored sensitive value to keep" in answer.text
    assert local.client.list_variables(ws) == before


@dataclass
class Given:
    """A workspace with one of everything the forms change."""

    ws: str
    schedule: str
    source: str
    candidate: str
    destination: str


def given_configuration(local: Local) -> Given:
    ws = new_workspace(local, "dash-config-forms")
    local.client.set_variable(ws, "zone", "a")
    schedule = local.client.create_schedule(ws, "rate(1 day)", "plan_only")["id"]
    source = new_workspace(local, "dash-config-src")
    candidate = new_workspace(local, "dash-config-cand")
    api(local, "POST", f"/workspaces/{ws}/run-triggers", {"source_workspace_id": source})
    destination = api(
        local,
        "POST",
        f"/workspaces/{ws}/notifications",
        {
            "name": "ops",
            "kind": "slack",
            "url": "https://hooks.slack.com/services/x",
            "events": ["applied"],
        },
    )["id"]
    return Given(ws, schedule, source, candidate, destination)


@dataclass(frozen=True)
class Form:
    path: str
    section: str
    valid: Callable[[Given], dict[str, str]]
    invalid: Callable[[Given], dict[str, str]]


FORMS = {
    "add variable": Form(
        "variables",
        "variables",
        lambda g: {"name": "added", "category": "terraform", "value": "x"},
        lambda g: {"name": "not a name", "category": "terraform", "value": "x"},
    ),
    "delete variable": Form(
        "variables/delete",
        "variables",
        lambda g: {"name": "zone", "category": "terraform"},
        lambda g: {"name": "zone", "category": "hcl"},
    ),
    "add schedule": Form(
        "schedules",
        "schedules",
        lambda g: {"expression": "rate(2 hours)", "kind": "refresh_only"},
        lambda g: {"expression": "every tuesday", "kind": "plan_only"},
    ),
    "pause schedule": Form(
        "schedules/pause",
        "schedules",
        lambda g: {"schedule_id": g.schedule, "paused": "yes"},
        lambda g: {"schedule_id": g.schedule, "paused": "maybe"},
    ),
    "delete schedule": Form(
        "schedules/delete",
        "schedules",
        lambda g: {"schedule_id": g.schedule},
        lambda g: {"schedule_id": ""},
    ),
    "add run trigger": Form(
        "run-triggers",
        "run-triggers",
        lambda g: {"source_workspace_id": g.candidate, "run_kind": "plan_only"},
        lambda g: {"source_workspace_id": g.ws, "run_kind": ""},
    ),
    "remove run trigger": Form(
        "run-triggers/remove",
        "run-triggers",
        lambda g: {"source_workspace_id": g.source},
        lambda g: {"source_workspace_id": ""},
    ),
    "add destination": Form(
        "notifications",
        "notifications",
        lambda g: {
            "name": "alerts",
            "kind": "slack",
            "url": "https://hooks.slack.com/services/y",
            "event_errored": "yes",
        },
        lambda g: {"name": "alerts", "kind": "slack", "url": "https://hooks.slack.com/y"},
    ),
    "delete destination": Form(
        "notifications/delete",
        "notifications",
        lambda g: {"destination_id": g.destination},
        lambda g: {"destination_id": ""},
    ),
}


@pytest.mark.parametrize("name", list(FORMS))
def test_each_form_works_for_an_admin_and_is_refused_otherwise_writing_nothing(
    local: Local, name: str
) -> None:
    form = FORMS[name]
    # Given a workspace with one of everything, an admin, a reader, and another
    # organization's admin
    given = given_configuration(local)
    ws = given.ws
    before = configuration(local, ws)
    admin, reader = signed_in(local), signed_in_as(local, "reader")
    other, _ = local.other_organization(unique("dash-config-other"))
    services = local.stack.services
    assert services is not None
    stranger = signed_in(local, services.workspaces.organization_id_of(other))
    valid, invalid = form.valid(given), form.invalid(given)

    # When a reader sends it with their own CSRF token
    refused = send(reader, local, ws, form.path, {**valid, "csrf": csrf_of(reader, local)})
    # Then the service refuses it, naming the permission
    assert refused.status_code == 403, refused.text
    assert "<strong>FORBIDDEN</strong>" in refused.text

    # When the admin sends it without the token, with a wrong one, or from elsewhere
    token = csrf_of(admin, local)
    for data, origin in (
        (valid, None),
        ({**valid, "csrf": "0" * 64}, None),
        ({**valid, "csrf": token}, "https://evil.example"),
    ):
        answer = send(admin, local, ws, form.path, data, origin)
        # Then it is refused before anything is read of it
        assert answer.status_code == 403, (origin, answer.text)
        assert "<strong>CSRF_REFUSED</strong>" in answer.text

    # When the admin sends it with invalid input
    answer = send(admin, local, ws, form.path, {**invalid, "csrf": token})
    # Then the error page says what is wrong
    assert answer.status_code == 422, answer.text
    assert 'class="error"' in answer.text

    # When another organization's admin sends it to this workspace
    foreign = send(stranger, local, ws, form.path, {**valid, "csrf": csrf_of(stranger, local)})
    # Then the workspace is not found, as an unknown one
    assert foreign.status_code == 404, foreign.text

    # And none of them wrote anything
    assert configuration(local, ws) == before

    # When the admin sends it as the page would
    done = send(admin, local, ws, form.path, {**valid, "csrf": token})
    # Then the browser goes back to its section, and the API reads the change
    assert done.status_code == 303, done.text
    assert done.headers["Location"] == f"/ui/workspaces/{ws}#{form.section}"
    assert configuration(local, ws) != before


def test_another_organizations_workspace_page_is_not_found(local: Local) -> None:
    # Given a workspace with a sensitive variable, and another organization's admin
    ws = new_workspace(local, "dash-config-tenant")
    local.client.set_variable(ws, "db_password", SECRET, sensitive=True)
    other, _ = local.other_organization(unique("dash-config-tenant-other"))
    services = local.stack.services
    assert services is not None
    stranger = signed_in(local, services.workspaces.organization_id_of(other))
    # When they open its page
    answer = stranger.get(f"{local.url}/ui/workspaces/{ws}", timeout=30)
    # Then it is not found, and shows nothing of it
    assert answer.status_code == 404, answer.text
    assert "db_password" not in answer.text


def test_the_sections_dynamodb_requests(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a workspace with something in each section: two variables, a variable set
    # applied by name, a schedule, a source and a dependent, a destination, a binding
    given = given_configuration(local)
    ws = given.ws
    local.client.set_variable(ws, "token", SECRET, sensitive=True)
    applied = local.client.create_variable_set(unique("dash-count"))
    local.client.apply_variable_set(applied["id"], ws)
    dependent = new_workspace(local, "dash-config-dep")
    api(local, "POST", f"/workspaces/{dependent}/run-triggers", {"source_workspace_id": ws})
    held_once(local, INSTALLATION, account="acme")
    local.client.bind_github(ws, repository="acme/count", branch="main", installation_id=4242)
    services = local.stack.services
    assert services is not None
    organization_id = services.workspaces.organization_id_of(local.organization)

    def read_as(permissions: frozenset[Permission]) -> list[str]:
        principal = Principal(
            kind=PrincipalKind.USER,
            id="counter",
            organization_id=organization_id,
            permissions=permissions,
            display="counter",
        )
        session = SimpleNamespace(principal=principal, csrf="x")
        workspace = workspace_of(ws)  # the page has read it already
        counted = DynamoDBRequests(monkeypatch)
        workspace_config.context(session, workspace)  # type: ignore[arg-type]
        monkeypatch.undo()
        return counted.operations

    # When the sections are read for a reader and for an admin
    reader = read_as(frozenset({Permission.ORGANIZATION_READ, Permission.WORKSPACE_READ}))
    admin = read_as(frozenset(Permission))

    # Then a reader's cost 16 requests: one read of the workspace by each section's
    # service (6), the variables, the organization's sets, the applied set and its
    # variables (2), the schedules, the trigger list, the dependents, a name per source
    # and dependent (2), the destinations and the binding; an admin's one more, the
    # listing of the workspaces that could become sources. (Counts, never timings.)
    assert len(reader) == 16, reader
    assert len(admin) == 17, admin
