"""A pull request's comment and check runs end to end: the signed webhook through the
embedded stack, the real engine planning each commit, and the fake GitHub over real HTTP
receiving one comment, edited in place on every push, and a check run per commit; never
a sensitive value."""

from __future__ import annotations

import json
import uuid
from functools import partial
from typing import Any

from tests.e2e.conftest import Local
from tests.e2e.test_dashboard_plan import CONFIGURATION
from tests.e2e.test_github import (
    bound_workspace,
    eventually,
    post_webhook,
    pull_request,
    sha_of,
)
from tests.e2e.test_managed_runs import SECRET_VALUE
from tests.github_fake import FakeGitHub

NUMBER = 12
# Another pull request's number: the other test counts every comment POST to its own.
LONG_NUMBER = 13


def runs_beyond(local: Local, workspace_id: str, count: int) -> list[dict[str, Any]]:
    """The workspace's runs, newest first, once there are more than ``count``."""
    found = local.client.list_runs(workspace_id)
    return found if len(found) > count else []


def finished_comment(
    fake: FakeGitHub, repository: str, sha: str, number: int = NUMBER
) -> list[dict[str, Any]]:
    """The pull request's comments showing ``sha``'s plan finished."""
    return [
        c
        for c in fake.reviews.comments_on(repository, number)
        if f"`{sha[:12]}`" in c["body"] and "| succeeded |" in c["body"]
    ]


def test_one_comment_follows_three_pushes_and_never_shows_a_sensitive_value(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given a workspace bound to the repository, with a sensitive variable its plan uses
    repository = f"acme/comments-{uuid.uuid4().hex[:6]}"
    ws = bound_workspace(local, repository, "main", "", "plan_and_apply")
    local.client.set_variable(ws, "password", SECRET_VALUE, sensitive=True)
    reviews = fake_github.reviews
    shas = []

    # When a pull request is opened, then pushed to twice, each commit planned
    for push in range(3):
        extra = "" if push == 0 else f'resource "test_thing" "extra{push}" {{\n  name = "e"\n}}\n'
        sha = sha_of(f"{repository}-{push}")
        fake_github.add_commit(repository, sha, {"main.tf": CONFIGURATION + extra})
        event = pull_request(repository, sha, NUMBER)
        event["action"] = "opened" if push == 0 else "synchronize"
        status, body, _ = post_webhook(local, "pull_request", event)
        assert status == 202, body
        shas.append(sha)
        runs = eventually(partial(runs_beyond, local, ws, push), what="the push's run")
        run = runs[0]  # the newest
        assert local.client.watch(run["id"], timeout=180)["status"] == "succeeded"
        eventually(
            partial(finished_comment, fake_github, repository, sha),
            what="the comment showing the finished plan of the push",
        )

    # Then the pull request has one comment, created once and edited in place
    [comment] = reviews.comments_on(repository, NUMBER)
    assert comment["edits"] >= 5
    body = comment["body"]
    assert "+3 ~0 -0" in body
    assert "test&#95;thing.extra2" in body
    assert f"/ui/runs/{run['id']}" in body
    # (the fake serves every test: only this repository's pull request counts)
    posts = [
        (m, p)
        for m, p, _ in reviews.sent
        if p.endswith(f"/repos/{repository}/issues/{NUMBER}/comments")
    ]
    assert [m for m, _ in posts] == ["POST"]
    # And each commit a check run of the workspace, completed with the plan's summary
    for sha in shas:
        [check] = reviews.checks_for(sha)
        assert check["name"] == f"runplane/{ws}"
        assert (check["status"], check["conclusion"]) == ("completed", "success")
        assert "test&#95;thing.db" in check["output"]["summary"]
    # And nothing sent to GitHub's comments or checks holds the sensitive value
    assert SECRET_VALUE not in json.dumps(reviews.sent)


def test_a_comment_too_long_for_github_is_cut_with_a_link_to_the_run_page(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given a workspace bound to the repository, and a pull request whose plan creates
    # 520 resources with long addresses (well beyond GitHub's 65,536 characters)
    repository = f"acme/long-{uuid.uuid4().hex[:6]}"
    ws = bound_workspace(local, repository, "main", "", "plan_only")
    name = "a_resource_whose_name_is_long_enough_" + "x" * 160
    configuration = (
        'terraform {\n  required_providers {\n    test = { source = "runplane/test", '
        'version = "0.1.0" }\n  }\n}\n'
        f'resource "test_thing" "{name}" {{\n  count = 520\n  name  = "n${{count.index}}"\n}}\n'
    )
    sha = sha_of(f"{repository}-long")
    fake_github.add_commit(repository, sha, {"main.tf": configuration})
    event = pull_request(repository, sha, LONG_NUMBER)
    event["action"] = "opened"

    # When the pull request is opened and its plan made
    status, body, _ = post_webhook(local, "pull_request", event)
    assert status == 202, body
    [run] = eventually(partial(runs_beyond, local, ws, 0), what="the pull request's run")
    assert local.client.watch(run["id"], timeout=300)["status"] == "succeeded"
    [comment] = eventually(
        partial(finished_comment, fake_github, repository, sha, LONG_NUMBER),
        what="the finished comment",
    )

    # Then the comment GitHub received fits its limit, says it was cut, links to the run
    # page, and still shows the workspace's row with its counts
    text = comment["body"]
    assert len(text) <= 65_536
    assert "truncated" in text
    assert f"/ui/runs/{run['id']}" in text
    assert "+520 ~0 -0" in text
