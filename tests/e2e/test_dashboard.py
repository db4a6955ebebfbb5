"""The dashboard over real HTTP: sign-in by one-time link, cookie sessions, CSRF,
and the run page driving an approval to Applied."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import requests

from runplane.domain.identity import Permission
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, config, new_workspace

_HIDDEN = re.compile(r'<input type="hidden" name="([a-z0-9_]+)" value="([^"]*)">')


def signed_in(local: Local, organization_id: str | None = None) -> requests.Session:
    """A browser-like session signed in through a fresh login link."""
    browser = requests.Session()
    if organization_id is None:
        link = local.stack.login_link()
    else:
        services = local.stack.services
        assert services is not None
        code = services.web_sessions.issue_login_code(
            organization_id, "admin", frozenset(Permission), created_by="tests"
        )
        link = f"{local.url}/ui/login?code={code}"
    answer = browser.get(link, allow_redirects=False, timeout=30)
    assert answer.status_code == 303, answer.text
    return browser


def form_fields(page: str, form_id: str) -> dict[str, str]:
    start = page.index(f'id="{form_id}"')
    form = page[start : page.index("</form>", start)]
    return {name: html.unescape(value) for name, value in _HIDDEN.findall(form)}


def awaiting_run(local: Local, prefix: str) -> dict[str, Any]:
    ws = new_workspace(local, prefix)
    run = local.client.create_run(ws, HELLO)
    return local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)


def test_a_login_link_signs_in_once_with_a_strict_http_only_cookie(local: Local) -> None:
    # Given a login link printed for the admin
    link = local.stack.login_link()

    # When it is opened
    first = requests.get(link, allow_redirects=False, timeout=30)

    # Then it sets a session cookie with the right flags and redirects to the workspaces
    assert first.status_code == 303
    assert first.headers["Location"] == "/"
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith("runplane_session=")
    flags = [flag.strip() for flag in cookie.split(";")[1:]]
    assert {"Path=/", "HttpOnly", "SameSite=Strict"} <= set(flags)
    assert any(flag.startswith("Max-Age=") and int(flag[8:]) > 0 for flag in flags)
    # (plain HTTP on loopback: Secure would stop the browser from sending it back)
    assert "Secure" not in flags
    secret = first.cookies["runplane_session"]
    assert secret not in link
    page = requests.get(
        f"{local.url}/", cookies={"runplane_session": secret}, allow_redirects=False, timeout=30
    )
    assert page.status_code == 200
    assert "<h1>Workspaces</h1>" in page.text

    # And a second use of the same link is refused and opens nothing
    second = requests.get(link, allow_redirects=False, timeout=30)
    assert second.status_code == 403
    assert "LOGIN_LINK_REFUSED" in second.text
    assert "Set-Cookie" not in second.headers


def test_pages_need_a_session_and_sign_out_ends_it(local: Local) -> None:
    # Given no session, or a made-up one
    for cookies in ({}, {"runplane_session": "made-up"}):
        # When a page is requested
        for path in ("/", "/ui/workspaces/ws-x", "/ui/runs/run-x"):
            answer = requests.get(
                f"{local.url}{path}", cookies=cookies, allow_redirects=False, timeout=30
            )
            # Then the browser is sent to the sign-in notice
            assert answer.status_code == 303, path
            assert answer.headers["Location"] == "/ui/sign-in"
    notice = requests.get(f"{local.url}/ui/sign-in", timeout=30)
    assert notice.status_code == 401
    assert 'id="sign-in-notice"' in notice.text

    # Given a signed-in browser
    browser = signed_in(local)
    page = browser.get(f"{local.url}/", timeout=30).text
    token = form_fields(page, "logout-form")["csrf"]
    # When it signs out
    out = browser.post(
        f"{local.url}/ui/logout", data={"csrf": token}, allow_redirects=False, timeout=30
    )
    # Then the session is gone on the server, not only in the browser
    assert out.status_code == 303
    assert "Max-Age=0" in out.headers["Set-Cookie"]
    again = browser.get(f"{local.url}/", allow_redirects=False, timeout=30)
    assert again.status_code == 303


def test_approving_through_the_run_page_applies_the_run(local: Local) -> None:
    # Given a run awaiting approval and a signed-in browser on its page
    run = awaiting_run(local, "dash-approve")
    browser = signed_in(local)
    page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text

    # Then the page shows the header's source identity and the approval bar
    binding = run["approval"]["binding"]
    assert 'id="approval-bar"' in page
    assert f'<code id="plan-digest">{binding["plan_sha256"]}</code>' in page
    assert run["input"]["configuration_sha256"] in page
    assert run["approval"]["expires_at"] in page
    assert page.index('id="run-header"') < page.index('id="stage-timeline"')
    fields = form_fields(page, "approve-form")
    assert fields["plan_sha256"] == binding["plan_sha256"]
    assert '<button type="submit">Approve</button>' in page
    assert 'id="plan-log"' in page

    # When the approve form is sent, from this origin
    answer = browser.post(
        f"{local.url}/ui/runs/{run['id']}/approve",
        data=fields,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )

    # Then the run applies, and its page reads Applied with both logs
    assert answer.status_code == 303, answer.text
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "succeeded"
    assert done["approval"]["status"] == "approved"
    final = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text
    assert '<span class="label" id="run-label">Applied</span>' in final
    assert 'id="apply-log"' in final
    assert "Apply complete!" in final
    assert 'id="approve-form"' not in final


def test_a_post_without_the_right_csrf_token_or_from_elsewhere_changes_nothing(
    local: Local,
) -> None:
    # Given a run awaiting approval and a signed-in browser holding its approve form
    run = awaiting_run(local, "dash-csrf")
    browser = signed_in(local)
    page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text
    fields = form_fields(page, "approve-form")
    url = f"{local.url}/ui/runs/{run['id']}/approve"
    without = {k: v for k, v in fields.items() if k != "csrf"}

    # When it is sent without the token, with a wrong one, or from another origin
    attempts = [
        (without, {}),
        ({**fields, "csrf": "0" * 64}, {}),
        ({**fields, "csrf": fields["csrf"][:-1] + "é"}, {}),
        (fields, {"Origin": "https://evil.example"}),
        (fields, {"Origin": "null"}),
    ]
    for data, headers in attempts:
        answer = browser.post(url, data=data, headers=headers, allow_redirects=False, timeout=30)
        # Then each is refused with a typed code
        assert answer.status_code == 403, (data, headers)
        assert "CSRF_REFUSED" in answer.text

    # And the run is unchanged
    after = local.client.review(run["id"])
    assert after["status"] == "awaiting_approval"
    assert after["approval"]["status"] == "waiting"
    local.client.cancel(run["id"])


def test_another_organizations_run_and_workspace_are_not_found(local: Local) -> None:
    # Given a run of the default organization, and a browser signed in to another one
    ws = new_workspace(local, "dash-tenant")
    run = local.client.create_run(ws, HELLO, kind="plan_only")
    other, _ = local.other_organization("dash-other")
    assert local.stack.services is not None
    browser = signed_in(local, local.stack.services.workspaces.organization_id_of(other))

    # When it asks for them, or tries to approve the run
    run_page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30)
    ws_page = browser.get(f"{local.url}/ui/workspaces/{ws}", timeout=30)
    token = form_fields(browser.get(f"{local.url}/", timeout=30).text, "logout-form")["csrf"]
    decide = browser.post(
        f"{local.url}/ui/runs/{run['id']}/approve", data={"csrf": token}, timeout=30
    )

    # Then each is answered exactly like a missing one
    for answer in (run_page, ws_page, decide):
        assert answer.status_code == 404
        assert "NOT_FOUND" in answer.text
    # And its own workspace list does not show the other organization's workspace
    assert ws not in browser.get(f"{local.url}/", timeout=30).text
    local.client.watch(run["id"], timeout=180)


def test_html_in_a_workspace_description_and_a_log_line_is_escaped(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace whose description and run log carry markup
    ws = new_workspace(local, "dash-escape")
    services = local.stack.services
    assert services is not None
    admin = services.identity.authenticate(f"Bearer {local.admin_token}")
    marker = "<script>alert('description')</script>"
    services.workspaces.update(admin, services.workspaces.by_id(admin, ws), description=marker)
    # (variable values are redacted in logs: the markup is a literal of the configuration)
    text = (HELLO / "main.tf").read_text(encoding="utf-8")
    assert '"platform team"' in text
    markup = config(tmp_path, text.replace('"platform team"', '"<img src=x onerror=alert(1)>"'))
    run = local.client.create_run(ws, markup, kind="plan_only")
    local.client.watch(run["id"], timeout=180)
    browser = signed_in(local)

    # When the workspace list, the workspace and the run page are read
    pages = [
        browser.get(f"{local.url}{path}", timeout=30).text
        for path in ("/", f"/ui/workspaces/{ws}", f"/ui/runs/{run['id']}")
    ]

    # Then the markup is shown as text, never as markup
    for page in pages[:2]:
        assert marker not in page
        assert "&lt;script&gt;alert(" in page
    assert "<img" not in pages[2]
    assert "hello, &lt;img src=x onerror=alert(1)&gt;" in pages[2]


def test_a_run_past_its_approval_deadline_shows_the_expiry_and_no_decision(
    local: Local,
) -> None:
    # Given a run whose approval window of 3 seconds ran out
    ws = new_workspace(local, "dash-expired")
    local.client.set_approval_window(ws, 3)
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    expired = local.client.watch(run["id"], timeout=60)
    assert expired["status"] == "expired"
    browser = signed_in(local)

    # When its page is read
    page = browser.get(f"{local.url}/ui/runs/{run['id']}", timeout=30).text

    # Then it shows the deadline as passed and offers no decision
    assert 'id="deadline-passed"' in page
    assert expired["approval"]["expires_at"] in page
    assert 'id="approve-form"' not in page
    assert '<span class="label" id="run-label">Expired</span>' in page
