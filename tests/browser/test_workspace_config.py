"""The workspace page's configuration sections in a real browser: a variable added and
a sensitive one edited with the keyboard at desktop width, and every section, its
forms open, fitting a phone's."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Shoot
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard_workspace_config import api, given_configuration

SECRET = "browser-s3cr3t-ws-config-5d0a"
PHONE = 390
SECTIONS = ("#variables", "#schedules", "#run-triggers", "#notifications", "#source")


def test_an_admin_edits_variables_with_the_keyboard_and_the_sections_fit_a_phone(
    local: Local, page: Page, shoot: Shoot
) -> None:
    # Given a workspace with one of everything, a sensitive variable among its
    # variables, and an admin signed in on its page at desktop width
    given = given_configuration(local)
    ws = given.ws
    local.client.set_variable(ws, "token", SECRET, sensitive=True, description="old")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(local.stack.login_link())
    page.goto(f"/ui/workspaces/{ws}")
    for section in SECTIONS:
        expect(page.locator(section)).to_be_visible()
    expect(page.locator("#variable-add-form")).to_be_hidden()

    # When they open the add form and fill it with the keyboard only
    page.focus("#variable-add summary")
    page.keyboard.press("Enter")
    expect(page.locator("#variable-add-form")).to_be_visible()
    page.keyboard.press("Tab")
    page.keyboard.type("instance_type")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.type("t3.small")
    shoot("adding")
    page.focus("#variable-add-form button[type=submit]")
    page.keyboard.press("Enter")

    # Then the page lists it, back at the variables
    expect(page.locator("#var-terraform-instance_type")).to_contain_text("t3.small")
    assert page.url.endswith(f"/ui/workspaces/{ws}#variables")

    # When the sensitive variable's description is changed, its value field left empty
    page.click("#var-terraform-token summary")
    expect(page.locator("#var-value-terraform-token")).to_have_value("")
    page.fill("#var-description-terraform-token", "rotated monthly")
    page.click("#var-edit-terraform-token button[type=submit]")

    # Then the description changed, the value is kept and is nowhere in the page
    expect(page.locator("#var-terraform-token")).to_contain_text("rotated monthly")
    listed = {v["name"]: v for v in local.client.list_variables(ws)}
    assert listed["token"]["sensitive"] is True
    assert SECRET not in page.content()
    shoot("desktop")

    # When the page is opened at a phone's width with every form unfolded
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.reload()
    for summary in page.locator(".ws-config details summary").all():
        summary.click()
    shoot("phone")

    # Then nothing is wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE
    # And every field, checkbox, button and summary of the sections is at least 24 px
    # high and within the screen
    targets = page.locator(
        ".ws-config input:not([type=hidden]), .ws-config select, .ws-config textarea, "
        ".ws-config button, .ws-config summary"
    ).all()
    assert len(targets) >= 30
    for target in targets:
        box = target.bounding_box()
        assert box is not None
        assert box["height"] >= 24, (target.get_attribute("id"), box)
        assert box["x"] + box["width"] <= PHONE, (target.get_attribute("id"), box)
    # And the destination's host is shown, the API's view of it
    destinations = api(local, "GET", f"/workspaces/{ws}/notifications")["destinations"]
    expect(page.locator("#notifications")).to_contain_text(destinations[0]["url"])
    # And no page on the way logged an error (a CSP refusal would)
    assert errors == []
