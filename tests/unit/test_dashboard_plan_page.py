"""The plan view's templates: the full plan page and the run page's plan section render the
view as escaped text, each resource's diff in a ``<details>``, with pages for a large plan,
and never a sensitive value."""

from __future__ import annotations

import html
import re
from types import SimpleNamespace
from typing import Any

from functions.dashboard.pages import templates
from runplane.domain.plan_view import build_view
from runplane.services.plan_views import PlanState, RunPlan
from tests.unit.domain.test_plan_view import SECRET, plan, resource
from tests.unit.test_dashboard_run_page import review_of

SESSION = SimpleNamespace(csrf="token", principal=SimpleNamespace(display="alice", ref="user:a"))


def full_page(document: dict[str, Any], page: int = 1) -> str:
    view = build_view(document, page)
    return (
        templates()
        .get_template("plan.html")
        .render(session=SESSION, run_id="run-1", run_plan=RunPlan("run-1", PlanState.SHOWN, view))
    )


def run_page_section(run_plan: RunPlan | None, **review: Any) -> str:
    page = (
        templates()
        .get_template("run.html")
        .render(
            session=SESSION,
            workspace=SimpleNamespace(id="ws-1", name="network"),
            review=review_of(**review),
            approval={},
            binding={},
            can_decide=False,
            may_decide=False,
            may_cancel=False,
            deadline_passed=False,
            active=False,
            logs={"plan": None, "apply": None},
            signed_in_recently=True,
            run_plan=run_plan,
        )
    )
    start = page.index('<section class="plan" id="plan">')
    return page[start : page.index("</section>", start)]


def words(markup: str) -> str:
    """The text a reader sees, tags dropped, entities read, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def test_the_plan_page_shows_each_change_in_a_details_element_as_escaped_text() -> None:
    # Given a plan whose addresses and values carry markup, and a sensitive password
    document = plan(
        resource(
            'aws_instance.web["<script>alert(1)</script>"]',
            ["update"],
            before={"tags": {"Name": "<b>old</b>"}, "password": SECRET},
            after={"tags": {"Name": "new"}, "password": SECRET + "2"},
            before_sensitive={"password": True},
            after_sensitive={"password": True},
        ),
        resource("aws_s3_bucket.logs", ["create"], after={"bucket": "logs"}, after_sensitive={}),
    )

    # When the full plan page is rendered
    page = full_page(document)

    # Then each change is a collapsed details element, its action in words and symbol
    assert page.count('<details class="plan-change') == 2
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;old&lt;/b&gt;" in page
    text = words(page)
    assert "+ 1 to create" in text
    assert "~ 1 to update in place" in text
    assert 'tags.Name "<b>old</b>" → changes to "new"' in text
    assert "password (sensitive) → changes to (sensitive)" in text
    # And the secret is nowhere; no inline style or script
    assert SECRET not in page
    assert "style=" not in page
    assert "<script>" not in page.replace('<script src="', "")


def test_a_large_plan_has_pages_and_the_run_page_links_to_them() -> None:
    # Given a plan of 5,000 resources to create
    document = plan(
        *[
            resource(f"aws_instance.n{n}", ["create"], after={"n": n}, after_sensitive={})
            for n in range(5000)
        ]
    )

    # When its third page is rendered
    page = full_page(document, 3)

    # Then it holds 100 changes, says where it is and links to its neighbours
    assert page.count("<details") == 100
    assert "aws_instance.n200<" in page
    assert "Page 3 of 50" in words(page)
    assert 'href="/ui/runs/run-1/plan?page=2" rel="prev"' in page
    assert 'href="/ui/runs/run-1/plan?page=4" rel="next"' in page

    # And the run page's section shows the counts, the first page and the links
    section = run_page_section(RunPlan("run-1", PlanState.SHOWN, build_view(document)))
    assert "+ 5000 to create" in words(section)
    assert section.count("<details") == 100
    assert 'href="/ui/runs/run-1/plan?page=2"' in section
    assert 'href="/ui/runs/run-1/plan" id="full-plan-link"' in section


def test_the_run_page_says_why_there_is_no_plan_view() -> None:
    # Given a run without a plan, and one whose plan cannot be shown
    unplanned = run_page_section(None, plan=None)
    unavailable = run_page_section(
        RunPlan("run-1", PlanState.UNAVAILABLE, message="The plan cannot be shown: too large.")
    )

    # Then each says so, the second with the plan's counts
    assert "This run ended without a plan." in words(unplanned)
    assert "The plan cannot be shown: too large." in words(unavailable)
    assert "+0 ~0 -3" in words(unavailable)
