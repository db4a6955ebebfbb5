"""Every page of the dashboard, at desktop and phone widths, as a person reads it: no
serious or critical accessibility violation (axe-core), nothing wider than the screen,
every button large enough to press and reachable with the keyboard, no error in the
console. A screenshot of each is kept under test-artifacts/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.browser.axe import WIDER, blocking
from tests.browser.conftest import ARTIFACTS
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO, new_workspace
from tests.e2e.test_run_options import configuration

WIDTHS = {"desktop": 1280, "phone": 390}
TARGET = 24

# Every visible control a person presses: its text and box.
_TARGETS = """() => [...document.querySelectorAll("button, summary, input[type=submit]")]
  .filter(e => e.getClientRects().length)
  .map(e => [e.textContent.trim(), e.getBoundingClientRect().height])"""


@dataclass(frozen=True)
class Site:
    """The pages of one organization with something on each."""

    workspace_id: str
    applied_run: str
    waiting_run: str

    def pages(self) -> dict[str, str]:
        return {
            "workspaces": "/",
            "workspace": f"/ui/workspaces/{self.workspace_id}",
            "run-awaiting-approval": f"/ui/runs/{self.waiting_run}",
            "run-applied": f"/ui/runs/{self.applied_run}",
            "plan": f"/ui/runs/{self.waiting_run}/plan",
            "attention": "/ui/attention",
            "teams": "/ui/teams",
            "github": "/ui/github",
            "not-found": "/ui/runs/run-does-not-exist",
        }


@pytest.fixture
def site(local: Local, tmp_path: Path) -> Site:
    client = local.client
    # A workspace with an applied run (state, outputs), and a run awaiting approval that
    # creates two resources and destroys the applied one.
    ws = new_workspace(local, "a11y")
    applied = client.create_run(ws, HELLO)
    client.watch(applied["id"], until=["awaiting_approval"], timeout=180)
    client.decide(applied["id"], "approve")
    assert client.watch(applied["id"], timeout=180)["status"] == "succeeded"
    waiting = client.create_run(ws, configuration(tmp_path, "alpha", "beta"))
    waited = client.watch(waiting["id"], until=["awaiting_approval"], timeout=180)
    assert waited["status"] == "awaiting_approval"
    # A team with members, a mapped group and access, so the teams page shows them.
    team = client.create_team(unique("a11y"), members=["bea", "cy"], groups=["platform"])
    client.set_team_access(ws, team["id"], "write", ["recover"])
    return Site(ws, applied["id"], waiting["id"])


@pytest.fixture
def signed_in(browser: Browser, local: Local) -> Iterator[Page]:
    context = browser.new_context(base_url=local.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto(local.stack.login_link())
    try:
        yield page
    finally:
        context.close()


def _check(page: Page, width: int, shot: str) -> list[str]:
    """What is wrong with the page as shown: every finding, named."""
    page.set_viewport_size({"width": width, "height": 900})
    findings: list[str] = []
    for violation in blocking(page):
        findings.append(f"axe {violation['impact']} {violation['id']}: {violation['nodes']}")
    if page.evaluate("document.documentElement.scrollWidth") > width:
        findings.append(f"wider than {width}px: {page.evaluate(WIDER, width)}")
    for text, height in page.evaluate(_TARGETS):
        if height < TARGET:
            findings.append(f"target {text!r} is {height}px tall")
    directory = ARTIFACTS / "pages"
    directory.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(directory / f"{shot}-{width}.png"), full_page=True)
    return findings


def test_every_page_is_accessible_and_fits_the_screen_at_both_widths(
    signed_in: Page, site: Site
) -> None:
    errors: list[str] = []
    signed_in.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    findings: dict[str, list[str]] = {}
    for name, path in site.pages().items():
        for width in WIDTHS.values():
            # Given a signed-in person on the page, at desktop and at phone width
            signed_in.set_viewport_size({"width": width, "height": 900})
            signed_in.goto(path)
            # Then axe finds nothing serious, nothing is wider than the screen, and each
            # control is large enough to press
            found = _check(signed_in, width, name)
            if found:
                findings[f"{name}@{width}"] = found
    assert findings == {}
    # And no page logged an error (a 404 page's own status is not one)
    assert [e for e in errors if "404" not in e] == []


def test_the_sign_in_page_is_accessible_at_both_widths(browser: Browser, local: Local) -> None:
    # Given no session
    context = browser.new_context(base_url=local.url)
    try:
        page = context.new_page()
        page.goto("/ui/sign-in")
        # Then the notice passes at both widths
        for width in WIDTHS.values():
            assert _check(page, width, "sign-in") == []
    finally:
        context.close()


def test_a_decision_can_be_reached_and_pressed_with_the_keyboard(
    signed_in: Page, local: Local
) -> None:
    # Given a run awaiting approval, its page open
    ws = new_workspace(local, "a11y-keys")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    signed_in.goto(f"/ui/runs/{run['id']}")

    # When the person tabs through the page until Reject has the focus
    for _ in range(60):
        signed_in.keyboard.press("Tab")
        if signed_in.evaluate("document.activeElement.closest('#reject-form') !== null"):
            break
    else:
        pytest.fail("Reject is never reached with the Tab key")
    # Then the focus can be seen
    outline = signed_in.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", "")

    # When Enter is pressed
    with signed_in.expect_navigation():
        signed_in.keyboard.press("Enter")

    # Then the run is rejected
    assert local.client.review(run["id"])["status"] == "rejected"
