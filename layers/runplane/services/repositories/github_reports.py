"""The seam of what Runplane posted on pull requests (comments and check runs).

The DynamoDB implementation is ``store.github_reports.DynamoGitHubReports``; the
in-memory one ``tests/fakes_github_reports.py``; both held to the same cases by
``tests/integration/test_github_reports_contract.py``.
"""

from __future__ import annotations

from typing import Protocol

from runplane.domain.pr_comments import ReportRecord


class GitHubReportStore(Protocol):
    """- ``report`` is the record under a key, or None.
    - ``claim_report`` puts a record only if none is under its key, else
      ``ConcurrentChange`` (another reporter claimed it first: read it again).
    - ``update_report`` replaces the record only while it is still ``previous`` (same
      claim time, GitHub ID and source), else ``ConcurrentChange``.
    """

    def report(self, key: str) -> ReportRecord | None: ...

    def claim_report(self, record: ReportRecord) -> None: ...

    def update_report(self, record: ReportRecord, previous: ReportRecord) -> None: ...
