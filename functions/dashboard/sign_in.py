"""Dashboard sign-in through the Cognito hosted UI (docs/dashboard.md, "Sign-in").

Enabled by the ``sign_in_*`` settings; without them these routes do not exist
and the dashboard signs in by one-time login links only.

- ``GET /ui/sign-in`` opens a pre-session (cookie) and redirects to the hosted UI.
- ``GET /ui/oauth2/callback`` finishes it and opens the cookie session.
- Signing out (``POST /ui/logout``, in ``app``) ends with the hosted UI's logout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from functions.dashboard.pages import templates
from functions.dashboard.web import Page, Request, redirect, reply
from runplane.domain.sign_in import (
    PRE_SESSION_COOKIE,
    cleared_pre_session_cookie,
    pre_session_cookie,
)
from runplane.domain.web_session import session_cookie
from runplane.wiring import services

if TYPE_CHECKING:
    from runplane.services.sign_in import HostedUiSignIn

SIGNED_OUT = "/ui/sign-in"


def configured_flow() -> HostedUiSignIn | None:
    """The hosted UI's sign-in, or None where it is not configured."""
    return services().sign_in


def start(request: Request, flow: HostedUiSignIn) -> Page:
    started = flow.start()
    max_age = int((started.valid_until - services().clock.now()).total_seconds())
    cookie = pre_session_cookie(started.secret, secure=request.scheme == "https", max_age=max_age)
    return redirect(started.location, cookies=[cookie])


def callback(request: Request, flow: HostedUiSignIn) -> Page:
    query = request.query
    signed_in = flow.finish(
        request.cookie(PRE_SESSION_COOKIE),
        query.get("state"),
        query.get("code"),
        query.get("error"),
        request.source_address,
    )
    secure = request.scheme == "https"
    max_age = int((signed_in.valid_until - services().clock.now()).total_seconds())
    cookies = [
        session_cookie(signed_in.secret, secure=secure, max_age=max_age),
        cleared_pre_session_cookie(secure=secure),
    ]
    # A SameSite=Strict cookie set at the end of a redirect chain that began on the
    # hosted UI's site is not sent with the next request of that chain, so an HTTP
    # redirect to / would find no session and start the sign-in again. This page,
    # on our own site, moves the browser to / with the cookie.
    body = templates().get_template("signed_in.html").render(session=None)
    return reply(200, body, headers={"Refresh": "0; url=/"}, cookies=cookies)


def signed_out_location() -> str:
    """Where the browser goes after sign-out: the hosted UI's logout (which ends its
    own session too) when it is configured, else the sign-in notice."""
    flow = configured_flow()
    return SIGNED_OUT if flow is None else flow.signed_out_location()
