"""The workspace page's cloud settings form in a real browser: filled in at desktop
width, and the page with its form fitting a phone's."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Shoot
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, new_workspace

PLAN = "arn:aws:iam::123456789012:role/runplane-plan"
APPLY = "arn:aws:iam::123456789012:role/deploy/runplane-apply"
SECRET = "ext-id-browser-0b1d7e"
GCP = "//iam.googleapis.com/projects/42/locations/global/workloadIdentityPools/ci/providers/rp"
PHONE = 390


def test_an_admin_fills_the_cloud_settings_form_and_the_page_fits_a_phone(
    local: Local, page: Page, shoot: Shoot
) -> None:
    # Given an admin signed in, on the page of a workspace with no cloud settings, at
    # desktop width
    ws = new_workspace(local, "browser-cloud")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(local.stack.login_link())
    page.goto(f"/ui/workspaces/{ws}")
    expect(page.locator("#cloud-credentials")).to_contain_text("None: runs of this workspace")
    form = page.locator("#cloud-form")
    expect(form).to_be_hidden()

    # When they open the form, fill it in and save it
    page.click("#cloud-edit summary")
    expect(form).to_be_visible()
    page.fill("#aws_plan_role_arn", PLAN)
    page.fill("#aws_apply_role_arn", APPLY)
    page.fill("#aws_external_id", SECRET)
    page.fill("#aws_session_duration", "7200")
    page.fill("#aws_region", "eu-west-3")
    page.fill("#gcp_audience", GCP)
    shoot("filled")
    page.click("#cloud-save")

    # Then the page shows the settings, the external ID only as set
    settings = page.locator("#cloud-credentials dl")
    expect(settings).to_contain_text(PLAN)
    expect(settings).to_contain_text(APPLY)
    expect(settings).to_contain_text("7200 s")
    expect(settings).to_contain_text("external ID set")
    assert page.url.endswith(f"/ui/workspaces/{ws}#cloud-credentials")
    assert SECRET not in page.content()
    # And the run API returns them
    read = local.client.cloud_settings(ws)
    assert (read["version"], read["aws_plan_role_arn"], read["aws_external_id_set"]) == (
        1,
        PLAN,
        True,
    )
    assert (read["aws_region"], read["gcp_audience"]) == ("eu-west-3", GCP)
    # (a run pins them: it ends asking for credentials, as its roles do not exist here)
    run = local.client.create_run(ws, HELLO, kind="plan_only")
    shoot("saved")

    # When the page, with a run listed, is opened at a phone's width and the form opened
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.reload()
    expect(page.locator("#runs")).to_contain_text(run["id"])
    page.click("#cloud-edit summary")
    expect(form).to_be_visible()
    expect(page.locator("#aws_plan_role_arn")).to_have_value(PLAN)
    expect(page.locator("#aws_external_id")).to_have_value("")
    shoot("phone")

    # Then nothing is wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE
    # And every field, checkbox and button of the forms is at least 24 px high (WCAG 2.2
    # target size), the form's summary too
    targets = page.locator(
        "#cloud-credentials input:not([type=hidden]), #cloud-credentials button, "
        "#cloud-edit summary"
    ).all()
    assert len(targets) >= 12
    for target in targets:
        box = target.bounding_box()
        assert box is not None
        assert box["height"] >= 24, (target.get_attribute("id"), box)
        assert box["x"] + box["width"] <= PHONE, (target.get_attribute("id"), box)
    # And no page on the way logged an error
    assert errors == []
    ended = local.client.watch(run["id"], until=["plan_credentials_required"], timeout=180)
    assert ended["status"] == "plan_credentials_required"
