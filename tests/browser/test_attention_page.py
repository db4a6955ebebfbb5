"""The attention inbox in a real browser at desktop and phone widths: the header's link
names its count in words, the cards fit the screen and read well, and the run's link
is reached from the keyboard."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from runplane.domain.identity import Permission
from tests.browser.conftest import Shoot
from tests.browser.test_destroy_and_drift import CONTRAST, DESKTOP, PHONE, assert_fits, contrast
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard_attention import _awaiting, _organization


def test_the_inbox_reads_well_and_fits_at_desktop_and_phone_widths(
    local: Local, page: Page, shoot: Shoot
) -> None:
    # Given an organization with a run awaiting approval
    org_id, _, client = _organization(local, "browser-attn")
    run = _awaiting(client, "browser-attention-with-a-rather-long-workspace-name")
    assert local.stack.services is not None
    code = local.stack.services.web_sessions.issue_login_code(
        org_id, "admin", frozenset(Permission), created_by="tests"
    )
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # When an admin signs in and follows the header's Attention link
    page.goto(f"/ui/login?code={code}")
    link = page.get_by_role("link", name="Attention 1 item needs a person")
    expect(link).to_be_visible()
    link.click()

    # Then the page lists the run with its time left, the count badge and the time read
    # well, and nothing is wider than the screen
    expect(page).to_have_url(re.compile("/ui/attention$"))
    card = page.locator("#awaiting-approval .attention-card")
    expect(card).to_have_count(1)
    expect(card).to_contain_text(run["id"])
    expect(card.locator(".time-left")).to_have_text(re.compile(r"^6d 23h left$"))
    expect(page.locator("#needs-recovery")).to_contain_text("No run needs recovery.")
    for element in (card.locator(".time-left"), page.locator("header .count")):
        assert contrast(element) >= CONTRAST
    assert_fits(page, DESKTOP, card.locator("a"))
    shoot("attention-desktop")

    # When it is read on a phone
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.reload()
    # Then the card and the header still fit
    assert_fits(page, PHONE, page.locator("header.top a.attention-link, #awaiting-approval a"))
    shoot("attention-phone")

    # When the run's link is reached from the keyboard and pressed
    run_link = card.get_by_role("link", name=f"Run {run['id']}")
    run_link.focus()
    page.keyboard.press("Enter")
    # Then the run's page opens; and no script failed along the way
    expect(page).to_have_url(re.compile(f"/ui/runs/{run['id']}$"))
    assert errors == []
    client.cancel(run["id"])
