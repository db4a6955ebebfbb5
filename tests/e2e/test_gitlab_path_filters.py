"""GitLab path filters end to end: a workspace bound with the CLI's trigger pattern, a
merge request delivered through the embedded stack's gateway, the source workflow
asking the fake GitLab (over real HTTP) for the merge request's diffs, and the decision
read back from the ingestion."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from runplane.cli import main
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cli import connect
from tests.e2e.test_github import eventually, main_tf, sha_of
from tests.e2e.test_gitlab import MERGE_REQUEST, merge_request, post_hook, project
from tests.gitlab_fake import FakeGitLab


@pytest.fixture(scope="module")
def fake_gitlab() -> Iterator[FakeGitLab]:
    fake = FakeGitLab().start()
    try:
        yield fake
    finally:
        fake.stop()


def test_a_merge_request_touching_only_docs_starts_nothing_and_records_why(
    local: Local,
    fake_gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a workspace bound with the CLI, triggered only by Terraform files
    held = project(fake_gitlab, "filtered")
    name = unique("glf")
    assert main(["workspace", "create", name, *connect(local)]) == 0
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(held.token + "\n"))
    code = main(
        [
            "workspace", "gitlab", name,
            "--base-url", fake_gitlab.url,
            "--project", held.path,
            "--branch", "main",
            "--trigger-pattern", "**/*.tf",
            "--ignore-pattern", "docs/**",
            *connect(local),
            "--json",
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    bound = json.loads(out)
    assert (bound["trigger_patterns"], bound["ignore_patterns"]) == (["**/*.tf"], ["docs/**"])
    ws, hook_token = bound["workspace_id"], bound["webhook_token"]
    # And a merge request whose 120 changed files (two pages of diffs) are all docs
    sha = sha_of(held.path + "docs")
    fake_gitlab.add_commit(held, sha, {"main.tf": main_tf("docs")})
    held.merge_request_files[3] = [f"docs/page{i}.md" for i in range(119)] + ["README.md"]

    # When GitLab delivers the merge request
    status, body, _ = post_hook(local, MERGE_REQUEST, merge_request(held, sha, 3), hook_token)

    # Then it is accepted, and the merge request's commit says the workspace was skipped
    assert status == 202, body
    (skipped,) = eventually(lambda: fake_gitlab.statuses_for(sha), what="the skipped status")
    assert skipped["state"] == "success"
    assert skipped["name"] == f"runplane/{ws}"
    assert skipped["description"].startswith("skipped: none of the 120 changed files")
    # And the ingestion records why, read with the CLI like a GitHub one
    capsys.readouterr()
    assert main(["github", "ingestion", body["source_id"], *connect(local), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "ready"
    assert shown["targets"] == []
    assert shown["path_filters"] == [
        {
            "workspace_id": ws,
            "decision": "skipped",
            "reason": "none of the 120 changed files matches the trigger patterns",
            "files_considered": 120,
            "files_matched": 0,
            "fallback": None,
        }
    ]
    # And nothing was downloaded and no run was created
    assert (held.path, sha) not in fake_gitlab.downloads
    assert local.client.list_runs(ws) == []
    assert ("diffs", held.path, "3") in fake_gitlab.files_asked
    assert held.token not in json.dumps(shown) + json.dumps(skipped)
