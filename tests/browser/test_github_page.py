"""The GitHub page in a real browser: connecting an installation through (fake)
GitHub and back, at desktop and phone widths."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import ARTIFACTS
from tests.e2e.conftest import Local, fake_github
from tests.github_fake import USER_HEADER, FakeGitHub

__all__ = ["fake_github"]


@pytest.mark.parametrize("width", [1280, 390])
def test_an_admin_connects_an_installation_in_the_browser_and_the_page_fits(
    browser: Browser, local: Local, fake_github: FakeGitHub, width: int
) -> None:
    # Given an owner of a GitHub organization with the App installed, in a browser of
    # this width that GitHub knows as that owner, signed in to the dashboard
    number = 800_000 + uuid.uuid4().int % 100_000
    account = f"browser-{number}"
    owner = f"{account}-owner"
    fake_github.organization(account, owners=(owner,))
    fake_github.install(number, account)
    context = browser.new_context(base_url=local.url, viewport={"width": width, "height": 800})
    context.set_extra_http_headers({USER_HEADER: owner})
    page = context.new_page()
    errors: list[str] = []
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    shots = ARTIFACTS / f"github-page-{width}"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        page.goto(local.stack.login_link())
        page.goto("/ui/github")
        expect(page.locator("h1")).to_have_text("GitHub installations")
        page.screenshot(path=str(shots / "01-empty.png"), full_page=True)

        # When they type the installation ID and press Connect with GitHub
        page.fill("#installation_id", str(number))
        page.click("#connect-form button")

        # Then the browser goes to GitHub and back, and the page lists the installation
        expect(page.locator("#installations")).to_contain_text(account, timeout=30_000)
        expect(page.locator("#installations")).to_contain_text(owner)
        page.screenshot(path=str(shots / "02-connected.png"), full_page=True)
        assert page.url.endswith("/ui/github")
        # And no page on the way logged an error (a missing icon, a refused script)
        assert errors == []
        # And nothing is wider than the screen
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0
        # And the buttons are at least 24 px high (WCAG 2.2 target size)
        for button in page.locator("button").all():
            box = button.bounding_box()
            assert box is not None
            assert box["height"] >= 24
    finally:
        context.close()
