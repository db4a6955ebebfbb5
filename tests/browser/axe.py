"""axe-core, run in a page: the accessibility rules a page breaks.

`make browser-deps` fetches axe-core from the npm registry at the version the Makefile
pins (checked against its SHA-512). It is evaluated through the DevTools protocol, so
the page's Content-Security-Policy, which refuses any script but the dashboard's own,
stays exactly as it is served.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

AXE_DIRECTORY = Path(__file__).resolve().parents[2] / ".venv" / "axe"
# WCAG 2.0, 2.1 and 2.2, levels A and AA, and axe's best practices.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
BLOCKING = {"serious", "critical"}
# The elements that reach past the screen's right edge: what a failure names.
WIDER = """width => [...document.querySelectorAll("body *")]
  .filter(e => e.getBoundingClientRect().right > width + 0.5)
  .map(e => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`)"""

_RUN = """async tags => {
  const result = await axe.run(document, { runOnly: { type: "tag", values: tags } });
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))
  }));
}"""


@lru_cache(maxsize=1)
def axe_source() -> str:
    found = sorted(AXE_DIRECTORY.glob("axe-*.min.js"))
    if not found:
        pytest.fail(f"axe-core is missing from {AXE_DIRECTORY}: `make browser-deps` fetches it")
    return found[-1].read_text(encoding="utf-8")


def violations(page: Page) -> list[dict[str, Any]]:
    """Every rule the page as it is now breaks, as axe reports it."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    found: list[dict[str, Any]] = page.evaluate(_RUN, TAGS)
    return found


def blocking(page: Page) -> list[dict[str, Any]]:
    """The serious and critical violations: what fails a page."""
    return [v for v in violations(page) if v["impact"] in BLOCKING]
