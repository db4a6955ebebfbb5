"""The dashboard: server-rendered pages over the same services as the run API.

Pages are reached with a cookie session opened by a one-time login link; every
POST must carry the session's CSRF token and come from this origin.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from functions.dashboard import actions, github, sign_in
from functions.dashboard.web import Request, redirect, reply
from functions.observability import observed
from runplane.domain.capabilities import Phase
from runplane.domain.errors import CsrfRefused, NotFound, RunplaneError
from runplane.domain.identity import STEP_UP_WINDOW, Permission, Principal, Unauthenticated
from runplane.domain.run import RunStatus
from runplane.domain.web_session import (
    SESSION_COOKIE,
    cleared_cookie,
    csrf_matches,
    csrf_token,
    same_origin,
    session_cookie,
)
from runplane.wiring import services

Page = dict[str, Any]
SIGN_IN = "/ui/sign-in"
# The fields of the approval binding a form sends back: what the person reviewed.
BINDING_FIELDS = (
    "plan_sha256",
    "predecessor_state_version_id",
    "policy_input_digest",
    "policy_result_digest",
)
_WORKSPACE = re.compile(r"/ui/workspaces/(?P<id>[A-Za-z0-9-]{1,64})")
_RUN = re.compile(r"/ui/runs/(?P<id>[A-Za-z0-9-]{1,64})")
_DECISION = re.compile(r"/ui/runs/(?P<id>[A-Za-z0-9-]{1,64})/(?P<decision>approve|reject)")
# An action refused on a run's page links back to that page.
_RUN_PATH = re.compile(r"/ui/runs/[A-Za-z0-9-]{1,64}")
_ACTION = re.compile(r"/ui/runs/(?P<id>[A-Za-z0-9-]{1,64})/(?P<action>recover|cancel)")
_LIVE_LOG = re.compile(r"/ui/runs/(?P<id>[A-Za-z0-9-]{1,64})/logs/(?P<phase>plan|apply)")
_STATIC = Path(__file__).resolve().parent / "static"


@lru_cache(maxsize=1)
def templates() -> Environment:
    return Environment(
        loader=FileSystemLoader(Path(__file__).resolve().parent / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(status: int, name: str, **context: Any) -> Page:
    return reply(status, templates().get_template(name).render(**context))


class Session:
    """The signed-in caller of one request."""

    def __init__(self, request: Request) -> None:
        self.secret = request.cookie(SESSION_COOKIE)
        self.principal: Principal = services().web_sessions.authenticate(self.secret)
        assert self.secret is not None
        self.csrf = csrf_token(self.secret)

    def check_post(self, request: Request, form: dict[str, str]) -> None:
        assert self.secret is not None
        if not same_origin(
            request.headers.get("origin"), request.scheme, request.headers.get("host")
        ):
            raise CsrfRefused("the form was sent from another origin")
        if not csrf_matches(self.secret, form.get("csrf")):
            raise CsrfRefused("the form's CSRF token is missing or wrong: reload the page")


# -- pages ---------------------------------------------------------------------------------


def sign_in_notice(request: Request) -> Page:
    return render(401, "sign_in.html", session=None)


def login(request: Request) -> Page:
    signed_in = services().web_sessions.sign_in(request.query.get("code", ""))
    max_age = int((signed_in.valid_until - services().clock.now()).total_seconds())
    cookie = session_cookie(signed_in.secret, secure=request.scheme == "https", max_age=max_age)
    return redirect("/", cookies=[cookie])


def logout(request: Request) -> Page:
    session = Session(request)
    session.check_post(request, request.form())
    assert session.secret is not None
    services().web_sessions.sign_out(session.secret)
    cookie = cleared_cookie(secure=request.scheme == "https")
    return redirect(sign_in.signed_out_location(), cookies=[cookie])


def workspaces(request: Request) -> Page:
    session = Session(request)
    listed = sorted(services().workspaces.list_own(session.principal), key=lambda w: w.name)
    return render(200, "workspaces.html", session=session, workspaces=listed)


def workspace(request: Request, workspace_id: str) -> Page:
    session = Session(request)
    s = services()
    ws = s.workspaces.by_id(session.principal, workspace_id)
    runs = s.runs.list(session.principal, ws.id)
    return render(200, "runs.html", session=session, workspace=ws, runs=runs)


def _log(principal: Principal, run_id: str, phase: Phase) -> dict[str, Any] | None:
    try:
        read = services().logs.read(principal, run_id, phase)
    except NotFound:
        return None
    return {
        "text": read.data.decode("utf-8", "replace"),
        "truncated": read.next_offset < read.length,
        "complete": read.complete,
        "next_offset": read.next_offset,
        "at_end": read.at_end,
    }


def run_page(request: Request, run_id: str) -> Page:
    session = Session(request)
    s = services()
    review = s.runs.review(session.principal, run_id)
    ws = s.workspaces.by_id(session.principal, review["workspace_id"])
    approval = review.get("approval") or {}
    open_for_decision = review["status"] == "awaiting_approval"
    expires_at = approval.get("expires_at")
    deadline_passed = isinstance(expires_at, str) and (
        datetime.fromisoformat(expires_at) <= s.clock.now()
    )
    logs = {phase.value: _log(session.principal, run_id, phase) for phase in Phase}
    return render(
        200,
        "run.html",
        session=session,
        workspace=ws,
        review=review,
        approval=approval,
        binding=approval.get("binding") or {},
        can_decide=open_for_decision and not deadline_passed,
        # Only the buttons the user may press: the services refuse the rest anyway.
        may_decide=Permission.RUN_APPROVE in session.principal.permissions,
        may_cancel=Permission.RUN_CANCEL in session.principal.permissions,
        deadline_passed=deadline_passed,
        active=not RunStatus(review["status"]).is_terminal,
        logs=logs,
        signed_in_recently=_signed_in_recently(session.principal),
    )


def _signed_in_recently(principal: Principal) -> bool:
    """Whether the recovery form can be sent without signing in again (the service
    checks it anyway; the page only says so up front)."""
    signed_in = principal.auth_time
    return signed_in is not None and services().clock.now() - signed_in <= STEP_UP_WINDOW


def decide(request: Request, run_id: str, decision: str) -> Page:
    session = Session(request)
    form = request.form()
    session.check_post(request, form)
    s = services()
    binding = {name: form[name] for name in BINDING_FIELDS if form.get(name)}
    comment = form.get("comment") or None
    s.runs.decide(session.principal, run_id, decision, comment, binding)
    return redirect(f"/ui/runs/{run_id}")


_STATIC_TYPES = {
    "dashboard.js": "text/javascript",
    "dashboard.css": "text/css",
    # Linked from every page, so the browser never asks for /favicon.ico (not routed).
    "favicon.svg": "image/svg+xml",
}


def static(name: str) -> Page:
    path = _STATIC / name
    kind = _STATIC_TYPES.get(name)
    if kind is None or not path.is_file():
        raise NotFound("page", name)
    return reply(200, path.read_text(encoding="utf-8"), content_type=f"{kind}; charset=utf-8")


# -- routing ------------------------------------------------------------------------------


def _route(request: Request) -> Page:
    method, path = request.method, request.path.rstrip("/") or "/"
    if (signing_in := sign_in.route(request, method, path)) is not None:
        return signing_in
    if (connecting := github.route(request, method, path)) is not None:
        return connecting
    if method == "GET":
        fixed: dict[str, Callable[[Request], Page]] = {
            "/": workspaces,
            "/ui": workspaces,
            "/ui/login": login,
            SIGN_IN: sign_in_notice,
        }
        if path in fixed:
            return fixed[path](request)
        if path.startswith("/ui/static/"):
            return static(path.removeprefix("/ui/static/"))
        if found := _WORKSPACE.fullmatch(path):
            return workspace(request, found["id"])
        if found := _RUN.fullmatch(path):
            return run_page(request, found["id"])
        if found := _LIVE_LOG.fullmatch(path):
            return actions.live_log(request, Session(request), found["id"], found["phase"])
    if method == "POST":
        if path == "/ui/logout":
            return logout(request)
        if found := _DECISION.fullmatch(path):
            return decide(request, found["id"], found["decision"])
        if found := _ACTION.fullmatch(path):
            act = actions.recover if found["action"] == "recover" else actions.cancel
            return act(request, Session(request), found["id"])
    raise NotFound("page", path)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = Request.of(event)
    try:
        return _route(request)
    except Unauthenticated:
        if request.method == "GET":
            return redirect(SIGN_IN)
        return render(
            401,
            "error.html",
            session=None,
            code="UNAUTHENTICATED",
            message="sign in to use the dashboard",
        )
    except RunplaneError as error:
        back = _RUN_PATH.match(request.path)
        return render(
            error.http_status,
            "error.html",
            session=None,
            code=error.code,
            message=error.message,
            back=back[0] if back else None,
        )
