"""The attention inbox page (docs/dashboard.md, "Attention"); the count in every page's
header is ``pages.header_count``.

Both call the attention service with the signed-in principal: the service picks the
caller's own workspaces and holds every rule of what is listed.
"""

from __future__ import annotations

from functions.dashboard.pages import Session, render
from functions.dashboard.web import Page, Request
from runplane.wiring import services

PAGE_PATH = "/ui/attention"


def page(request: Request, session: Session) -> Page:
    inbox = services().attention.view(session.principal)
    # The header shows this page's own count rather than asking the service again.
    return render(
        200, "attention.html", session=session, inbox=inbox, attention_total=inbox["count"]
    )
