"""The run page's template for the run options a review carries: a destroy run's
warning and its approve button, the options in the input section, and the drift a
remediation run resolves."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from functions.dashboard.pages import templates

NO_OPTIONS = {"destroy": False, "refresh_only": False, "targets": [], "replacements": []}
BINDING = {"plan_sha256": "ab" * 32}


def review_of(**changes: Any) -> dict[str, Any]:
    """A review of a run awaiting approval, as ``runs.review`` returns it, with
    ``changes`` (``options`` replaces the input's options)."""
    options = {**NO_OPTIONS, **changes.pop("options", {})}
    return {
        "id": "run-1",
        "workspace_id": "ws-1",
        "kind": "plan_and_apply",
        "status": "awaiting_approval",
        "label": "awaiting approval",
        "created_by": "user:alice",
        "created_at": "2025-01-01T00:00:00+00:00",
        "workflow": {"definition_version": "1", "build_sha": "0" * 40},
        "stages": [],
        "input": {"configuration_version_id": "cv-1", "variables": [], "options": options},
        "remediation": None,
        "plan": {"has_changes": True, "summary": {"adds": 0, "changes": 0, "destroys": 3}},
        "approval": {"status": "pending", "binding": BINDING},
        **changes,
    }


def rendered(review: dict[str, Any], *, may_decide: bool = True, can_decide: bool = True) -> str:
    return (
        templates()
        .get_template("run.html")
        .render(
            session=SimpleNamespace(
                csrf="token", principal=SimpleNamespace(display="alice", ref="user:alice")
            ),
            workspace=SimpleNamespace(id="ws-1", name="network"),
            review=review,
            approval=review["approval"] or {},
            binding=BINDING,
            can_decide=can_decide,
            may_decide=may_decide,
            may_cancel=False,
            deadline_passed=not can_decide,
            active=False,
            logs={"plan": None, "apply": None},
            signed_in_recently=True,
        )
    )


def text_of(page: str, element_id: str) -> str:
    """The text of the element with ``element_id``, tags dropped, spaces collapsed."""
    match = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:p|dd|form)>', page, re.S)
    assert match is not None, element_id
    return " ".join(re.sub(r"<[^>]+>", " ", match[1]).split())


def test_a_destroy_run_warns_at_the_top_and_in_the_approval_bar_with_the_plans_count() -> None:
    # Given a destroy run awaiting approval, whose plan destroys 3 resources
    page = rendered(review_of(options={"destroy": True}))

    # Then the page warns before anything else, and again in the approval bar
    warning = "This run DESTROYS every resource it planned for : 3 to destroy"
    assert text_of(page, "destroy-banner") == warning
    assert text_of(page, "approval-destroy") == warning
    assert page.index('id="destroy-banner"') < page.index('id="run-header"')
    bar = page.index('id="approval-bar"')
    assert bar < page.index('id="approval-destroy"') < page.index('id="approve-form"')
    # And its approve button says what it approves
    assert text_of(page, "approve-form") == "Approve destroy"
    assert text_of(page, "reject-form") == "Reject"
    # And the input section lists the option
    assert text_of(page, "run-options") == "destroy : every resource in the state"


def test_a_destroy_run_not_planned_yet_says_so_and_a_closed_bar_still_names_it() -> None:
    # Given a destroy run whose plan has not been made, and one past its deadline
    planning = rendered(review_of(options={"destroy": True}, plan=None, status="planning"))
    expired = rendered(review_of(options={"destroy": True}, status="expired"), can_decide=False)

    # Then the warning has no count yet
    assert text_of(planning, "destroy-banner").endswith(": not planned yet")
    # And the closed bar's disabled button still reads as a destroy's
    assert '<button type="button" disabled>Approve destroy</button>' in expired


def test_a_plain_run_has_no_warning_and_says_its_plan_is_normal() -> None:
    # Given a run with no options
    page = rendered(review_of())

    # Then nothing warns of a destroy, and the approve button is the usual one
    assert "destroy-banner" not in page
    assert "approval-destroy" not in page
    assert "DESTROYS" not in page
    assert text_of(page, "approve-form") == "Approve"
    assert text_of(page, "run-options") == "none (a normal plan)"


def test_targets_replacements_and_refresh_only_are_listed_in_the_input_section() -> None:
    # Given a targeted run replacing a resource, and a refresh-only run
    targeted = rendered(
        review_of(
            options={
                "targets": ["test_thing.a", 'module.m["k"].test_thing.b'],
                "replacements": ["test_thing.c"],
            }
        )
    )
    refresh = rendered(review_of(options={"refresh_only": True}))

    # Then each option is named, addresses as code (escaped)
    assert text_of(targeted, "run-options") == (
        "target test_thing.a · module.m[&#34;k&#34;].test_thing.b replace test_thing.c"
    )
    assert '<code class="target">test_thing.a</code>' in targeted
    assert '<code class="replacement">test_thing.c</code>' in targeted
    assert text_of(refresh, "run-options") == (
        "refresh-only : the real world is written into the state, no resource changes"
    )
    # And a destroy of targets says it destroys only those
    both = rendered(review_of(options={"destroy": True, "targets": ["test_thing.a"]}))
    assert text_of(both, "run-options") == (
        "destroy : the targets and what depends on them target test_thing.a"
    )


def test_a_remediation_run_links_to_the_run_that_found_the_drift() -> None:
    # Given runs created to reconcile and to accept a drift
    reconcile = rendered(
        review_of(remediation={"remedy": "reconcile", "drift_run_id": "run-found"})
    )
    accept = rendered(
        review_of(
            remediation={"remedy": "accept", "drift_run_id": "run-found"},
            options={"refresh_only": True},
        )
    )

    # Then each names that run, linked, and its remedy
    link = '<a href="/ui/runs/run-found" id="remediated-drift-run"><code>run-found</code></a>'
    assert link in reconcile
    assert link in accept
    assert text_of(reconcile, "run-remediation") == (
        "the drift that run-found found, by reconciling (applying the configuration)"
    )
    assert text_of(accept, "run-remediation") == (
        "the drift that run-found found, by accepting it (refresh-only apply)"
    )
    # And a run that remediates nothing has no such line
    assert "run-remediation" not in rendered(review_of())


def test_a_run_needing_two_approvers_says_so_and_its_first_approver_cannot_approve_again() -> None:
    # Given a destroy run alice approved first, of two approvals needed
    approval = {
        "status": "waiting_second",
        "binding": BINDING,
        "approvals_required": 2,
        "second_approval_reason": "the workspace requires a second approver for destroy runs",
        "first_approval": {"by": "user:alice", "at": "2025-01-01T00:00:00+00:00"},
    }
    page = rendered(review_of(options={"destroy": True}, approval=approval))

    # Then the bar says two are needed, who approved, and alice's approve is disabled
    assert text_of(page, "second-approval") == (
        "Needs two approvers : the workspace requires a second approver for destroy runs. "
        "First approved by you ; another person must approve."
    )
    approve = page[page.index('id="approve-form"') : page.index('id="reject-form"')]
    assert "disabled" in approve
    reject = page[page.index('id="reject-form"') :]
    assert "disabled" not in reject[: reject.index("</form>")]
