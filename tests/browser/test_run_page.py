"""The dashboard in a real browser: sign in, follow a run live, decide, recover."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import WIDER, blocking
from tests.browser.conftest import RUN_TIMEOUT_MS, Shoot
from tests.e2e.conftest import Local
from tests.e2e.test_cancellation import SLOW_APPLY
from tests.e2e.test_cli import cli_json, connect
from tests.e2e.test_managed_runs import HELLO, config, new_workspace, writer_of


def sign_in(page: Page, local: Local) -> None:
    page.goto(local.stack.login_link())
    expect(page.locator("h1")).to_have_text("Workspaces")


def test_a_run_from_the_cli_is_followed_live_approved_in_the_page_and_applied(
    local: Local, page: Page, shoot: Shoot, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a browser signed in with the one-time login link
    sign_in(page, local)
    assert "code=" not in page.url
    # And a run created from the CLI, whose page is opened at once
    ws = new_workspace(local, "browser-approve")
    run = cli_json(capsys, "run", "create", "--workspace", ws, "--dir", str(HELLO), *connect(local))
    page.goto(f"/ui/runs/{run['id']}")
    shoot("opened")

    # When the page is left alone, it follows the run to its approval
    approve = page.locator("#approve-form button")
    expect(approve).to_be_enabled(timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "awaiting_approval")
    expect(page.locator("#plan-log pre")).to_contain_text("Plan: 1 to add")
    expect(page.locator("#approval-bar .countdown")).to_contain_text("left")
    shoot("awaiting-approval")

    # When Approve is clicked
    approve.click()

    # Then the page reads Applied, with the apply log, without a reload by anyone
    expect(page.locator("#run-label")).to_have_text("Applied", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#apply-log pre")).to_contain_text("Apply complete!")
    expect(page.locator("#approve-form")).to_have_count(0)
    shoot("applied")
    done = local.client.review(run["id"])
    assert (done["status"], done["approval"]["status"]) == ("succeeded", "approved")


def test_an_expired_run_shows_the_expiry_and_a_disabled_approval_bar(
    local: Local, page: Page, shoot: Shoot
) -> None:
    # Given a run with an approval window of a few seconds, and its page
    ws = new_workspace(local, "browser-expired")
    local.client.set_approval_window(ws, 5)
    run = local.client.create_run(ws, HELLO)
    sign_in(page, local)
    page.goto(f"/ui/runs/{run['id']}")

    # When the window runs out while the page is open
    # Then the page shows the expiry, and its decision buttons are disabled
    expect(page.locator("#run-label")).to_have_text("Expired", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#deadline-passed")).to_be_visible()
    buttons = page.locator("#decision-closed button")
    expect(buttons).to_have_count(2)
    for index in range(2):
        expect(buttons.nth(index)).to_be_disabled()
    expires_at = local.client.review(run["id"])["approval"]["expires_at"]
    expect(page.locator("#approval-deadline")).to_have_attribute("datetime", expires_at)
    shoot("expired")


def test_an_apply_followed_live_then_canceled_is_recovered_through_the_page(
    local: Local, page: Page, shoot: Shoot, tmp_path: Path
) -> None:
    # Given a run applying a slow change, and its page open
    ws = new_workspace(local, "browser-recover")
    run = local.client.create_run(ws, config(tmp_path, SLOW_APPLY))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    sign_in(page, local)
    page.goto(f"/ui/runs/{run['id']}")
    local.client.decide(run["id"], "approve")
    expect(page.locator("#run-status")).to_have_attribute(
        "data-status", "applying", timeout=RUN_TIMEOUT_MS
    )

    # When the engine writes to the apply log
    # Then the page shows it as it comes, without reloading
    page.evaluate("window.stillTheSamePage = true")
    expect(page.locator("#apply-log pre")).to_contain_text("test_thing.slow: Creating...")
    expect(page.locator("#apply-log .live-note")).to_have_text("(live)")
    assert page.evaluate("window.stillTheSamePage === true")
    shoot("applying-live")

    # When the apply is canceled from the page
    page.click("#cancel-form button")

    # Then the run needs recovery, and the panel compares the state pointers
    expect(page.locator("#run-status")).to_have_attribute("data-status", "apply_interrupted")
    panel = page.locator("#recovery-panel")
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("(unmoved)")
    shoot("recovery-required")
    # And the page with its recovery form passes the accessibility check, on a phone too
    assert blocking(page) == []
    page.set_viewport_size({"width": 390, "height": 900})
    assert blocking(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, page.evaluate(WIDER, 390)
    shoot("recovery-required-phone")
    page.set_viewport_size({"width": 1280, "height": 900})

    # When the operator picks an emergency import but sends no file
    page.check("input[name=resolution][value=import_emergency_state]")
    page.fill("#recover-reason", "the slow thing was never created")
    page.check("#recover-confirm")
    page.click("#recover-submit")

    # Then the refusal is a readable typed error, and nothing changed
    expect(page.locator("p.error")).to_contain_text("INVALID_INPUT")
    expect(page.locator("p.error")).to_contain_text("needs the emergency state")
    shoot("refused")
    assert writer_of(ws)[0] == run["id"]

    # When the operator goes back and confirms the current state instead
    page.click("#back-to-run")
    page.check("input[name=resolution][value=current_state_verified]")
    page.fill("#recover-reason", "the slow thing was never created")
    page.check("#recover-confirm")
    page.click("#recover-submit")

    # Then the recovery is complete and the workspace released
    expect(page.locator("#recovery-result")).to_contain_text("current_state_verified")
    expect(page.locator("#recover-form")).to_have_count(0)
    shoot("recovered")
    assert writer_of(ws) == (None, None)
