"""The comments and check runs Runplane posted on pull requests, in the table."""

from __future__ import annotations

from runplane.domain.errors import ConcurrentChange
from runplane.domain.pr_comments import ReportRecord
from runplane.store.models import GitHubReportItem, github_report_key
from runplane.store.transaction import Item, Transaction


def _record(key: str, item: GitHubReportItem) -> ReportRecord:
    return ReportRecord(
        key=key,
        organization_id=item.org_id,
        claimed_at=item.claimed_at,
        github_id=None if item.github_id is None else int(item.github_id),
        source_id=item.source_id,
        source_created_at=item.source_created_at,
    )


def _item(record: ReportRecord) -> GitHubReportItem:
    return GitHubReportItem(
        *github_report_key(record.key),
        org_id=record.organization_id,
        claimed_at=record.claimed_at,
        github_id=record.github_id,
        source_id=record.source_id,
        source_created_at=record.source_created_at,
    )


def _changed(key: str) -> ConcurrentChange:
    return ConcurrentChange(f"the GitHub report {key} changed meanwhile; nothing was written")


class DynamoGitHubReports:
    """``GitHubReportStore`` on the table."""

    def report(self, key: str) -> ReportRecord | None:
        try:
            item = GitHubReportItem.get(*github_report_key(key), consistent_read=True)
        except GitHubReportItem.DoesNotExist:
            return None
        return _record(key, item)

    def claim_report(self, record: ReportRecord) -> None:
        def refused(current: Item | None) -> Exception:
            return _changed(record.key)

        Transaction().put(
            _item(record), condition=GitHubReportItem.pk.does_not_exist(), on_refused=refused
        ).commit()

    def update_report(self, record: ReportRecord, previous: ReportRecord) -> None:
        def refused(current: Item | None) -> Exception:
            return _changed(record.key)

        same_id = (
            GitHubReportItem.github_id.does_not_exist()
            if previous.github_id is None
            else GitHubReportItem.github_id == previous.github_id
        )
        same_source = (
            GitHubReportItem.source_id.does_not_exist()
            if previous.source_id is None
            else GitHubReportItem.source_id == previous.source_id
        )
        condition = (GitHubReportItem.claimed_at == previous.claimed_at) & same_id & same_source
        Transaction().put(_item(record), condition=condition, on_refused=refused).commit()
