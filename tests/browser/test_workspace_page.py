"""The workspace page and the workspace list in a real browser, at desktop and phone
widths: an applied workspace's state, its lock and settings forms, nothing wider than
the screen and every control tall enough."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import Shoot
from tests.browser.test_destroy_and_drift import DESKTOP, PHONE, assert_fits
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard_workspace import SECRET, applied_workspace


def test_the_workspace_page_and_list_read_well_at_desktop_and_phone_widths(
    local: Local, page: Page, shoot: Shoot, tmp_path: Path
) -> None:
    # Given a workspace a real run applied, and an admin signed in at a phone's width
    ws, run_id = applied_workspace(local, tmp_path, "browser-ws")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(local.stack.login_link())
    page.set_viewport_size({"width": PHONE, "height": 900})

    # When the workspace page is opened, its settings form open
    page.goto(f"/ui/workspaces/{ws}")
    page.click("#settings-edit summary")

    # Then the state, the sensitive output masked, and the latest run are shown
    expect(page.locator("#state-resources")).to_have_text("2")
    expect(page.locator("#outputs")).to_contain_text("(sensitive)")
    expect(page.locator("#latest-run")).to_contain_text(run_id)
    assert SECRET not in page.content()
    # And nothing is wider than the screen, every control tall enough
    controls = page.locator(
        "#lock button, #lock input:not([type=hidden]), #settings-form button, "
        "#settings-form input:not([type=hidden]), #settings-form select, #settings-edit summary"
    )
    assert_fits(page, PHONE, controls)
    shoot("workspace-phone")

    # When the workspace is locked from the page
    page.fill("#lock-reason-input", "moving the database")
    page.click("#lock-form button")

    # Then the page says who holds it and why, with Unlock
    expect(page.locator("#lock-reason")).to_contain_text("moving the database")
    expect(page.locator("#unlock-form button")).to_be_visible()
    assert_fits(page, PHONE, page.locator("#unlock-form button"))

    # When the list is read on the phone, then each workspace is a card that fits
    page.goto("/")
    row = page.locator(f"#ws-{ws}")
    expect(row).to_contain_text("succeeded")
    expect(row).to_contain_text("locked by you")
    assert_fits(page, PHONE, row.locator("a"))
    shoot("list-phone")

    # And at desktop width too
    page.set_viewport_size({"width": DESKTOP, "height": 900})
    page.reload()
    assert_fits(page, DESKTOP, row.locator("a"))
    page.goto(f"/ui/workspaces/{ws}")
    page.click("#unlock-form button")
    expect(page.locator("#lock-form")).to_be_visible()
    assert_fits(page, DESKTOP, page.locator("#lock button"))
    shoot("workspace-desktop")
    # And no page logged an error
    assert errors == []


def test_the_workspace_list_pages_and_its_links_fit_a_phone(
    local: Local, page: Page, shoot: Shoot
) -> None:
    # Given an organization with more workspaces than a page shows (50)
    for number in range(50):
        local.client.create_workspace(f"zz-paging-{number:02d}")
    page.goto(local.stack.login_link())
    page.set_viewport_size({"width": PHONE, "height": 900})
    # When the list is read on a phone
    page.goto("/")
    pages = page.locator('nav[aria-label="Workspace pages"]')
    # Then it says which page of how many, with a link to the next that fits
    expect(pages).to_contain_text("Page 1 of")
    assert_fits(page, PHONE, pages.locator("a"))
    shoot("list-paging-phone")
    # When the last page is opened from its links
    while page.locator('a[rel="next"]').count():
        page.click('a[rel="next"]')
    # Then the last workspaces by name are there, with a link back that fits
    expect(page.locator("main")).to_contain_text("zz-paging-49")
    assert_fits(page, PHONE, pages.locator("a"))
    # And at desktop width too
    page.set_viewport_size({"width": DESKTOP, "height": 900})
    page.reload()
    assert_fits(page, DESKTOP, pages.locator("a"))
    shoot("list-paging-desktop")
