"""A pull request's comment and check runs: built from each run's plan view (never from
the raw plan, so no sensitive value can reach GitHub), posted once, then edited in place.

Create-once needs a claim before the POST: a reporter first records a claim with a
conditional write, posts, then records GitHub's ID. A reporter that finds a claim
without an ID leaves it to its owner (``GitHubUnavailable``: the report step is retried
with backoff and then finds the ID); a claim older than ``STALE_CLAIM`` belongs to a
reporter that crashed between its claim and its record, and is taken over, a comment
it may have posted being found again by its hidden marker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import timedelta
from functools import partial
from typing import Any, Protocol

from runplane.adapters.github import GitHubApp
from runplane.domain.clock import Clock
from runplane.domain.errors import ConcurrentChange, GitHubUnavailable, NotFound, RunplaneError
from runplane.domain.github import Ingestion, IngestionTarget
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.plan_view import Action, PlanView
from runplane.domain.pr_comments import (
    PolicyLine,
    PullRequestSummary,
    ReportRecord,
    ResourceLine,
    WorkspaceReport,
    check_key,
    comment_key,
    comment_marker,
    render_check,
    render_comment,
)
from runplane.domain.run import RunStatus
from runplane.services.plan_views import PlanState, PlanViews
from runplane.services.repositories.github_reports import GitHubReportStore
from runplane.services.runs import Runs
from runplane.services.workspaces import Workspaces

logger = logging.getLogger("runplane.github")

STALE_CLAIM = timedelta(minutes=2)
CHECK_NAME = "runplane"
# The plan view's first page: resources beyond it are counted, not listed.
LISTED_RESOURCES = 500
READ_PERMISSIONS = frozenset({Permission.RUN_READ, Permission.WORKSPACE_READ})


def reader(source: Ingestion, workspace_id: str) -> Principal:
    """What a report reads a run as: read-only, one workspace of the ingestion's
    organization."""
    return Principal(
        kind=PrincipalKind.SOURCE,
        id=source.id,
        organization_id=source.organization_id,
        permissions=READ_PERMISSIONS,
        display=f"GitHub source {source.id}",
        workspace_id=workspace_id,
    )


class CommentThread(Protocol):
    """Where the comment is posted: the GitHub App (with an installation token), or any
    provider's equivalent that holds its own credential (then ``token`` is unused)."""

    def create_comment(self, token: str, repository: str, number: int, body: str) -> int: ...

    def edit_comment(self, token: str, repository: str, comment_id: int, body: str) -> None: ...

    def find_comment(self, token: str, repository: str, number: int, marker: str) -> int | None: ...


class PullRequestReports:
    def __init__(
        self,
        clock: Clock,
        store: GitHubReportStore,
        runs: Runs,
        workspaces: Workspaces,
        plan_views: PlanViews,
        run_page_url: str,
    ) -> None:
        self._clock = clock
        self._store = store
        self._runs = runs
        self._workspaces = workspaces
        self._plan_views = plan_views
        self._run_page_url = run_page_url.rstrip("/")

    def publish(
        self, app: GitHubApp, token: str, source: Ingestion, run_ids: Sequence[str]
    ) -> None:
        """Bring the pull request's comment and the check runs of ``run_ids`` up to date
        with the runs as they are now."""
        if source.pull_request is None:
            return
        summary = self.summary(source)
        failures: list[RunplaneError] = []
        # Each post on its own: a check run GitHub refuses does not keep the comment back.
        for report in summary.workspaces:
            if report.run_id in run_ids:
                _attempt(failures, partial(self._check, app, token, source, summary, report))
        _attempt(failures, lambda: self._comment(app, token, source, summary))
        worth_retrying = [f for f in failures if isinstance(f, GitHubUnavailable)]
        if worth_retrying:
            raise worth_retrying[0]

    def publish_comment(
        self, thread: CommentThread, source: Ingestion, review_noun: str | None = None
    ) -> None:
        """Only the comment, for a provider without check runs (GitLab's merge request
        note): created once, then edited in place, like the pull request comment."""
        if source.pull_request is None:
            return
        summary = self.summary(source)
        if review_noun is not None:
            summary = replace(summary, review_noun=review_noun)
        self._comment(thread, "", source, summary)

    # -- what is shown ----------------------------------------------------------------------

    def summary(self, source: Ingestion) -> PullRequestSummary:
        assert source.pull_request is not None
        return PullRequestSummary(
            organization_id=source.organization_id,
            repository=source.repository,
            pull_request=source.pull_request,
            commit_sha=source.commit_sha,
            workspaces=tuple(self._workspace(source, t) for t in source.targets),
        )

    def _workspace(self, source: Ingestion, target: IngestionTarget) -> WorkspaceReport:
        principal = reader(source, target.workspace_id)
        try:
            name = self._workspaces.by_id(principal, target.workspace_id).name
        except NotFound:
            name = target.workspace_id
        if target.run_id is None:
            why = f"no run: {target.error}" if target.error else "run not created yet"
            return WorkspaceReport(target.workspace_id, name, None, None, why)
        run = self._runs.get(principal, target.run_id)
        review = self._runs.review_of(run)
        plan = self._plan_views.of(principal, run.id, 1, LISTED_RESOURCES)
        report = WorkspaceReport(
            workspace_id=target.workspace_id,
            workspace_name=name,
            run_id=run.id,
            run_url=f"{self._run_page_url}/ui/runs/{run.id}",
            status=run.status.value,
            finished=run.status.is_terminal,
            succeeded=run.status is RunStatus.SUCCEEDED,
            plan_note=plan.message,
            **_policies(review.get("policy")),
        )
        if plan.state is PlanState.SHOWN and plan.view is not None:
            report = replace(report, **_changes(plan.view))
        return report

    # -- the comment ------------------------------------------------------------------------

    def _comment(
        self, app: CommentThread, token: str, source: Ingestion, summary: PullRequestSummary
    ) -> None:
        assert source.pull_request is not None
        key = comment_key(source.organization_id, source.repository, source.pull_request)
        body = render_comment(summary)
        now = self._clock.now()
        found = self._store.report(key)
        if found is None:
            claim = ReportRecord(
                key, source.organization_id, now, None, source.id, source.created_at
            )
            try:
                self._store.claim_report(claim)
            except ConcurrentChange:
                raise _busy("comment") from None
            with self._released_on_failure(claim):
                comment_id = app.create_comment(token, source.repository, source.pull_request, body)
            self._store.update_report(replace(claim, github_id=comment_id), claim)
            return
        if found.github_id is None:
            if now - found.claimed_at < STALE_CLAIM:
                raise _busy("comment")
            taken = replace(found, claimed_at=now, source_id=source.id)
            taken = replace(taken, source_created_at=source.created_at)
            self._update(taken, found)
            marker = comment_marker(source.organization_id)
            with self._released_on_failure(taken):
                earlier = app.find_comment(token, source.repository, source.pull_request, marker)
                if earlier is None:
                    comment_id = app.create_comment(
                        token, source.repository, source.pull_request, body
                    )
                else:
                    comment_id = earlier
                    app.edit_comment(token, source.repository, comment_id, body)
            self._store.update_report(replace(taken, github_id=comment_id), taken)
            return
        if found.source_created_at is not None and found.source_created_at > source.created_at:
            return  # a newer push owns the comment now
        if found.source_id != source.id:
            # Recorded first, so a report of an older push that reads it next stands back.
            self._update(
                replace(found, source_id=source.id, source_created_at=source.created_at), found
            )
        app.edit_comment(token, source.repository, found.github_id, body)

    @contextmanager
    def _released_on_failure(self, claim: ReportRecord) -> Iterator[None]:
        """A post GitHub failed leaves its claim stale at once, so the retry takes it over
        (and, for a comment, finds by its marker one GitHub created all the same)."""
        try:
            yield
        except RunplaneError:
            with suppress(ConcurrentChange):
                self._store.update_report(
                    replace(claim, claimed_at=claim.claimed_at - STALE_CLAIM), claim
                )
            raise

    def _update(self, record: ReportRecord, previous: ReportRecord) -> None:
        try:
            self._store.update_report(record, previous)
        except ConcurrentChange:
            raise _busy("comment") from None

    # -- check runs -------------------------------------------------------------------------

    def _check(
        self,
        app: GitHubApp,
        token: str,
        source: Ingestion,
        summary: PullRequestSummary,
        report: WorkspaceReport,
    ) -> None:
        output = render_check(summary, report)
        check: dict[str, Any] = {
            "status": output.status,
            "output": {"title": output.title, "summary": output.summary},
        }
        if report.run_url:
            check["details_url"] = report.run_url
        if output.conclusion is not None:
            check["conclusion"] = output.conclusion
        key = check_key(source.organization_id, source.id, report.workspace_id)
        now = self._clock.now()
        found = self._store.report(key)
        if found is not None and found.github_id is not None:
            app.update_check_run(token, source.repository, found.github_id, check)
            return
        if found is not None and now - found.claimed_at < STALE_CLAIM:
            raise _busy("check run")
        claim = ReportRecord(key, source.organization_id, now, None, source.id, source.created_at)
        try:
            if found is None:
                self._store.claim_report(claim)
            else:
                self._store.update_report(claim, found)
        except ConcurrentChange:
            raise _busy("check run") from None
        created = {
            "name": f"{CHECK_NAME}/{report.workspace_id}",
            "head_sha": source.commit_sha,
            "external_id": report.run_id or report.workspace_id,
            **check,
        }
        with self._released_on_failure(claim):
            check_id = app.create_check_run(token, source.repository, created)
        self._store.update_report(replace(claim, github_id=check_id), claim)


def _attempt(failures: list[RunplaneError], post: Callable[[], None]) -> None:
    try:
        post()
    except RunplaneError as failure:
        # The message names what failed and GitHub's status code, never the token.
        logger.warning("pull request report not posted", extra={"error": failure.message})
        failures.append(failure)


def _busy(what: str) -> GitHubUnavailable:
    """Another report holds the claim: this one is retried once that one recorded its
    ID (the report step retries ``GitHubUnavailable`` with backoff)."""
    return GitHubUnavailable(f"another report is posting the pull request's {what}; retrying")


def _changes(view: PlanView) -> dict[str, Any]:
    counts = view.counts
    replaced = counts.get(Action.REPLACE, 0)
    resources = tuple(
        ResourceLine(change.action.symbol, change.address, change.action.value)
        for group in view.groups
        for change in group.changes
    )
    return {
        "counts": (
            counts.get(Action.CREATE, 0) + replaced,
            counts.get(Action.UPDATE, 0),
            counts.get(Action.DESTROY, 0) + replaced,
        ),
        "resources": resources,
        "resources_more": max(view.listed - len(resources), 0),
        "plan_note": None,
    }


def _policies(policy: Mapping[str, Any] | None) -> dict[str, Any]:
    if not isinstance(policy, Mapping):
        return {}
    lines = []
    for result in policy.get("results") or []:
        if not isinstance(result, Mapping):
            continue
        messages = result.get("messages") or []
        lines.append(
            PolicyLine(
                policy_set=str(result.get("policy_set", "")),
                policy=str(result.get("policy", "")),
                enforcement=str(result.get("enforcement", "")),
                outcome=str(result.get("outcome", "")),
                messages=tuple(str(m) for m in messages if isinstance(m, str)),
            )
        )
    verdict = policy.get("outcome") or policy.get("status")
    return {"policies": tuple(lines), "policy_verdict": str(verdict) if verdict else None}
