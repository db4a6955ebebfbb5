"""Path filters over real HTTP: the embedded stack asks the fake GitHub for a pull
request's changed files; a pull request touching only docs starts nothing, records why
on its ingestion and gets a "skipped" commit status; one touching the working directory
plans (docs/github.md, "Path filters")."""

from __future__ import annotations

import uuid

from tests.e2e.conftest import Local, unique
from tests.e2e.github_connect import held_once
from tests.e2e.test_github import (
    INSTALLATION,
    eventually,
    main_tf,
    post_webhook,
    pull_request,
    sha_of,
)
from tests.github_fake import FakeGitHub


def _filtered_workspace(local: Local, repository: str) -> str:
    held_once(local, INSTALLATION, account="acme")
    ws = str(local.client.create_workspace(unique("pf"))["id"])
    bound = local.client.bind_github(
        ws,
        repository=repository,
        branch="main",
        working_directory="envs/prod",
        installation_id=INSTALLATION,
        push_run_kind="plan_only",
        trigger_patterns=["modules/**/*.tf"],
        ignore_patterns=["**/*.md"],
    )
    assert bound["trigger_patterns"] == ["modules/**/*.tf"]
    return ws


def test_a_pull_request_touching_only_docs_starts_nothing_and_records_why(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given a workspace bound with path filters, and a pull request changing docs only
    repository = f"acme/pf-{uuid.uuid4().hex[:6]}"
    ws = _filtered_workspace(local, repository)
    sha = sha_of(repository + "docs")
    fake_github.add_commit(repository, sha, {"envs/prod/main.tf": main_tf("docs")})
    fake_github.pull_request_files[(repository, 8)] = ["docs/guide.md", "README.md"]

    # When the pull request is opened
    status, body, _ = post_webhook(local, "pull_request", pull_request(repository, sha, 8))

    # Then the commit gets a success status saying it was skipped,
    assert status == 202, body
    skipped = eventually(lambda: fake_github.statuses_for(sha), what="the skipped status")
    assert skipped[0]["state"] == "success"
    assert skipped[0]["context"] == f"runplane/{ws}"
    assert skipped[0]["description"].startswith("skipped: none of the 2 changed files")
    # the ingestion records the decision with its counts, no run was made,
    ingestion = local.client.github_ingestion(body["source_id"])
    assert (ingestion["status"], ingestion["targets"]) == ("ready", [])
    assert ingestion["path_filters"] == [
        {
            "workspace_id": ws,
            "decision": "skipped",
            "reason": "none of the 2 changed files matches the trigger patterns",
            "files_considered": 2,
            "files_matched": 0,
            "fallback": None,
        }
    ]
    assert local.client.list_runs(ws) == []
    # and the commit was never downloaded
    assert sha not in fake_github.downloads


def test_a_pull_request_touching_the_working_directory_plans(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given the same binding and a pull request changing the working directory and a doc
    repository = f"acme/pf-{uuid.uuid4().hex[:6]}"
    ws = _filtered_workspace(local, repository)
    sha = sha_of(repository + "code")
    fake_github.add_commit(repository, sha, {"envs/prod/main.tf": main_tf("code")})
    fake_github.pull_request_files[(repository, 9)] = ["envs/prod/main.tf", "docs/a.md"]

    # When the pull request is opened
    status, body, _ = post_webhook(local, "pull_request", pull_request(repository, sha, 9))

    # Then a speculative plan is created, and the decision says one of two files matched
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(ws), what="the PR's run")[0]
    assert run["kind"] == "speculative"
    ingestion = local.client.github_ingestion(body["source_id"])
    [decided] = ingestion["path_filters"]
    assert (decided["decision"], decided["files_matched"], decided["files_considered"]) == (
        "triggered",
        1,
        2,
    )
    assert local.client.watch(run["id"], timeout=180)["status"] == "succeeded"
