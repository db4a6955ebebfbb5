"""The dashboard's workspace list as a person reads it: page after page (50 workspaces
a page), so a test finds its own workspace wherever the shared stack's organization puts
it, and an absence is checked on every page, not the first alone."""

from __future__ import annotations

import re

import requests

_PAGES = re.compile(r"<span>Page (\d+) of (\d+)</span>")


def every_listing_page(session: requests.Session, url: str) -> str:
    """The text of every page of the workspace list, one after the other."""
    first = session.get(f"{url}/", allow_redirects=False, timeout=30)
    first.raise_for_status()
    texts = [first.text]
    counted = _PAGES.search(first.text)
    pages = int(counted.group(2)) if counted else 1
    for number in range(2, pages + 1):
        page = session.get(f"{url}/?page={number}", allow_redirects=False, timeout=30)
        page.raise_for_status()
        texts.append(page.text)
    return "\n".join(texts)
