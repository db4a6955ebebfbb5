"""Chromium, driven by Playwright, against the embedded stack of the e2e tier.

The browser is Debian's chromium (`make browser-deps` installs it); Playwright
downloads no browser of its own. Screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.e2e.conftest import Local, embedded, local

__all__ = ["embedded", "local"]

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags, chromium keeps trying the network at
# start-up, which a closed network makes slow.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
# Engines and workflows take their time; the page follows them live.
RUN_TIMEOUT_MS = 180_000

Shoot = Callable[[str], Path]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser-deps` installs Debian's chromium")
    with sync_playwright() as playwright:
        # Each launch runs on a fresh temporary profile (user data dir) of its own.
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, local: Local) -> Iterator[Page]:
    """A page in its own browser context: no cookie is shared between tests."""
    context = browser.new_context(base_url=local.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def shoot(page: Page, request: pytest.FixtureRequest) -> Shoot:
    """Saves a full-page screenshot under test-artifacts/browser/<test>/."""
    directory = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
    directory.mkdir(parents=True, exist_ok=True)
    taken = iter(range(1, 100))

    def save(name: str) -> Path:
        path = directory / f"{next(taken):02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
