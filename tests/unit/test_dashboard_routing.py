"""Which requests reach a dashboard page: methods, path shapes, trailing slashes and
static files, answered before any session or service is read."""

from __future__ import annotations

from typing import Any

import pytest

from functions.dashboard.app import handler
from functions.dashboard.assets import asset

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


def request(method: str, path: str) -> dict[str, Any]:
    """What a browser receives for ``method path``, sent as API Gateway sends it."""
    event = {
        "resource": "/ui/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {"Host": "runplane.example", "Accept": "text/html"},
        "multiValueHeaders": {"Host": ["runplane.example"], "Accept": ["text/html"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {"path": path, "httpMethod": method, "stage": "prod"},
        "body": None,
        "isBase64Encoded": False,
    }
    return handler(event, None)


def headers(response: dict[str, Any]) -> dict[str, list[str]]:
    """Every header the response sends, each with all its values (API Gateway sends
    those of ``headers`` and ``multiValueHeaders`` both)."""
    sent = {name: [value] for name, value in (response.get("headers") or {}).items()}
    for name, values in (response.get("multiValueHeaders") or {}).items():
        sent.setdefault(name, []).extend(v for v in values if v not in sent.get(name, []))
    return sent


def assert_not_found(response: dict[str, Any], public_id: str, back: str | None = None) -> None:
    assert response["statusCode"] == 404
    sent = headers(response)
    assert sent["Content-Type"] == ["text/html; charset=utf-8"]
    for name, value in SECURITY_HEADERS.items():
        assert sent[name] == [value], name
    assert "Set-Cookie" not in sent
    assert "Location" not in sent
    assert response["isBase64Encoded"] is False
    body = response["body"]
    assert body.startswith("<!doctype html>")
    assert f"<strong>NOT_FOUND</strong>: page {public_id} was not found" in body
    # A path under a run's links back to the run its path begins with
    if back is None:
        assert 'id="back-to-run"' not in body
    else:
        assert f'<a href="{back}" id="back-to-run">' in body


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/ui/nowhere", "/ui/nowhere"),
        # Trailing slashes are not part of the page's name
        ("/ui/nowhere///", "/ui/nowhere"),
        ("/nowhere", "/nowhere"),
        ("/ui/workspaces", "/ui/workspaces"),
        ("/ui/runs", "/ui/runs"),
        # Paths are matched as sent: neither case-folded nor percent-decoded
        ("/UI", "/UI"),
        ("/ui/Login", "/ui/Login"),
        ("/ui/%6Cogin", "/ui/%6Cogin"),
        ("/ui\n", "/ui\n"),
        ("/ui/login/\n", "/ui/login/\n"),
    ],
)
def test_a_path_no_page_has_is_answered_with_the_not_found_page(path: str, named: str) -> None:
    # Given no session
    # When a path that no page has is requested
    response = request("GET", path)

    # Then the not-found page names it
    assert_not_found(response, named)


RUN = "/ui/runs/run-1"


@pytest.mark.parametrize(
    ("path", "named", "back"),
    [
        # An ID is 1 to 64 letters, digits and dashes
        ("/ui/runs/run.1", "/ui/runs/run.1", "/ui/runs/run"),
        ("/ui/runs/run_1", "/ui/runs/run_1", "/ui/runs/run"),
        ("/ui/runs/run%2D1", "/ui/runs/run%2D1", "/ui/runs/run"),
        ("/ui/runs/" + "a" * 65, "/ui/runs/" + "a" * 65, "/ui/runs/" + "a" * 64),
        ("/ui/runs/r\u00e9n", "/ui/runs/r\u00e9n", "/ui/runs/r"),
        ("/ui/runs/.x", "/ui/runs/.x", None),
        ("/ui/workspaces/ws~1", "/ui/workspaces/ws~1", None),
        ("/ui/workspaces/ws-1/runs", "/ui/workspaces/ws-1/runs", None),
        (f"{RUN}/logs/destroy", f"{RUN}/logs/destroy", RUN),
        (f"{RUN}/logs/plan/0", f"{RUN}/logs/plan/0", RUN),
        (f"{RUN}/logs", f"{RUN}/logs", RUN),
        # POST-only paths, read with GET
        ("/ui/logout", "/ui/logout", None),
        (f"{RUN}/approve", f"{RUN}/approve", RUN),
        (f"{RUN}/cancel/", f"{RUN}/cancel", RUN),
        ("/ui/github/connect", "/ui/github/connect", None),
        ("/ui/workspaces/ws-1/cloud-settings", "/ui/workspaces/ws-1/cloud-settings", None),
        (
            "/ui/workspaces/ws-1/cloud-settings/clear",
            "/ui/workspaces/ws-1/cloud-settings/clear",
            None,
        ),
        ("/ui/workspaces/ws-1/drift/remediate", "/ui/workspaces/ws-1/drift/remediate", None),
        # Terraform's run links: names as TFE spells them, an ID as the run page's
        ("/app/org-1/ws-1/runs/run_1", "/app/org-1/ws-1/runs/run_1", None),
        ("/app/org-1/ws-1/runs/run%2D1", "/app/org-1/ws-1/runs/run%2D1", None),
        ("/app/org-1/ws-1/runs/" + "a" * 65, "/app/org-1/ws-1/runs/" + "a" * 65, None),
        ("/app/org.1/ws-1/runs/run-1", "/app/org.1/ws-1/runs/run-1", None),
        ("/app/org-1/ws~1/runs/run-1", "/app/org-1/ws~1/runs/run-1", None),
        ("/app/org-1/" + "w" * 91 + "/runs/run-1", "/app/org-1/" + "w" * 91 + "/runs/run-1", None),
        ("/app/org-1/ws-1/runs", "/app/org-1/ws-1/runs", None),
        ("/app/org-1/ws-1/runs/run-1/plan", "/app/org-1/ws-1/runs/run-1/plan", None),
        ("/app/org-1/runs/run-1", "/app/org-1/runs/run-1", None),
        ("/app/org-1/ws-1/runs/run-1\n", "/app/org-1/ws-1/runs/run-1\n", None),
    ],
)
def test_a_get_of_a_path_outside_every_pages_shape_is_not_found_before_any_session_is_read(
    path: str, named: str, back: str | None
) -> None:
    # Given no session (a page would send the browser to sign in)
    # When a path outside every page's shape is requested
    response = request("GET", path)

    # Then it is answered as not found, not with a redirect to sign in
    assert_not_found(response, named, back)


@pytest.mark.parametrize(
    ("method", "path", "named", "back"),
    [
        ("POST", "/", "/", None),
        ("POST", "/ui/", "/ui", None),
        ("POST", RUN, RUN, RUN),
        ("POST", f"{RUN}/publish", f"{RUN}/publish", RUN),
        ("POST", f"{RUN}/approve/now", f"{RUN}/approve/now", RUN),
        ("POST", "/ui/runs/run.1/approve", "/ui/runs/run.1/approve", "/ui/runs/run"),
        ("POST", f"{RUN}/logs/plan", f"{RUN}/logs/plan", RUN),
        (
            "POST",
            "/ui/github/installations/12a/release",
            "/ui/github/installations/12a/release",
            None,
        ),
        (
            "POST",
            "/ui/github/installations/12345678901234567/release",
            "/ui/github/installations/12345678901234567/release",
            None,
        ),
        ("POST", "/ui/static/dashboard.css", "/ui/static/dashboard.css", None),
        (
            "POST",
            "/ui/workspaces/ws.1/cloud-settings",
            "/ui/workspaces/ws.1/cloud-settings",
            None,
        ),
        ("PUT", "/ui/workspaces/ws-1/cloud-settings", "/ui/workspaces/ws-1/cloud-settings", None),
        (
            "POST",
            "/ui/workspaces/ws.1/drift/remediate",
            "/ui/workspaces/ws.1/drift/remediate",
            None,
        ),
        ("POST", "/app/org-1/ws-1/runs/run-1", "/app/org-1/ws-1/runs/run-1", None),
        ("PUT", RUN, RUN, RUN),
        ("PATCH", "/ui/workspaces/ws-1", "/ui/workspaces/ws-1", None),
        ("DELETE", f"{RUN}//", RUN, RUN),
        ("DELETE", "/ui/logout/", "/ui/logout", None),
        ("OPTIONS", "/ui", "/ui", None),
        # API Gateway passes HEAD on as HEAD (the embedded gateway sends it as a GET)
        ("HEAD", "/", "/", None),
        ("HEAD", "/ui/static/dashboard.css", "/ui/static/dashboard.css", None),
        # A method in lower case is the same method
        ("post", RUN, RUN, RUN),
    ],
)
def test_a_method_a_page_does_not_take_is_not_found_rather_than_not_allowed(
    method: str, path: str, named: str, back: str | None
) -> None:
    # Given no session
    # When a path is requested with a method none of its pages take
    response = request(method, path)

    # Then it is answered as not found (no 405, no redirect to sign in)
    assert_not_found(response, named, back)


@pytest.mark.parametrize(
    ("path", "name", "kind"),
    [
        ("/ui/static/dashboard.css", "dashboard.css", "text/css"),
        ("/ui/static/dashboard.js", "dashboard.js", "text/javascript"),
        ("/ui/static/favicon.svg", "favicon.svg", "image/svg+xml"),
        ("/ui/static/favicon.svg//", "favicon.svg", "image/svg+xml"),
        # Browsers ask for it whatever the page links: the icon, never the sign-in page.
        ("/favicon.ico", "favicon.svg", "image/svg+xml"),
    ],
)
def test_a_static_file_is_served_with_its_type_and_the_pages_headers(
    path: str, name: str, kind: str
) -> None:
    # Given no session (static files need none)
    # When a static file is requested
    response = request("GET", path)

    # Then it is served as it is, with its type and the security headers of every page
    assert response["statusCode"] == 200
    sent = headers(response)
    assert sent["Content-Type"] == [f"{kind}; charset=utf-8"]
    for header, value in SECURITY_HEADERS.items():
        assert sent[header] == [value], header
    assert "Set-Cookie" not in sent
    assert response["isBase64Encoded"] is False
    served = asset(name)
    assert served is not None
    assert response["body"] == served.body


@pytest.mark.parametrize(
    ("path", "named"),
    [
        # A file that is not one of the three is named by what follows /ui/static/
        ("/ui/static/app.py", "app.py"),
        ("/ui/static/../app.py", "../app.py"),
        ("/ui/static/..%2Fapp.py", "..%2Fapp.py"),
        ("/ui/static/css/dashboard.css", "css/dashboard.css"),
        ("/ui/static//dashboard.css", "/dashboard.css"),
        ("/ui/static/dashboard.CSS", "dashboard.CSS"),
        ("/ui/static/dashboard.css/x/", "dashboard.css/x"),
        ("/ui/static/dashboard.css\n", "dashboard.css\n"),
        # With no file name at all it is the path that is not found
        ("/ui/static", "/ui/static"),
        ("/ui/static/", "/ui/static"),
        ("/ui/static///", "/ui/static"),
    ],
)
def test_a_static_file_that_is_not_ours_is_not_found(path: str, named: str) -> None:
    # Given no session
    # When a file the dashboard does not serve is requested under /ui/static/
    response = request("GET", path)

    # Then it is not found, named as the old router named it
    assert_not_found(response, named)


@pytest.mark.parametrize(
    ("path", "run_id"),
    [
        ("/app/my-org/my_workspace/runs/run-abc", "run-abc"),
        ("/app/O/W/runs/run-1/", "run-1"),
        ("/app/org/" + "w" * 90 + "/runs/" + "r" * 64, "r" * 64),
    ],
)
def test_terraforms_run_link_redirects_to_the_run_page_before_any_session_is_read(
    path: str, run_id: str
) -> None:
    # Given no session, and a run link as Terraform's remote backend prints it
    # When it is requested
    response = request("GET", path)

    # Then it is a redirect to the run page (which signs in and checks permissions),
    # with the page headers and nothing else
    assert response["statusCode"] == 302
    sent = headers(response)
    assert sent["Location"] == [f"/ui/runs/{run_id}"]
    for name, value in SECURITY_HEADERS.items():
        assert sent[name] == [value], name
    assert "Set-Cookie" not in sent
    assert response["body"] == ""
