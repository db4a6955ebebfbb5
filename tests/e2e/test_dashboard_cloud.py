"""A workspace's cloud settings changed from the dashboard, over real HTTP: the form on
the workspace page for admins only, the run API reading back what it wrote, stale and
invalid forms refused with nothing written, and the external ID in no page."""

from __future__ import annotations

import html
import logging
import re
from typing import Any

import pytest
import requests

from runplane.domain.identity import ROLES, Permission
from runplane.store import audit
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard import form_fields, signed_in, signed_in_as
from tests.e2e.test_managed_runs import new_workspace

PLAN = "arn:aws:iam::123456789012:role/runplane-plan"
APPLY = "arn:aws:iam::123456789012:role/deploy/runplane-apply"
OTHER = "arn:aws:iam::123456789012:role/runplane-other"
SECRET = "ext-id-dash-5c2f90e1"
GCP = "//iam.googleapis.com/projects/42/locations/global/workloadIdentityPools/ci/providers/rp"
GUID_A = "11111111-2222-3333-4444-555555555555"
GUID_B = "66666666-7777-8888-9999-000000000000"
# Every field of the form, empty: what a browser sends for a blank form.
BLANK = {
    "aws_plan_role_arn": "",
    "aws_apply_role_arn": "",
    "aws_external_id": "",
    "aws_session_duration": "",
    "aws_region": "",
    "gcp_audience": "",
    "azure_audience": "",
    "azure_client_id": "",
    "azure_tenant_id": "",
}


_INPUT = re.compile(r"<input\b([^>]*)>")
_ATTRIBUTE = re.compile(r'([a-z-]+)(?:="([^"]*)")?')


def sent_by_browser(page: str, form_id: str) -> dict[str, str]:
    """What a browser sends for the form as the page shows it: every named input with
    its value (empty when it has none), a checkbox only when it is checked."""
    start = page.index(f'id="{form_id}"')
    form = page[start : page.index("</form>", start)]
    sent = {}
    for tag in _INPUT.findall(form):
        attributes = {name: html.unescape(value) for name, value in _ATTRIBUTE.findall(tag)}
        if "name" not in attributes:
            continue
        if attributes.get("type") == "checkbox" and "checked" not in attributes:
            continue
        sent[attributes["name"]] = attributes.get("value", "")
    return sent


def page_of(browser: requests.Session, local: Local, ws: str) -> str:
    answer = browser.get(f"{local.url}/ui/workspaces/{ws}", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.text


def send(
    browser: requests.Session,
    local: Local,
    ws: str,
    data: dict[str, str],
    *,
    clear: bool = False,
    origin: str | None = None,
) -> requests.Response:
    """The form posted as a browser on the page would (from this origin by default)."""
    path = f"/ui/workspaces/{ws}/cloud-settings" + ("/clear" if clear else "")
    return browser.post(
        f"{local.url}{path}",
        data=data,
        headers={"Origin": origin or local.url},
        allow_redirects=False,
        timeout=30,
    )


def events_of(local: Local, ws: str) -> list[Any]:
    """The workspace's cloud settings audit events, oldest first."""
    services = local.stack.services
    assert services is not None
    org_id = services.workspaces.organization_id_of(local.organization)
    return [
        e
        for e in audit.organization_trail(org_id)
        if e.subject_id == ws and e.type.startswith("workspace.cloud_settings")
    ]


def test_an_admin_sets_the_settings_through_the_page_and_the_api_returns_them(
    local: Local, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="runplane")
    # Given a workspace with no cloud settings, and an admin on its page
    ws = new_workspace(local, "dash-cloud-set")
    browser = signed_in(local)
    page = page_of(browser, local, ws)
    assert 'id="cloud-form"' in page
    assert 'id="cloud-clear-form"' not in page
    assert 'id="remove_aws_external_id"' not in page
    fields = sent_by_browser(page, "cloud-form")
    assert fields == {**BLANK, "csrf": fields["csrf"], "expected_version": "0"}

    # When the form is sent with every setting, the external ID typed in
    answer = send(
        browser,
        local,
        ws,
        {
            **fields,
            "aws_plan_role_arn": PLAN,
            "aws_apply_role_arn": f" {APPLY} ",
            "aws_external_id": SECRET,
            "aws_session_duration": "7200",
            "aws_region": "eu-west-3",
            "gcp_audience": GCP,
            "azure_client_id": GUID_A,
            "azure_tenant_id": GUID_B.upper(),
        },
    )

    # Then the browser is sent back to the settings on the workspace page
    assert answer.status_code == 303, answer.text
    assert answer.headers["Location"] == f"/ui/workspaces/{ws}#cloud-credentials"
    # And the run API returns them (surrounding spaces trimmed, the Azure audience its
    # default), the external ID only as set
    read = local.client.cloud_settings(ws)
    assert read == {
        "workspace_id": ws,
        "aws_plan_role_arn": PLAN,
        "aws_apply_role_arn": APPLY,
        "aws_external_id_set": True,
        "aws_session_duration": 7200,
        "aws_region": "eu-west-3",
        "gcp_audience": GCP,
        "azure_audience": "api://AzureADTokenExchange",
        "azure_client_id": GUID_A,
        "azure_tenant_id": GUID_B,
        "version": 1,
        "updated_at": read["updated_at"],
        "updated_by": read["updated_by"],
    }
    # And the change is audited as the API's are, never with the external ID
    (event,) = events_of(local, ws)
    assert event.type == "workspace.cloud_settings_set"
    assert event.details["changed"].split(",")[:3] == [
        "aws_plan_role_arn",
        "aws_apply_role_arn",
        "aws_external_id",
    ]
    assert event.details["aws_external_id"] == "set"
    assert SECRET not in str(event.details)
    # And the page shows them, the external ID as set, and a form at the new version
    # that offers to remove it and shows it nowhere
    page = page_of(browser, local, ws)
    assert PLAN in page
    assert "external ID set" in page
    assert 'id="remove_aws_external_id"' in page
    assert 'id="cloud-clear-form"' in page
    assert '<input type="password" name="aws_external_id" id="aws_external_id" autocomplete' in page
    assert SECRET not in answer.text + page

    # And the form shows every setting but the external ID (empty: kept), a default
    # (the Azure audience) as an empty field
    fields = sent_by_browser(page, "cloud-form")
    assert fields == {
        "csrf": fields["csrf"],
        "expected_version": "1",
        "aws_plan_role_arn": PLAN,
        "aws_apply_role_arn": APPLY,
        "aws_external_id": "",
        "aws_session_duration": "7200",
        "aws_region": "eu-west-3",
        "gcp_audience": GCP,
        "azure_audience": "",
        "azure_client_id": GUID_A,
        "azure_tenant_id": GUID_B,
    }

    # When it is sent again as shown, but for the apply role and GCP audience emptied
    emptied = {**fields, "aws_apply_role_arn": "", "gcp_audience": ""}
    assert send(browser, local, ws, emptied).status_code == 303
    # Then the external ID is kept, and the emptied settings are unset, the rest as they were
    after = local.client.cloud_settings(ws)
    assert after == {
        **read,
        "aws_apply_role_arn": None,
        "gcp_audience": None,
        "version": 2,
        "updated_at": after["updated_at"],
    }

    # When its removal is ticked
    fields = sent_by_browser(page_of(browser, local, ws), "cloud-form")
    removed = {**fields, "remove_aws_external_id": "yes"}
    assert send(browser, local, ws, removed).status_code == 303
    # Then none is set any more, and the page no longer offers to remove one
    after = local.client.cloud_settings(ws)
    assert (after["version"], after["aws_external_id_set"]) == (3, False)
    assert 'id="remove_aws_external_id"' not in page_of(browser, local, ws)
    # And no log line of the stack (in this process) holds the external ID
    assert caplog.records
    assert SECRET not in caplog.text


def test_a_form_read_before_another_change_is_refused_and_writes_nothing(local: Local) -> None:
    # Given an admin's form read at version 0, and a change through the API since
    ws = new_workspace(local, "dash-cloud-stale")
    browser = signed_in(local)
    fields = form_fields(page_of(browser, local, ws), "cloud-form")
    before = local.client.put_cloud_settings(ws, {"aws_plan_role_arn": PLAN, "version": 0})
    assert before["version"] == 1

    # When the stale form is sent, or the stale clear
    answers = [
        send(browser, local, ws, {**fields, **BLANK, "aws_plan_role_arn": OTHER}),
        send(browser, local, ws, {**fields, **BLANK, "aws_external_id": SECRET}),
        send(browser, local, ws, fields, clear=True),
    ]

    # Then each is refused as a concurrent change, saying nothing was written
    for answer in answers:
        assert answer.status_code == 409, answer.text
        assert "<strong>CONCURRENT_CHANGE</strong>" in answer.text
        assert "are at version 1, not 0; nothing was written" in answer.text
        assert SECRET not in answer.text
    # And the settings are the API's, with its one audit event
    assert local.client.cloud_settings(ws) == before
    assert len(events_of(local, ws)) == 1


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        (
            {"aws_plan_role_arn": "arn:aws:iam::123:role/x"},
            "aws_plan_role_arn is not an IAM role ARN: it must read "
            "arn:PARTITION:iam::ACCOUNT:role/NAME",
        ),
        (
            {"aws_plan_role_arn": PLAN, "aws_session_duration": "two hours"},
            "aws_session_duration must be a whole number of seconds, 900 to 43200",
        ),
        (
            {"aws_plan_role_arn": PLAN, "aws_session_duration": "60"},
            "aws_session_duration must be 900 to 43200 seconds",
        ),
        (
            {"aws_plan_role_arn": "", "aws_apply_role_arn": APPLY},
            "aws_apply_role_arn needs aws_plan_role_arn",
        ),
        (
            {"aws_plan_role_arn": ""},
            "aws_external_id needs aws_plan_role_arn",
        ),
        (
            {"aws_plan_role_arn": PLAN, "aws_external_id": f"has spaces {SECRET}"},
            "aws_external_id must be 2 to 1224 characters",
        ),
        (
            {"aws_plan_role_arn": PLAN, "aws_external_id": SECRET, "remove_aws_external_id": "yes"},
            "type a new aws_external_id or remove the stored one, not both",
        ),
        (
            {"aws_plan_role_arn": PLAN, "azure_client_id": GUID_A},
            "azure_client_id needs azure_tenant_id",
        ),
        (
            {"aws_plan_role_arn": PLAN, "expected_version": ""},
            "the form does not say which version of the cloud settings it shows",
        ),
    ],
)
def test_an_invalid_form_shows_the_sentence_and_writes_nothing(
    local: Local, change: dict[str, str], sentence: str
) -> None:
    # Given a workspace whose settings hold a plan role and an external ID, and its form
    ws = new_workspace(local, "dash-cloud-bad")
    before = local.client.put_cloud_settings(
        ws, {"aws_plan_role_arn": OTHER, "aws_external_id": SECRET}
    )
    browser = signed_in(local)
    fields = sent_by_browser(page_of(browser, local, ws), "cloud-form")

    # When the form is sent with a value the settings' rules refuse
    answer = send(browser, local, ws, {**fields, **change})

    # Then the error page shows the rule's sentence, never the external ID
    assert answer.status_code == 422, answer.text
    assert "<strong>INVALID_INPUT</strong>" in answer.text
    assert sentence in answer.text
    assert SECRET not in answer.text
    # And nothing was written
    assert local.client.cloud_settings(ws) == before
    assert len(events_of(local, ws)) == 1


def test_a_reader_of_the_settings_sees_no_form_and_a_forged_one_is_refused(
    local: Local,
) -> None:
    # Given a workspace with settings
    ws = new_workspace(local, "dash-cloud-who")
    before = local.client.put_cloud_settings(ws, {"aws_plan_role_arn": PLAN})
    # And an operator (every role's permission but the admin's), signed in
    operator = signed_in_as(local, "operator")

    # When the operator opens the workspace page
    page = page_of(operator, local, ws)

    # Then the settings are shown, read-only: no form, no clear button
    assert 'id="cloud-credentials"' in page
    assert PLAN in page
    for absent in ('id="cloud-form"', 'id="cloud-clear-form"', 'id="cloud-edit"'):
        assert absent not in page

    # When the operator forges the forms with their own session's CSRF token
    token = form_fields(page, "logout-form")["csrf"]
    forged = [
        send(operator, local, ws, {**BLANK, "csrf": token, "expected_version": "1"}),
        send(operator, local, ws, {"csrf": token, "expected_version": "1"}, clear=True),
    ]

    # Then the service refuses each, naming the permission
    for answer in forged:
        assert answer.status_code == 403, answer.text
        assert "<strong>FORBIDDEN</strong>" in answer.text
        assert "credentials:manage" in answer.text

    # When another organization's admin sends them to this workspace
    other, _ = local.other_organization(f"dash-cloud-other-{ws[-6:]}")
    services = local.stack.services
    assert services is not None
    stranger = signed_in(local, services.workspaces.organization_id_of(other))
    token = form_fields(stranger.get(f"{local.url}/", timeout=30).text, "logout-form")["csrf"]
    foreign = [
        send(stranger, local, ws, {**BLANK, "csrf": token, "expected_version": "1"}),
        send(stranger, local, ws, {"csrf": token, "expected_version": "1"}, clear=True),
    ]
    # Then the workspace is not found, as an unknown one
    for answer in foreign:
        assert answer.status_code == 404, answer.text

    # And nothing changed
    assert local.client.cloud_settings(ws) == before
    assert len(events_of(local, ws)) == 1


def test_a_form_without_the_right_csrf_token_or_from_elsewhere_writes_nothing(
    local: Local,
) -> None:
    # Given a workspace with settings and an admin holding its forms
    ws = new_workspace(local, "dash-cloud-csrf")
    before = local.client.put_cloud_settings(ws, {"aws_plan_role_arn": PLAN})
    browser = signed_in(local)
    fields = form_fields(page_of(browser, local, ws), "cloud-form")
    change = {**fields, **BLANK, "aws_plan_role_arn": OTHER, "aws_external_id": SECRET}
    without = {k: v for k, v in change.items() if k != "csrf"}

    # When either form is sent without the token, with a wrong one, or from another origin
    for clear in (False, True):
        attempts: list[tuple[dict[str, str], str | None]] = [
            (without, None),
            ({**change, "csrf": "0" * 64}, None),
            (change, "https://evil.example"),
            (change, "null"),
        ]
        for data, origin in attempts:
            answer = send(browser, local, ws, data, clear=clear, origin=origin)
            # Then each is refused before anything is read of it
            assert answer.status_code == 403, (clear, origin, answer.text)
            assert "<strong>CSRF_REFUSED</strong>" in answer.text
            assert SECRET not in answer.text

    # And nothing changed
    assert local.client.cloud_settings(ws) == before
    assert len(events_of(local, ws)) == 1


def test_clear_removes_every_setting_at_the_next_version(local: Local) -> None:
    # Given a workspace with AWS, GCP and Azure settings, and an admin on its page
    ws = new_workspace(local, "dash-cloud-clear")
    local.client.put_cloud_settings(
        ws,
        {
            "aws_plan_role_arn": PLAN,
            "aws_external_id": SECRET,
            "gcp_audience": GCP,
            "azure_client_id": GUID_A,
            "azure_tenant_id": GUID_B,
        },
    )
    browser = signed_in(local)
    fields = form_fields(page_of(browser, local, ws), "cloud-clear-form")
    assert fields["expected_version"] == "1"

    # When the clear button's form is sent
    answer = send(browser, local, ws, fields, clear=True)

    # Then the browser goes back to the settings, and none is left, at the next version
    assert answer.status_code == 303, answer.text
    assert answer.headers["Location"] == f"/ui/workspaces/{ws}#cloud-credentials"
    read = local.client.cloud_settings(ws)
    assert read["version"] == 2
    assert [read[name] for name in ("aws_plan_role_arn", "gcp_audience", "azure_client_id")] == [
        None,
        None,
        None,
    ]
    assert read["aws_external_id_set"] is False
    assert [e.type for e in events_of(local, ws)] == [
        "workspace.cloud_settings_set",
        "workspace.cloud_settings_cleared",
    ]
    # And the page says there are none, and offers the form again but no clear button
    page = page_of(browser, local, ws)
    assert "None: runs of this workspace get no cloud credentials." in page
    assert form_fields(page, "cloud-form")["expected_version"] == "2"
    assert 'id="cloud-clear-form"' not in page
    assert SECRET not in answer.text + page


def test_the_permission_not_the_role_name_decides_the_form(local: Local) -> None:
    # Given a session of a reader also granted credentials:manage
    services = local.stack.services
    assert services is not None
    organization_id = services.workspaces.organization_id_of(local.organization)
    granted = ROLES["reader"] | {Permission.CREDENTIALS_MANAGE}
    code = services.web_sessions.issue_login_code(
        organization_id, "reader", granted, created_by="tests"
    )
    browser = requests.Session()
    login = browser.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    assert login.status_code == 303, login.text
    ws = new_workspace(local, "dash-cloud-granted")

    # When they open the workspace page and send the form
    page = page_of(browser, local, ws)
    fields = form_fields(page, "cloud-form")
    answer = send(browser, local, ws, {**fields, **BLANK, "gcp_audience": GCP})

    # Then the form was there and the change is made
    assert answer.status_code == 303, answer.text
    assert local.client.cloud_settings(ws)["gcp_audience"] == GCP
