"""How the dashboard writes times, spans, people and statuses: as a person says them,
with the exact value kept where a pointer can find it, and never as markup from data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from jinja2 import Environment

from functions.dashboard import formatting

NOW = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)


def render(source: str, **context: object) -> str:
    environment = Environment(autoescape=True)
    environment.filters.update(formatting.FILTERS)
    return environment.from_string(source).render(now=NOW, **context)


@pytest.mark.parametrize(
    ("offset", "said"),
    [
        (timedelta(seconds=-10), "just now"),
        (timedelta(seconds=10), "in a few seconds"),
        (timedelta(minutes=-5), "5 minutes ago"),
        (timedelta(minutes=90), "in 2 hours"),
        (timedelta(hours=21), "in 21 hours"),
        (timedelta(hours=30), "in 1 day"),
        # An approval window of 48 hours, a few seconds in: two days, not one
        (timedelta(days=2, seconds=-5), "in 2 days"),
        (timedelta(days=-7, minutes=1), "7 days ago"),
    ],
)
def test_a_moment_is_said_relative_to_now_rounded_to_its_nearest_unit(
    offset: timedelta, said: str
) -> None:
    assert formatting.relative(NOW + offset, NOW) == said


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0s"), (45, "45s"), (72, "1m 12s"), (120, "2m"), (7_500, "2h 5m"), (604_799, "6d 23h")],
)
def test_a_span_is_said_in_its_two_largest_units(seconds: int, said: str) -> None:
    assert formatting.span(seconds) == said


def test_a_time_is_relative_with_the_exact_utc_time_on_hover() -> None:
    # Given a time in another offset, with microseconds
    page = render("{{ t|when }}", t="2026-12-02T19:07:44.073948+01:00")

    # Then the page says when relative to now, and keeps the exact time and the value
    assert page == (
        '<time datetime="2026-12-02T19:07:44.073948+01:00" '
        'title="2026-12-02 18:07:44 UTC">in 8 minutes</time>'
    )


def test_no_time_is_a_dash_and_a_malformed_one_is_never_echoed() -> None:
    assert "—" in render("{{ t|when }}", t=None)
    assert "<script>" not in render("{{ t|when }}", t="<script>")


def test_durations_and_time_left_are_spans_from_the_pages_now() -> None:
    assert render("{{ a|duration(b) }}", a="2026-12-02T17:00:00+00:00", b=NOW) == "1h"
    assert render("{{ a|duration }}", a="2026-12-02T17:58:30+00:00") == "1m 30s"
    assert render("{{ t|left }}", t=(NOW + timedelta(days=7, seconds=-1)).isoformat()) == "6d 23h"


@pytest.mark.parametrize(
    ("ref", "shown"),
    [
        ("user:alice@example.com", "alice@example.com"),
        ("token:tok-1", "API token tok-1"),
        ("system:auto-destroy:ws-1", "Runplane (auto destroy)"),
        ("source:ing-1", "GitHub"),
        ("user:me", "you"),
    ],
)
def test_a_principal_is_named_for_a_reader_with_the_reference_on_hover(
    ref: str, shown: str
) -> None:
    page = render("{{ ref|person('user:me') }}", ref=ref)
    assert page == f'<span class="person" title="{ref}">{shown}</span>'


def test_a_person_or_status_from_data_is_escaped() -> None:
    assert "<b>" not in render("{{ ref|person }}", ref="user:<b>x</b>")
    assert "<b>" not in render("{{ s|badge }}", s="<b>x</b>")


@pytest.mark.parametrize(
    ("status", "tone"),
    [
        ("succeeded", "ok"),
        ("awaiting_approval", "wait"),
        ("applying", "busy"),
        ("apply_failed", "bad"),
        ("needs_recovery", "alert"),
        ("canceled", "off"),
        ("something new", "off"),
    ],
)
def test_a_status_badge_has_a_tone_by_meaning_and_says_it_in_words(status: str, tone: str) -> None:
    page = render("{{ s|badge }}", s=status)
    assert f'class="badge badge-{tone}"' in page
    assert f">{status.replace('_', ' ')}</span>" in page


@pytest.mark.parametrize(
    ("ref", "display", "shown"),
    [
        ("token:tok-1", "User ci", "ci (API token)"),
        ("user:web-7", "User alice (dashboard)", "alice (dashboard)"),
        ("user:me", "User me", "you"),
        ("token:tok-1", None, "API token tok-1"),
    ],
)
def test_a_principal_is_named_by_its_own_words_when_the_record_kept_them(
    ref: str, display: str | None, shown: str
) -> None:
    page = render("{{ ref|person('user:me', display) }}", ref=ref, display=display)
    assert page == f'<span class="person" title="{ref}">{shown}</span>'
