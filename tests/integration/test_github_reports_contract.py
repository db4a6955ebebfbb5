"""The pull request reports store's contract: the same cases against the DynamoDB store
(on moto) and the in-memory fake the service tier uses, so the fake cannot drift. A
claim is put once; a record is replaced only while it is still what its writer read."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.errors import ConcurrentChange
from runplane.domain.pr_comments import ReportRecord, comment_key
from runplane.services.repositories.github_reports import GitHubReportStore
from runplane.store.github_reports import DynamoGitHubReports
from tests.fakes_github_reports import InMemoryGitHubReports

AT = datetime(2026, 1, 1, tzinfo=UTC)
KEY = comment_key("org-1", "acme/infra", 7)


@pytest.fixture(params=["dynamodb", "memory"])
def store(request: pytest.FixtureRequest) -> GitHubReportStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoGitHubReports()
    return InMemoryGitHubReports()


def test_a_claim_is_put_once_and_read_back(store: GitHubReportStore) -> None:
    # Given a claim of a comment
    claim = ReportRecord(KEY, "org-1", AT, None, "src-1", AT)
    store.claim_report(claim)

    # When another reporter claims it too
    with pytest.raises(ConcurrentChange):
        store.claim_report(replace(claim, claimed_at=AT + timedelta(seconds=1)))

    # Then the first claim stands, and nothing else is under another key
    assert store.report(KEY) == claim
    assert store.report(comment_key("org-2", "acme/infra", 7)) is None


def test_a_record_is_replaced_only_while_it_is_what_was_read(store: GitHubReportStore) -> None:
    # Given a claim settled with GitHub's ID
    claim = ReportRecord(KEY, "org-1", AT, None, "src-1", AT)
    store.claim_report(claim)
    settled = replace(claim, github_id=4242)
    store.update_report(settled, claim)

    # When a reporter that read the claim before it was settled writes
    with pytest.raises(ConcurrentChange):
        store.update_report(replace(claim, claimed_at=AT + timedelta(minutes=5)), claim)
    # And one that read the settled record moves it to a newer push
    newer = replace(settled, source_id="src-2", source_created_at=AT + timedelta(minutes=1))
    store.update_report(newer, settled)

    # Then only the second write took
    assert store.report(KEY) == newer
    with pytest.raises(ConcurrentChange):
        store.update_report(replace(newer, source_id="src-3"), settled)
    assert store.report(KEY) == newer


def test_replacing_a_record_that_is_not_there_is_refused(store: GitHubReportStore) -> None:
    claim = ReportRecord(KEY, "org-1", AT)
    with pytest.raises(ConcurrentChange):
        store.update_report(claim, claim)
    assert store.report(KEY) is None
