"""The GitLab client lists a merge request's or a push's changed files over real HTTP
(the fake GitLab on loopback): every page of a merge request's diffs, both names of a
rename, a comparison of two commits, and a refusal as an error (never a partial list)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runplane.adapters.gitlab import GitLabProject
from runplane.domain.errors import RunplaneError
from tests.gitlab_fake import FakeGitLab, Project

TOKEN = "glpat-changed-files-token"


@pytest.fixture
def fake() -> Iterator[tuple[FakeGitLab, Project]]:
    gitlab = FakeGitLab().start()
    try:
        yield gitlab, gitlab.add_project(42, "acme/infra", TOKEN)
    finally:
        gitlab.stop()


def test_every_page_of_a_merge_requests_diffs_is_read(fake: tuple[FakeGitLab, Project]) -> None:
    # Given a merge request changing 250 files (three pages of 100)
    gitlab, held = fake
    held.merge_request_files[7] = [f"modules/m{i}/main.tf" for i in range(250)]
    # When its changed files are listed
    changed = GitLabProject(gitlab.url, "acme/infra", TOKEN).merge_request_files(7)
    # Then all of them are, and the list is complete
    assert len(changed.paths) == 250
    assert changed.paths[-1] == "modules/m249/main.tf"
    assert changed.fallback is None


def test_a_push_is_compared_from_its_previous_head(fake: tuple[FakeGitLab, Project]) -> None:
    # Given two commits differing in two files
    gitlab, held = fake
    held.compared_files[("a" * 40, "b" * 40)] = ["README.md", "envs/prod/main.tf"]
    # When the push from one to the other is compared
    changed = GitLabProject(gitlab.url, "42", TOKEN).compare_files("a" * 40, "b" * 40)
    # Then both files are listed
    assert changed.paths == ("README.md", "envs/prod/main.tf")
    assert changed.fallback is None


def test_a_refused_listing_is_an_error_not_an_empty_list(
    fake: tuple[FakeGitLab, Project],
) -> None:
    # Given a client holding the wrong token
    gitlab, held = fake
    held.merge_request_files[7] = ["main.tf"]
    client = GitLabProject(gitlab.url, "acme/infra", "glpat-wrong")
    # When the changed files are listed, Then it fails (so the filters fail open)
    with pytest.raises(RunplaneError) as refused:
        client.merge_request_files(7)
    assert "glpat" not in refused.value.message
