"""The full plan page in a real browser at desktop and phone widths: a change opens from
the keyboard to its diff, the actions read well, long addresses and values wrap, and the
secret is never on the page."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import Shoot
from tests.browser.test_destroy_and_drift import CONTRAST, DESKTOP, PHONE, assert_fits, contrast
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard_plan import CONFIGURATION
from tests.e2e.test_managed_runs import SECRET_VALUE, config, new_workspace

LONG_KEY = "a-resource-key-long-enough-to-need-wrapping-" * 3
LONG_VALUE = "unbroken" * 60

LONG = f"""
resource "test_thing" "long" {{
  for_each = toset(["{LONG_KEY}"])
  name     = each.key
  content  = "{LONG_VALUE}"
}}
"""


def test_the_plan_page_opens_a_change_from_the_keyboard_and_fits_a_phone(
    local: Local, page: Page, shoot: Shoot, tmp_path: Path
) -> None:
    # Given a finished plan with a sensitive value, a long address and a long value
    ws = new_workspace(local, "browser-plan")
    directory = config(tmp_path, CONFIGURATION + LONG)
    run = local.client.create_run(
        ws, directory, kind="plan_only", variables={"password": SECRET_VALUE}
    )
    assert local.client.watch(run["id"], timeout=180)["status"] == "succeeded"
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # When an admin opens its full plan at desktop width
    page.goto(local.stack.login_link())
    page.goto(f"/ui/runs/{run['id']}/plan")

    # Then the counts and the changes are listed collapsed, their actions readable
    expect(page.locator(".plan-counts")).to_contain_text("3 to create")
    changes = page.locator("details.plan-change")
    expect(changes).to_have_count(3)
    for label in page.locator(".plan-counts li, details.plan-change .plan-act").all():
        assert contrast(label) >= CONTRAST, label.inner_text()

    # When a change is opened from the keyboard
    db = page.locator("details.plan-change", has_text="test_thing.db")
    db.locator("summary").focus()
    page.keyboard.press("Enter")

    # Then its diff shows, the sensitive value as "(sensitive)"
    expect(db).to_have_attribute("open", "")
    expect(db.locator(".plan-attrs")).to_contain_text("(sensitive)")
    expect(db.locator(".plan-attrs")).to_contain_text("known after apply")
    assert SECRET_VALUE not in page.content()
    assert_fits(page, DESKTOP, page.locator("details.plan-change summary"))
    shoot("plan-desktop")

    # When the long change is opened too and the page is read on a phone
    page.locator("details.plan-change", has_text=LONG_KEY[:30]).locator("summary").click()
    page.set_viewport_size({"width": PHONE, "height": 800})

    # Then nothing is wider than the screen: the address and the value wrap
    expect(page.locator(".plan-attrs", has_text=LONG_VALUE[:40])).to_be_visible()
    assert_fits(page, PHONE, page.locator("details.plan-change summary"))
    shoot("plan-phone")
    assert not errors, errors
