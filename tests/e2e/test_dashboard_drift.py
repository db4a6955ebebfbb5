"""Drift remediated from the dashboard, over real HTTP: the workspace page shows a
drift a schedule found, with the two remediation forms for those who may create
runs; a form starts the run the run API would, and refusals create nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import requests

from tests.e2e.conftest import Local
from tests.e2e.test_dashboard import form_fields, signed_in, signed_in_as
from tests.e2e.test_dashboard_cloud import page_of
from tests.e2e.test_managed_runs import HELLO, new_workspace
from tests.e2e.test_schedules import _fire

FORMS = ('id="drift-reconcile-form"', 'id="drift-accept-form"')


def remediate(
    browser: requests.Session, local: Local, ws: str, data: dict[str, str]
) -> requests.Response:
    """The remediation form posted as a browser on the workspace page would."""
    return browser.post(
        f"{local.url}/ui/workspaces/{ws}/drift/remediate",
        data=data,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )


def drifted_workspace(local: Local) -> tuple[str, str]:
    """A workspace whose scheduled plan found changes (its configuration was never
    applied), and that plan's run; the schedule is deleted once it fired."""
    client = local.client
    ws = new_workspace(local, "dash-drift")
    client.upload_configuration(ws, HELLO)
    schedule = client.create_schedule(ws, "0 3 * * *")
    at = datetime.fromisoformat(schedule["next_fire_at"]) + timedelta(seconds=30)
    found = _fire(local, at, ws)
    client.delete_schedule(schedule["id"])
    done = client.watch(found, timeout=120)
    assert (done["status"], done["plan"]["has_changes"]) == ("succeeded", True), done
    assert client.workspace(ws)["drift"]["drifted"] is True
    return ws, found


def test_drift_is_remediated_from_the_workspace_page_by_those_who_may_create_runs(
    local: Local,
) -> None:
    # Given a workspace whose last scheduled plan found drift
    ws, drift_run = drifted_workspace(local)
    runs_before = [r["id"] for r in local.client.list_runs(ws)]

    # When a reader opens the workspace page
    reader = signed_in_as(local, "reader")
    page = page_of(reader, local, ws)

    # Then the drift is shown, with the run that found it and its counts, but no form
    assert 'id="drift"' in page
    assert f'<a href="/ui/runs/{drift_run}" id="drift-run">' in page
    assert "1 to add, 0 to change, 0 to destroy" in page
    for form in FORMS:
        assert form not in page

    # When the reader forges the form with their own session's CSRF token
    token = form_fields(page, "logout-form")["csrf"]
    forged = remediate(reader, local, ws, {"csrf": token, "remedy": "reconcile"})

    # Then the service refuses it, naming the permission
    assert forged.status_code == 403, forged.text
    assert "<strong>FORBIDDEN</strong>" in forged.text
    assert "run:create" in forged.text

    # When an admin opens the page
    admin = signed_in(local)
    page = page_of(admin, local, ws)

    # Then both forms are there, each naming its remedy
    for form in FORMS:
        assert form in page
    assert "Reconcile (apply the configuration)" in page
    assert "Accept (refresh-only apply)" in page
    accept = form_fields(page, "drift-accept-form")
    assert accept["remedy"] == "accept"

    # When the admin sends the form without its CSRF token, or with a remedy there is not
    without = remediate(admin, local, ws, {"remedy": "accept"})
    unknown = remediate(admin, local, ws, {**accept, "remedy": "ignore"})

    # Then each is refused
    assert without.status_code == 403, without.text
    assert "<strong>CSRF_REFUSED</strong>" in without.text
    assert unknown.status_code == 422, unknown.text
    assert "remedy must be one of reconcile, accept" in unknown.text
    # And no refusal so far created a run
    assert [r["id"] for r in local.client.list_runs(ws)] == runs_before

    # When the admin sends the accept form as the page has it
    answer = remediate(admin, local, ws, accept)

    # Then the browser is sent to the new run's page
    assert answer.status_code == 303, answer.text
    location = answer.headers["Location"]
    assert location.startswith("/ui/runs/run-")
    run_id = location.removeprefix("/ui/runs/")
    assert [r["id"] for r in local.client.list_runs(ws)] == [run_id, *runs_before]
    # And its review says which drift it resolves, and how: a refresh-only plan and apply
    review = local.client.review(run_id)
    assert review["remediation"] == {"remedy": "accept", "drift_run_id": drift_run}
    assert (review["kind"], review["input"]["options"]["refresh_only"]) == (
        "plan_and_apply",
        True,
    )
    # And its page links to the run that found the drift and lists refresh-only
    run_page = admin.get(f"{local.url}{location}", timeout=30)
    assert run_page.status_code == 200, run_page.text
    assert f'<a href="/ui/runs/{drift_run}" id="remediated-drift-run">' in run_page.text
    assert "<strong>accepting</strong> it (refresh-only apply)" in run_page.text
    assert "<strong>refresh-only</strong>: the real world is written into the state" in (
        run_page.text
    )
    assert 'id="destroy-banner"' not in run_page.text
    local.client.cancel(run_id)
    assert local.client.watch(run_id, timeout=120)["status"] == "canceled"

    # When Terraform's link to the run that found the drift is read without a session
    name = local.client.workspace(ws)["name"]
    link = f"{local.url}/app/{local.organization}/{name}/runs/{drift_run}"
    anonymous = requests.get(link, allow_redirects=False, timeout=30)

    # Then it is the redirect a link to a missing run gets: nothing says the run exists
    assert (anonymous.status_code, anonymous.headers["Location"]) == (
        302,
        f"/ui/runs/{drift_run}",
    )
    assert anonymous.content == b""
    # And followed by the admin's browser it is the run's page
    followed = admin.get(link, timeout=30)
    assert (followed.status_code, followed.url) == (200, f"{local.url}/ui/runs/{drift_run}")
    assert f'data-run="{drift_run}"' in followed.text


def test_without_drift_the_page_has_no_forms_and_a_sent_one_is_refused(local: Local) -> None:
    # Given a workspace no schedule has checked, and an admin on its page
    ws = new_workspace(local, "dash-no-drift")
    admin = signed_in(local)
    page = page_of(admin, local, ws)

    # Then the page shows no drift and no remediation form
    assert 'id="drift"' not in page
    for form in FORMS:
        assert form not in page

    # When the admin sends the form anyway
    token = form_fields(page, "logout-form")["csrf"]
    answer = remediate(admin, local, ws, {"csrf": token, "remedy": "reconcile"})

    # Then it is refused as a conflict, on the error page, and no run is created
    assert answer.status_code == 409, answer.text
    assert "<strong>NO_DRIFT</strong>" in answer.text
    assert "has no drift to remediate" in answer.text
    assert local.client.list_runs(ws) == []


def test_an_auto_destroy_is_postponed_from_the_page_only_by_those_who_may_update(
    local: Local,
) -> None:
    # Given a workspace whose auto-destroy is due in two days
    ws = new_workspace(local, "dash-auto-destroy")
    due = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    local.client.set_auto_destroy(ws, {"destroy_at": due.isoformat()})

    # When a reader opens the workspace page and sends the postpone form anyway
    reader = signed_in_as(local, "reader")
    page = page_of(reader, local, ws)
    token = form_fields(page, "logout-form")["csrf"]
    refused = reader.post(
        f"{local.url}/ui/workspaces/{ws}/auto-destroy/postpone",
        data={"csrf": token},
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )

    # Then the page shows when it is due without the button, the form is refused, and
    # nothing moved
    assert f'destroys everything it manages <time datetime="{due.isoformat()}"' in page
    assert 'id="auto-destroy-postpone-form"' not in page
    assert refused.status_code == 403, refused.text
    assert local.client.auto_destroy(ws)["due_at"] == due.isoformat()

    # When an admin sends it without its CSRF token, then it is refused too
    admin = signed_in(local)
    forged = admin.post(
        f"{local.url}/ui/workspaces/{ws}/auto-destroy/postpone",
        data={},
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )
    assert forged.status_code == 403, forged.text
    assert local.client.auto_destroy(ws)["postponed_until"] is None

    # When the admin presses the page's button, then it is due a day later
    page = page_of(admin, local, ws)
    fields = form_fields(page, "auto-destroy-postpone-form")
    moved = admin.post(
        f"{local.url}/ui/workspaces/{ws}/auto-destroy/postpone",
        data=fields,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )
    assert moved.status_code == 303
    assert moved.headers["Location"].endswith(f"/ui/workspaces/{ws}#auto-destroy")
    assert local.client.auto_destroy(ws)["due_at"] == (due + timedelta(days=1)).isoformat()
