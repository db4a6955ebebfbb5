"""The attention inbox page, and the count in every page's header (docs/dashboard.md,
"Attention").

Both call the attention service with the signed-in principal: the service picks the
caller's own workspaces and holds every rule of what is listed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from functions.dashboard.web import Page, Request
from runplane.domain.identity import Permission
from runplane.wiring import services

if TYPE_CHECKING:
    from functions.dashboard.app import Session

PAGE_PATH = "/ui/attention"
# What the inbox reads: without both the header shows no count (the service would refuse).
_NEEDED = frozenset({Permission.RUN_READ, Permission.WORKSPACE_READ})


def page(request: Request, session: Session) -> Page:
    from functions.dashboard.app import render

    inbox = services().attention.view(session.principal)
    # The header shows this page's own count rather than asking the service again.
    return render(
        200, "attention.html", session=session, inbox=inbox, attention_total=inbox["count"]
    )


def header_count(session: Session | Any) -> int | None:
    """How many items wait for a person in the caller's inbox; None (no link) for a
    caller who may not read it. Costs two queries and one batch read per 100 of the
    caller's workspaces (docs/dashboard.md, "Attention")."""
    # Pages rendered without a signed-in principal's permissions (a template rendered
    # on its own, say) show no count rather than fail.
    principal = getattr(session, "principal", None)
    permissions: frozenset[Permission] = getattr(principal, "permissions", frozenset())
    if principal is None or not permissions >= _NEEDED:
        return None
    return services().attention.count(principal)
