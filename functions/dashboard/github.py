"""The dashboard's GitHub page: the installations the organization holds, and the
connect flow that claims one (docs/github.md, "Connecting an installation").

- ``GET /ui/github`` lists them; admins see the connect form and release buttons.
- ``POST /ui/github/connect`` opens a connect flow (a cookie scoped to the callback)
  and sends the browser to GitHub.
- ``GET /ui/github/callback`` is the App's setup URL and its callback URL both.
- ``POST /ui/github/installations/<id>/release`` releases an unused installation.
"""

from __future__ import annotations

from functions.dashboard.pages import Session, render, templates
from functions.dashboard.web import Page, Request, redirect, reply
from runplane.domain.errors import InvalidInput
from runplane.domain.github_connect import (
    CONNECT_COOKIE,
    cleared_connect_cookie,
    connect_cookie,
)
from runplane.domain.identity import Permission
from runplane.wiring import services

PAGE_PATH = "/ui/github"


def page(request: Request, session: Session) -> Page:
    s = services()
    held = s.github_installations.list(session.principal)
    return render(
        200,
        "github.html",
        session=session,
        installations=held,
        may_connect=session.principal.may(Permission.GITHUB_CONNECT),
    )


def connect(request: Request, session: Session) -> Page:
    form = request.form()
    session.check_post(request, form)
    typed = form.get("installation_id", "").strip()
    if typed and (not typed.isdigit() or len(typed) > 16):
        raise InvalidInput("the installation ID is the number at the end of its settings URL")
    assert session.secret is not None
    s = services()
    started = s.github_installations.start(
        session.principal, session.secret, int(typed) if typed else None
    )
    max_age = int((started.valid_until - s.clock.now()).total_seconds())
    cookie = connect_cookie(started.secret, secure=request.scheme == "https", max_age=max_age)
    # A page that moves on, not a redirect: the dashboard's CSP allows forms to go to
    # its own origin only, and browsers apply that to a form's redirects too.
    body = (
        templates()
        .get_template("github_continue.html")
        .render(session=session, location=started.location)
    )
    return reply(200, body, headers={"Refresh": f"0; url={started.location}"}, cookies=[cookie])


def callback(request: Request) -> Page:
    query = request.query
    flows = services().github_installations
    secret = request.cookie(CONNECT_COOKIE)
    if "code" not in query and "error" not in query:
        if query.get("setup_action") == "update" and not query.get("state"):
            # The installation was changed on GitHub's side: nothing to connect.
            return redirect(PAGE_PATH)
        return redirect(flows.setup(secret, query.get("state"), query.get("installation_id")))
    held = flows.finish(secret, query.get("state"), query.get("code"), query.get("error"))
    secure = request.scheme == "https"
    # As after sign-in: the session cookie is Strict, so this page (on our own site)
    # moves the browser on instead of a redirect at the end of GitHub's chain.
    body = templates().get_template("github_connected.html").render(session=None, installation=held)
    return reply(
        200,
        body,
        headers={"Refresh": f"0; url={PAGE_PATH}"},
        cookies=[cleared_connect_cookie(secure=secure)],
    )


def release(request: Request, session: Session, installation_id: str) -> Page:
    session.check_post(request, request.form())
    services().github_installations.release(session.principal, int(installation_id))
    return redirect(PAGE_PATH)
