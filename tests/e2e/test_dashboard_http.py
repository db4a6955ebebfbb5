"""The dashboard's answers as a browser receives them over HTTP: headers on every kind
of answer, trailing slashes, HEAD, refusals without a session, forms whose bodies
arrive base64-encoded, and the run links Terraform prints."""

from __future__ import annotations

import requests

from runplane.domain.run import RunStatus
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard import form_fields, signed_in
from tests.e2e.test_managed_runs import HELLO, new_workspace

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
HTML = "text/html; charset=utf-8"
RUN_STATUSES = {status.value for status in RunStatus}


def assert_page_headers(answer: requests.Response, content_type: str = HTML) -> None:
    assert answer.headers["Content-Type"] == content_type
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers[name] == value, name


def test_signed_in_pages_answer_with_and_without_trailing_slashes(local: Local) -> None:
    # Given a signed-in browser and a workspace
    ws = new_workspace(local, "dash-slash")
    browser = signed_in(local)

    # When its pages are read with and without trailing slashes, and with a query
    answers = {
        path: browser.get(f"{local.url}{path}", allow_redirects=False, timeout=30)
        for path in ("/", "//", "/ui", "/ui/", "/?from=bookmark", f"/ui/workspaces/{ws}/")
    }

    # Then each is the page, with the security headers
    for path, answer in answers.items():
        assert answer.status_code == 200, (path, answer.text)
        assert_page_headers(answer)
        assert "Set-Cookie" not in answer.headers
    assert "<h1>Workspaces</h1>" in answers["/ui/"].text
    assert "<h1>dash-slash-" in answers[f"/ui/workspaces/{ws}/"].text


def test_head_answers_as_get_without_a_body(local: Local) -> None:
    # Given a signed-in browser
    browser = signed_in(local)

    # When a page and a static file are asked for with HEAD
    page = browser.head(f"{local.url}/ui", allow_redirects=False, timeout=30)
    style = browser.head(f"{local.url}/ui/static/dashboard.css", timeout=30)
    anonymous = requests.head(f"{local.url}/", allow_redirects=False, timeout=30)

    # Then each answers as its GET would, with no body
    assert (page.status_code, page.content) == (200, b"")
    assert int(page.headers["Content-Length"]) > 0
    assert_page_headers(page)
    assert (style.status_code, style.content) == (200, b"")
    assert_page_headers(style, "text/css; charset=utf-8")
    assert anonymous.status_code == 303
    assert anonymous.headers["Location"] == "/ui/sign-in"


def test_without_a_session_pages_redirect_to_sign_in_and_forms_are_refused(
    local: Local,
) -> None:
    # Given no session
    # When pages are read
    reads = [
        requests.get(f"{local.url}{path}", allow_redirects=False, timeout=30)
        for path in ("/ui/github", "/ui/runs/run-x/logs/plan?offset=0", "/ui/workspaces/ws-x/")
    ]
    # And forms are sent
    sends = [
        requests.post(f"{local.url}{path}", data={"csrf": "x"}, allow_redirects=False, timeout=30)
        for path in (
            "/ui/logout",
            "/ui/runs/run-x/approve",
            "/ui/runs/run-x/reject/",
            "/ui/runs/run-x/cancel",
            "/ui/runs/run-x/recover",
            "/ui/github/connect",
            "/ui/github/installations/42/release",
            "/ui/workspaces/ws-x/cloud-settings",
            "/ui/workspaces/ws-x/cloud-settings/clear/",
            "/ui/workspaces/ws-x/drift/remediate",
        )
    ]

    # Then every read is sent to the sign-in notice, with no body
    for answer in reads:
        assert answer.status_code == 303
        assert answer.headers["Location"] == "/ui/sign-in"
        assert answer.content == b""
        assert_page_headers(answer)
    # And every form is refused as unauthenticated, with no way back to a run
    for answer in sends:
        assert answer.status_code == 401
        assert_page_headers(answer)
        assert "<strong>UNAUTHENTICATED</strong>: sign in to use the dashboard" in answer.text
        assert 'id="back-to-run"' not in answer.text


def test_a_refusal_on_a_runs_path_links_back_to_the_run(local: Local) -> None:
    # Given a signed-in browser
    browser = signed_in(local)
    token = form_fields(browser.get(f"{local.url}/", timeout=30).text, "logout-form")["csrf"]

    # When it decides a run that does not exist
    answer = browser.post(
        f"{local.url}/ui/runs/run-missing/approve",
        data={"csrf": token},
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )

    # Then it is not found, with a link back to the run's page
    assert answer.status_code == 404
    assert_page_headers(answer)
    assert "<strong>NOT_FOUND</strong>" in answer.text
    assert '<a href="/ui/runs/run-missing" id="back-to-run">' in answer.text


def test_a_form_whose_body_is_not_utf8_is_read_from_base64(local: Local) -> None:
    # Given a signed-in browser with its sign-out form, and another cookie beside the session
    browser = signed_in(local)
    browser.cookies.set("theme", "dark")
    token = form_fields(browser.get(f"{local.url}/", timeout=30).text, "logout-form")["csrf"]

    # When the form is sent with a byte that is not UTF-8 (the gateway passes it as base64)
    out = browser.post(
        f"{local.url}/ui/logout/",
        data=f"csrf={token}&note=\xff".encode("latin-1"),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )

    # Then the form is read, and the session ends with the cookie cleared
    assert out.status_code == 303, out.text
    assert out.headers["Location"] == "/ui/sign-in"
    assert out.content == b""
    assert_page_headers(out)
    cleared = out.headers["Set-Cookie"]
    assert cleared.startswith("runplane_session=")
    assert {"Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=0"} <= {
        flag.strip() for flag in cleared.split(";")[1:]
    }
    again = browser.get(f"{local.url}/", allow_redirects=False, timeout=30)
    assert again.status_code == 303


def test_the_live_log_answers_json_with_the_pages_headers(local: Local) -> None:
    # Given a plan-only run and a signed-in browser
    run = local.client.create_run(new_workspace(local, "dash-json"), HELLO, kind="plan_only")
    browser = signed_in(local)
    base = f"{local.url}/ui/runs/{run['id']}/logs"

    # When its live log is read, with a trailing slash, and with an offset that is no number
    answer = browser.get(f"{base}/plan/?offset=0", timeout=30)
    bad = browser.get(f"{base}/plan?offset=x", timeout=30)

    # Then the read is JSON with the security headers, and the bad offset a refusal page
    assert answer.status_code == 200, answer.text
    assert_page_headers(answer, "application/json")
    assert answer.json()["status"] in RUN_STATUSES
    assert bad.status_code == 422
    assert_page_headers(bad)
    assert "<strong>INVALID_INPUT</strong>: offset is a byte position (0 or more)" in bad.text
    assert f'<a href="/ui/runs/{run["id"]}" id="back-to-run">' in bad.text
    local.client.watch(run["id"], timeout=180)


def test_terraforms_run_link_redirects_to_the_run_page_whether_or_not_the_run_exists(
    local: Local,
) -> None:
    # Given run links as Terraform's remote backend prints them, for a run that does not
    # exist (the run page, not the link, says so to whoever may know)
    base = f"{local.url}/app/{local.organization}/some_workspace-1/runs"

    # When they are read without a session, with and without a trailing slash
    answers = [
        requests.get(f"{base}/{path}", allow_redirects=False, timeout=30)
        for path in ("run-missing", "run-missing/")
    ]

    # Then each is a redirect to the run page, with no body, no cookie and the page headers
    for answer in answers:
        assert answer.status_code == 302, answer.text
        assert answer.headers["Location"] == "/ui/runs/run-missing"
        assert answer.content == b""
        assert "Set-Cookie" not in answer.headers
        assert_page_headers(answer)

    # When a signed-in browser follows one
    followed = signed_in(local).get(f"{base}/run-missing", timeout=30)

    # Then it ends on the run page's own answer: no such run
    assert followed.url == f"{local.url}/ui/runs/run-missing"
    assert followed.status_code == 404
    assert "<strong>NOT_FOUND</strong>" in followed.text


def test_a_run_link_with_a_malformed_id_or_name_is_the_not_found_page(local: Local) -> None:
    # Given run links that no run link Terraform prints can be
    org = local.organization
    paths = (
        f"/app/{org}/ws/runs/run_1",
        f"/app/{org}/ws/runs/run.1",
        f"/app/{org}/ws/runs/{'r' * 65}",
        f"/app/{org}/ws.1/runs/run-1",
        f"/app/{org}/ws/runs/run-1/extra",
        f"/app/{org}/ws/runs",
        f"/app/{org}/ws/run/run-1",
        "/app/",
    )

    # When each is read
    answers = {path: requests.get(f"{local.url}{path}", timeout=30) for path in paths}

    # Then each is the dashboard's not-found page, never a redirect
    for path, answer in answers.items():
        assert answer.status_code == 404, (path, answer.text)
        assert answer.history == [], path
        assert_page_headers(answer)
        assert "<strong>NOT_FOUND</strong>" in answer.text, path
