"""A pull request's run page in a real browser: who sent it and what it is, at desktop
and phone widths."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import ARTIFACTS
from tests.e2e.conftest import Local, fake_github
from tests.e2e.test_github import (
    bound_workspace,
    eventually,
    main_tf,
    post_webhook,
    pull_request,
    sha_of,
)
from tests.github_fake import FakeGitHub

__all__ = ["fake_github"]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_pull_requests_run_page_names_its_sender_and_title_and_its_source_fits(
    browser: Browser, local: Local, fake_github: FakeGitHub, width: int
) -> None:
    # Given a speculative run of a pull request opened by bob, with a long title, that
    # carol updated
    repository = f"acme/page-{uuid.uuid4().hex[:6]}"
    ws = bound_workspace(local, repository, "main", "envs/prod")
    sha = sha_of(repository + "page")
    fake_github.add_commit(repository, sha, {"envs/prod/main.tf": main_tf("page")})
    delivered = pull_request(repository, sha, 31)
    delivered["sender"] = {"login": "carol"}
    title = "Move the load balancers to the new subnets and widen the health check " * 3
    delivered["pull_request"] |= {"title": title, "user": {"login": "bob"}}
    status, body, _ = post_webhook(local, "pull_request", delivered)
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(ws), what="the PR's run")[0]
    local.client.watch(run["id"], timeout=180)

    # When it is opened in a browser of this width
    context = browser.new_context(base_url=local.url, viewport={"width": width, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    shots = ARTIFACTS / f"run-source-{width}"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        page.goto(local.stack.login_link())
        page.goto(f"/ui/runs/{run['id']}")
        source = page.locator("#run-source")
        page.screenshot(path=str(shots / "run.png"), full_page=True)

        # Then the source names the pull request, its author, its (cut) title and the
        # sender, and is no wider than the screen
        expect(source).to_contain_text("pull request #31")
        expect(source).to_contain_text("by bob")
        expect(page.locator("#run-source-sender")).to_have_text("carol")
        shown = page.locator("#run-source-title").inner_text()
        assert shown.startswith("Move the load balancers")
        assert len(shown) <= 120
        box = source.bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= width
        # and nothing else on the page is wider than the screen either
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0
        assert errors == []
    finally:
        context.close()
