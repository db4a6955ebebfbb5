"""What every page of the dashboard shares: its templates, how a page is rendered, the
signed-in caller of a request, and the attention count in every page's header."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from functions.dashboard import assets, formatting
from functions.dashboard.web import Page, Request, reply
from runplane.domain.errors import CsrfRefused
from runplane.domain.identity import Permission, Principal
from runplane.domain.web_session import SESSION_COOKIE, csrf_matches, csrf_token, same_origin
from runplane.wiring import services

# What the attention inbox reads: without both the header shows no count (the service
# would refuse).
_INBOX_NEEDS = frozenset({Permission.RUN_READ, Permission.WORKSPACE_READ})


@lru_cache(maxsize=1)
def templates() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(Path(__file__).resolve().parent / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(formatting.FILTERS)
    environment.globals["asset_url"] = assets.asset_url
    environment.globals["attention_count"] = header_count
    return environment


def render(status: int, name: str, **context: Any) -> Page:
    """The page ``name``, a signed-in one's times relative to the control plane's clock
    (a page without a session shows no times, and may be served by a function that has
    no store to ask)."""
    now = services().clock.now() if context.get("session") else None
    page = templates().get_template(name).render(now=now, **context)
    return reply(status, page)


class Session:
    """The signed-in caller of one request."""

    def __init__(self, request: Request) -> None:
        self.secret = request.cookie(SESSION_COOKIE)
        self.principal: Principal = services().with_teams(
            replace(
                services().web_sessions.authenticate(self.secret),
                source_address=request.source_address,
            )
        )
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


def header_count(session: Session | Any) -> int | None:
    """How many items wait for a person in the caller's inbox; None (no link) for a
    caller who may not read it. Costs two queries and one batch read per 100 of the
    caller's workspaces (docs/dashboard.md, "Attention")."""
    # Pages rendered without a signed-in principal's permissions (a template rendered
    # on its own, say) show no count rather than fail.
    principal = getattr(session, "principal", None)
    # A role, or a team grant on some workspace (the service's own test): a person whose
    # access comes from teams only holds no role permissions at all.
    if not isinstance(principal, Principal) or not all(
        principal.may_somewhere(p) for p in _INBOX_NEEDS
    ):
        return None
    return services().attention.count(principal)
