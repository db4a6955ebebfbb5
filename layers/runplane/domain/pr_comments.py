"""What Runplane writes on a pull request: one comment summarizing every bound
workspace's run, and one check run per workspace.

Pure rules only. Everything rendered comes from the run's plan view (which has already
taken out the run's sensitive values and honours the engine's sensitivity marks), its
status and its policy results; every text that came from a configuration or a policy
(addresses, policy names and messages) is escaped, so it can neither format the comment
nor inject HTML or mentions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

MAX_COMMENT_CHARS: Final = 65_536
"""GitHub refuses an issue comment body longer than this."""
MAX_CHECK_SUMMARY_CHARS: Final = 65_535
"""GitHub's limit for a check run's ``output.summary``."""
MAX_POLICY_LINES: Final = 20
MAX_POLICY_MESSAGE: Final = 300
MAX_ADDRESS: Final = 300

# Left as they are: they neither format Markdown nor open HTML, mentions or links.
_PLAIN = re.compile(r"[A-Za-z0-9 .,:=/-]")
COMMENT_MARKER_PREFIX: Final = "<!-- runplane:pull-request-summary "


def escaped(text: str, limit: int = MAX_ADDRESS) -> str:
    """``text`` cut at ``limit`` characters, on one line, with every character that could
    format Markdown or open HTML (``*``, ``_``, backticks, brackets, ``<``, ``@``, ``#``,
    ``|``, ``!``...) written as a numeric character reference, shown as itself."""
    cut = " ".join(text[:limit].split())
    return "".join(c if _PLAIN.fullmatch(c) else f"&#{ord(c)};" for c in cut) + (
        "…" if len(text) > limit else ""
    )


def comment_marker(organization_id: str) -> str:
    """The hidden first line of an organization's comment: how a comment created by a
    report that crashed before recording it is found again."""
    return f"{COMMENT_MARKER_PREFIX}org={escaped(organization_id)} -->"


@dataclass(frozen=True)
class PolicyLine:
    policy_set: str
    policy: str
    enforcement: str
    outcome: str
    messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResourceLine:
    symbol: str
    """``+``, ``~``, ``-/+``, ``-``, ``<=``, ``?``."""
    address: str
    action: str


@dataclass(frozen=True)
class WorkspaceReport:
    """One bound workspace's part of a pull request's summary."""

    workspace_id: str
    workspace_name: str
    run_id: str | None
    run_url: str | None
    status: str
    """The run's status, or why there is no run."""
    finished: bool = False
    succeeded: bool = False
    counts: tuple[int, int, int] | None = None
    """``(add, change, destroy)``; a replacement counts as one add and one destroy."""
    resources: tuple[ResourceLine, ...] = ()
    resources_more: int = 0
    """Changed resources not listed (beyond the plan view's first page)."""
    plan_note: str | None = None
    """Why no resource is listed (no plan yet, none, cannot be shown)."""
    policies: tuple[PolicyLine, ...] = ()
    policy_verdict: str | None = None


@dataclass(frozen=True)
class PullRequestSummary:
    organization_id: str
    repository: str
    pull_request: int
    commit_sha: str
    workspaces: tuple[WorkspaceReport, ...] = field(default_factory=tuple)
    # How the review is named before its number (escaped): GitLab's are "merge request !".
    review_noun: str = "pull request &#35;"


def counts_text(counts: tuple[int, int, int] | None) -> str:
    if counts is None:
        return "no plan yet"
    add, change, destroy = counts
    return f"+{add} ~{change} -{destroy}"


def _header(summary: PullRequestSummary) -> list[str]:
    return [
        comment_marker(summary.organization_id),
        "### Runplane plans",
        "",
        f"Commit `{summary.commit_sha[:12]}` of {escaped(summary.repository)} "
        f"{summary.review_noun}{summary.pull_request}.",
        "",
        "| Workspace | Status | Changes | Policies | Run |",
        "| --- | --- | --- | --- | --- |",
    ]


def _row(report: WorkspaceReport) -> str:
    link = (
        f"[{escaped(report.run_id)}]({report.run_url})"
        if report.run_url and report.run_id
        else "none"
    )
    verdict = escaped(report.policy_verdict) if report.policy_verdict else "none"
    return (
        f"| {escaped(report.workspace_name)} | {escaped(report.status)} | "
        f"{counts_text(report.counts)} | {verdict} | {link} |"
    )


def _policy_lines(report: WorkspaceReport) -> list[str]:
    lines = []
    for line in report.policies[:MAX_POLICY_LINES]:
        messages = "; ".join(escaped(m, MAX_POLICY_MESSAGE) for m in line.messages[:3])
        lines.append(
            f"- {escaped(line.outcome)}: {escaped(line.policy_set)} / {escaped(line.policy)} "
            f"({escaped(line.enforcement)})" + (f": {messages}" if messages else "")
        )
    if len(report.policies) > MAX_POLICY_LINES:
        lines.append(f"- and {len(report.policies) - MAX_POLICY_LINES} more: see the run page")
    return lines


def _details(report: WorkspaceReport, budget: int) -> tuple[list[str], bool]:
    """The workspace's ``<details>`` block, its resource lines cut to fit ``budget``
    characters; and whether any line was left out to fit."""
    head = [
        "",
        f"<details><summary>{escaped(report.workspace_name)}: "
        f"{counts_text(report.counts)}</summary>",
        "",
    ]
    tail = ["", "</details>"]
    policies = _policy_lines(report)
    if policies:
        tail = ["", "Policies:", "", *policies, *tail]
    body: list[str] = []
    if report.plan_note:
        body.append(escaped(report.plan_note))
    used = _size(head) + _size(tail) + _size(body) + 200  # room for the "more" line
    cut = False
    for index, resource in enumerate(report.resources):
        line = f"- `{resource.symbol}` {escaped(resource.address)} ({escaped(resource.action)})"
        if used + len(line) + 1 > budget:
            cut = True
            more = len(report.resources) - index + report.resources_more
            body.append(f"- … {more} more: truncated, see the run page")
            break
        body.append(line)
        used += len(line) + 1
    else:
        if report.resources_more:
            body.append(f"- … {report.resources_more} more: see the run page")
    if not body:
        body.append("No resource changes.")
    return head + body + tail, cut


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def render_comment(summary: PullRequestSummary, limit: int = MAX_COMMENT_CHARS) -> str:
    """The pull request's comment: a table of every workspace, then each workspace's
    changed resources and policy results, cut to fit ``limit`` characters with a line
    sending the reader to the run page."""
    lines = _header(summary) + [_row(r) for r in summary.workspaces]
    footer = ["", "_Updated by Runplane on every push and run status change._"]
    truncated_note = [
        "",
        "**Truncated to fit GitHub's size limit: see the run page of each workspace.**",
    ]
    remaining = limit - _size(lines) - _size(footer) - _size(truncated_note) - 64
    truncated = False
    for report in summary.workspaces:
        share = max(remaining, 0)
        block, cut = _details(report, share)
        if _size(block) > share:
            truncated = True
            break
        lines += block
        remaining -= _size(block)
        truncated = truncated or cut
    if truncated:
        lines += truncated_note
    text = "\n".join(lines + footer)
    return text[:limit]


@dataclass(frozen=True)
class CheckOutput:
    """A check run's state and output for one workspace."""

    status: str
    """``queued``, ``in_progress`` or ``completed``."""
    conclusion: str | None
    title: str
    summary: str


def render_check(summary: PullRequestSummary, report: WorkspaceReport) -> CheckOutput:
    one = PullRequestSummary(
        summary.organization_id,
        summary.repository,
        summary.pull_request,
        summary.commit_sha,
        (report,),
    )
    text = render_comment(one, MAX_CHECK_SUMMARY_CHARS)
    # The marker finds comments; a check's summary has no use for it.
    text = text.split("\n", 1)[1]
    if report.finished:
        status, conclusion = "completed", ("success" if report.succeeded else "failure")
    else:
        status, conclusion = ("queued" if report.run_id is None else "in_progress"), None
    title = f"{report.status}: {counts_text(report.counts)}"
    return CheckOutput(status, conclusion, title[:200], text)


@dataclass(frozen=True)
class ReportRecord:
    """What Runplane posted on GitHub and must edit later, not post again: a pull
    request's comment (one per organization, repository and pull request) or a check
    run (one per ingestion and workspace). ``github_id`` is None while a reporter has
    claimed it and not yet recorded what GitHub answered."""

    key: str
    organization_id: str
    claimed_at: datetime
    github_id: int | None = None
    source_id: str | None = None
    """The ingestion last rendered (a comment follows the newest push only)."""
    source_created_at: datetime | None = None


def comment_key(organization_id: str, repository: str, pull_request: int) -> str:
    return f"comment:{organization_id}:{repository.lower()}#{pull_request}"


def check_key(organization_id: str, source_id: str, workspace_id: str) -> str:
    return f"check:{organization_id}:{source_id}:{workspace_id}"
