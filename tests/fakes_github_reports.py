"""In-memory ``GitHubReportStore`` (the table's promises, held by the same contract test)."""

from __future__ import annotations

from runplane.domain.errors import ConcurrentChange
from runplane.domain.pr_comments import ReportRecord


class InMemoryGitHubReports:
    def __init__(self) -> None:
        self.records: dict[str, ReportRecord] = {}

    def report(self, key: str) -> ReportRecord | None:
        return self.records.get(key)

    def claim_report(self, record: ReportRecord) -> None:
        if record.key in self.records:
            raise ConcurrentChange(f"the GitHub report {record.key} changed meanwhile")
        self.records[record.key] = record

    def update_report(self, record: ReportRecord, previous: ReportRecord) -> None:
        current = self.records.get(record.key)
        if current is None or (current.claimed_at, current.github_id, current.source_id) != (
            previous.claimed_at,
            previous.github_id,
            previous.source_id,
        ):
            raise ConcurrentChange(f"the GitHub report {record.key} changed meanwhile")
        self.records[record.key] = record
