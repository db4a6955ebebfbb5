"""A destroy run awaiting approval, and a workspace's drift with its remediation
buttons, in a real browser at desktop and phone widths: the warnings are seen, read
well and fit; the buttons are large enough to press."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import Shoot
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import new_workspace
from tests.e2e.test_run_options import configuration
from tests.e2e.test_schedules import _fire

DESKTOP = 1280
PHONE = 390
# WCAG 2.2: normal text at least 4.5:1 against its background; targets at least 24 px.
CONTRAST = 4.5
TARGET = 24

# The colour of an element's text and of the nearest background behind it, as numbers.
_COLOURS = """element => {
  const rgb = value => value.match(/[0-9.]+/g).slice(0, 4).map(Number);
  let behind = element;
  while (behind && rgb(getComputedStyle(behind).backgroundColor)[3] === 0) {
    behind = behind.parentElement;
  }
  const background = behind ? getComputedStyle(behind).backgroundColor : "rgb(255, 255, 255)";
  return [rgb(getComputedStyle(element).color), rgb(background)];
}"""


# The elements that reach past the screen's right edge: what a failure names.
_WIDER = """width => [...document.querySelectorAll("body *")]
  .filter(e => e.getBoundingClientRect().right > width)
  .map(e => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`)"""


def _luminance(rgb: list[float]) -> float:
    def linear(channel: float) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(element: Locator) -> float:
    """The contrast ratio of the element's text against what is behind it."""
    text, background = element.evaluate(_COLOURS)
    lighter, darker = sorted((_luminance(text), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def top(element: Locator) -> float:
    box = element.bounding_box()
    assert box is not None
    return box["y"]


def assert_fits(page: Page, width: int, targets: Locator) -> None:
    """Nothing is wider than the screen, and every target is tall enough and on it."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.evaluate(
        _WIDER, width
    )
    found = targets.all()
    assert found
    for target in found:
        box = target.bounding_box()
        assert box is not None
        assert box["height"] >= TARGET, (target.inner_text(), box)
        assert box["x"] >= 0, (target.inner_text(), box)
        assert box["x"] + box["width"] <= width, (target.inner_text(), box)


def test_a_destroy_run_and_a_drifted_workspace_read_well_at_desktop_and_phone_widths(
    local: Local, page: Page, shoot: Shoot, tmp_path: Path
) -> None:
    client = local.client
    # Given a workspace managing two resources
    ws = new_workspace(local, "browser-destroy")
    applied = client.create_run(ws, configuration(tmp_path, "a", "b"))
    client.watch(applied["id"], until=["awaiting_approval"], timeout=180)
    client.decide(applied["id"], "approve")
    assert client.watch(applied["id"], timeout=180)["status"] == "succeeded"
    # And drift found by a schedule that fired after the configuration changed
    changed = configuration(tmp_path, "a", "b", name="changed", contents={"a": "v2"})
    client.upload_configuration(ws, changed)
    schedule = client.create_schedule(ws, "0 3 * * *")
    fire_at = datetime.fromisoformat(schedule["next_fire_at"]) + timedelta(seconds=30)
    found = _fire(local, fire_at, ws)
    client.delete_schedule(schedule["id"])
    assert client.watch(found, timeout=180)["plan"]["has_changes"] is True
    # And a destroy run of it awaiting approval
    run = client.create_run(ws, changed, options={"destroy": True})
    waiting = client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    assert waiting["plan"]["summary"]["destroys"] == 2
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # When an admin opens the run's page at desktop width
    page.goto(local.stack.login_link())
    page.goto(f"/ui/runs/{run['id']}")

    # Then a red warning with the plan's count heads the page and the approval bar
    banner = page.locator("#destroy-banner")
    in_bar = page.locator("#approval-bar #approval-destroy")
    warning = "This run DESTROYS every resource it planned for: 2 to destroy"
    expect(banner).to_have_text(warning)
    expect(in_bar).to_have_text(warning)
    assert top(banner) < top(page.locator("#run-header"))
    # And the approve button says it approves a destroy
    approve = page.locator("#approve-form button")
    expect(approve).to_have_text("Approve destroy")
    expect(approve).to_be_enabled()
    expect(page.locator("#run-options")).to_contain_text("destroy: every resource in the state")
    # And the warnings and the button read well
    for element in (banner, in_bar, approve):
        assert contrast(element) >= CONTRAST
    assert_fits(page, DESKTOP, page.locator("#approval-bar button"))
    shoot("destroy-desktop")

    # When the page is read on a phone
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.reload()

    # Then the warnings are still there, nothing is wider than the screen, and the
    # decision buttons are on it and tall enough
    expect(banner).to_be_visible()
    expect(in_bar).to_be_visible()
    assert_fits(page, PHONE, page.locator("#approval-bar button, #destroy-banner"))
    shoot("destroy-phone")

    # When the workspace's page is read on the phone, its auto-destroy armed for two days on
    in_two_days = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    client.set_auto_destroy(ws, {"destroy_at": in_two_days.isoformat()})
    page.goto(f"/ui/workspaces/{ws}")

    # Then the drift is shown with the run that found it, and both remediation buttons
    # fit the screen, tall enough and readable
    drift = page.locator("#drift")
    expect(drift).to_contain_text("0 to add, 1 to change, 0 to destroy")
    expect(page.locator("#drift-run")).to_have_text(found)
    buttons = page.locator("#drift button")
    expect(buttons).to_have_text(
        ["Reconcile (apply the configuration)", "Accept (refresh-only apply)"]
    )
    assert_fits(page, PHONE, buttons)
    assert contrast(page.locator("#drift-summary")) >= CONTRAST
    # And the auto-destroy says when, and its postpone button fits and reads well
    due = page.locator("#auto-destroy-due")
    expect(due).to_contain_text("destroys everything it manages in 2 days")
    expect(due.locator("time")).to_have_attribute("datetime", in_two_days.isoformat())
    expect(due).to_contain_text("waits for approval")
    postpone = page.locator("#auto-destroy-postpone-form button")
    assert_fits(page, PHONE, postpone)
    assert contrast(due) >= CONTRAST
    shoot("drift-phone")

    # And at desktop width too
    page.set_viewport_size({"width": DESKTOP, "height": 900})
    page.reload()
    assert_fits(page, DESKTOP, buttons)
    shoot("drift-desktop")
    # And the postpone button moves the auto-destroy a day later
    postpone.click()
    later = (in_two_days + timedelta(days=1)).isoformat()
    expect(due.locator("time")).to_have_attribute("datetime", later)
    expect(page.locator("#auto-destroy-postponed")).to_contain_text("Postponed by you: now due")
    assert client.auto_destroy(ws)["postponed_by"].startswith("user:")
    # And no page logged an error
    assert errors == []
    client.decide(run["id"], "reject")
