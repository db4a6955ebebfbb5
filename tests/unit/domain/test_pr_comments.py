"""A pull request's comment and check runs as rendered: every workspace's status,
counts, changed resources and policy results; escaped, cut to GitHub's limit, and
without any value of the plan."""

from __future__ import annotations

from dataclasses import replace

from runplane.domain.plan_view import build_view
from runplane.domain.pr_comments import (
    MAX_COMMENT_CHARS,
    PolicyLine,
    PullRequestSummary,
    ResourceLine,
    WorkspaceReport,
    comment_marker,
    escaped,
    render_check,
    render_comment,
)
from runplane.services.github_reports import _changes
from tests.unit.domain.test_plan_view import SECRET, plan, resource

SHA = "a" * 40


def workspace(name: str = "network", **fields: object) -> WorkspaceReport:
    base = WorkspaceReport(
        workspace_id=f"ws-{name}",
        workspace_name=name,
        run_id=f"run-{name}",
        run_url=f"https://runplane.example/ui/runs/run-{name}",
        status="succeeded",
        finished=True,
        succeeded=True,
        counts=(1, 2, 3),
        resources=(ResourceLine("+", "aws_vpc.main", "create"),),
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def summary(*workspaces: WorkspaceReport) -> PullRequestSummary:
    return PullRequestSummary("org-1", "acme/infra", 7, SHA, workspaces)


def test_the_comment_lists_every_workspace_with_its_status_counts_resources_and_link() -> None:
    # Given two workspaces' runs, one with a failed policy
    failed = PolicyLine("baseline", "no-public-buckets", "hard_mandatory", "failed", ("open",))
    reports = (workspace("network"), workspace("dns", status="planning", finished=False))
    reports = (reports[0], replace(reports[1], policies=(failed,), policy_verdict="hard_failed"))

    # When the comment is rendered
    text = render_comment(summary(*reports))

    # Then it starts with the organization's marker and shows each workspace
    assert text.startswith(comment_marker("org-1"))
    assert "| network | succeeded | +1 ~2 -3 |" in text
    assert "| dns | planning |" in text
    assert "https://runplane.example/ui/runs/run-dns" in text
    assert "<details><summary>network: +1 ~2 -3</summary>" in text
    assert "- `+` aws&#95;vpc.main (create)" in text
    assert "failed: baseline / no-public-buckets (hard&#95;mandatory): open" in text
    assert "truncated" not in text


def test_addresses_and_policy_messages_cannot_format_the_comment() -> None:
    # Given an address and a policy message written to inject HTML, links and mentions
    hostile = 'aws_s3_bucket.x["</details><img src=x onerror=alert(1)>"]'
    message = "[click](https://evil.example) @octocat `code` | table ![i](x)"
    report = workspace(
        resources=(ResourceLine("+", hostile, "create"),),
        policies=(PolicyLine("s", "p", "advisory", "failed", (message,)),),
    )

    # When the comment is rendered
    text = render_comment(summary(report))

    # Then none of it reaches the comment as markup
    for raw in ("<img", "</details><img", "](https://evil", "@octocat", "`code`", "![i]"):
        assert raw not in text
    assert "&#60;img src=x onerror=alert&#40;1&#41;&#62;" in text
    assert text.count("</details>") == 1


def test_escaping_keeps_words_and_cuts_long_text_on_one_line() -> None:
    assert escaped("module.a.aws_vpc.main") == "module.a.aws&#95;vpc.main"
    assert escaped("x\ny", 10) == "x y"
    assert escaped("z" * 20, 5) == "zzzzz…"


def test_a_comment_too_large_for_github_is_cut_with_a_line_to_the_run_page() -> None:
    # Given three workspaces changing 2,000 resources each
    many = tuple(ResourceLine("~", f"aws_instance.web[{i}]", "update") for i in range(2000))
    reports = tuple(workspace(f"w{n}", resources=many, counts=(0, 2000, 0)) for n in range(3))

    # When the comment is rendered
    text = render_comment(summary(*reports))

    # Then it fits GitHub's limit, every workspace is still in the table, and the
    # reader is sent to the run page
    assert len(text) <= MAX_COMMENT_CHARS
    assert all(f"| w{n} |" in text for n in range(3))
    assert "truncated, see the run page" in text
    assert "Truncated to fit GitHub's size limit" in text
    assert text.count("<details>") == text.count("</details>")


def test_a_plan_with_a_sensitive_value_renders_no_value() -> None:
    # Given a plan view whose resource has a sensitive attribute and a plain one
    view = build_view(
        plan(
            resource(
                "aws_db_instance.main",
                ["create"],
                after={"password": SECRET, "name": "plain-value-xyz"},
                after_sensitive={"password": True},
            )
        )
    )

    # When the comment and the check are rendered from it
    report = replace(workspace(), **_changes(view))
    text = render_comment(summary(report)) + render_check(summary(report), report).summary

    # Then the resource is listed, and no value of the plan is
    assert "aws&#95;db&#95;instance.main" in text
    assert SECRET not in text
    assert "plain-value-xyz" not in text
    assert "| network | succeeded | +1 ~0 -0 |" in text


def test_a_check_follows_its_run() -> None:
    running = workspace(status="planning", finished=False, succeeded=False)
    failed = workspace(status="errored", finished=True, succeeded=False)

    assert render_check(summary(running), running).status == "in_progress"
    assert render_check(summary(running), running).conclusion is None
    assert render_check(summary(failed), failed).conclusion == "failure"
    assert render_check(summary(workspace()), workspace()).conclusion == "success"
    assert render_check(summary(workspace()), workspace()).title == "succeeded: +1 ~2 -3"
    assert not render_check(summary(failed), failed).summary.startswith("<!--")
