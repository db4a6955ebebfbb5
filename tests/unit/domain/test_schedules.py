"""Schedule expressions: parsing, the EventBridge form, fire times, the minimum interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.errors import InvalidInput
from runplane.domain.schedules import (
    CronSpec,
    RateSpec,
    latest_due,
    parse,
    parse_aws,
    shortest_interval,
)

T0 = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    ("text", "aws"),
    [
        ("0 3 * * *", "cron(0 3 * * ? *)"),
        ("0 3 * * 1-5", "cron(0 3 ? * 2,3,4,5,6 *)"),
        ("30 */6 1,15 * *", "cron(30 0,6,12,18 1,15 * ? *)"),
        ("0 0 * JAN SUN", "cron(0 0 ? 1 1 *)"),
        ("0 0 * * 7", "cron(0 0 ? * 1 *)"),
        ("0,30 * * * *", "cron(0,30 * * * ? *)"),
        ("rate(1 hour)", "rate(1 hour)"),
        ("rate(15 minutes)", "rate(15 minutes)"),
    ],
)
def test_an_expression_becomes_the_eventbridge_form_and_parses_back(text: str, aws: str) -> None:
    # Given a person's expression, When it is parsed
    parsed = parse(text)
    # Then EventBridge gets its own form, which means exactly the same schedule
    assert parsed.aws == aws
    assert parse_aws(parsed.aws) == parsed.spec


@pytest.mark.parametrize(
    ("text", "after", "expected"),
    [
        ("0 3 * * *", T0, T0.replace(hour=3)),
        ("0 3 * * *", T0.replace(hour=3), T0.replace(day=2, hour=3)),
        ("0 3 * * 1-5", T0.replace(day=4, hour=4), T0.replace(day=7, hour=3)),  # Fri -> Mon
        ("15 10 29 2 *", T0, datetime(2028, 2, 29, 10, 15, tzinfo=UTC)),
        ("0 0 1 * *", T0.replace(day=31, hour=23, minute=59), datetime(2027, 1, 1, tzinfo=UTC)),
    ],
)
def test_the_next_fire_time_is_the_first_matching_minute_after(
    text: str, after: datetime, expected: datetime
) -> None:
    assert parse(text).next_after(after) == expected


def test_a_rate_counts_from_its_anchor() -> None:
    # Given an hourly rate created at 00:10
    rate = parse("rate(1 hour)")
    anchor = T0.replace(minute=10)
    # Then its fires are at 00:10, 01:10, ... whatever time it is asked from
    assert rate.next_after(T0, anchor=anchor) == anchor
    assert rate.next_after(T0.replace(minute=30), anchor=anchor) == T0.replace(hour=1, minute=10)
    assert rate.next_after(anchor, anchor=anchor) == T0.replace(hour=1, minute=10)


def test_a_scheduler_that_was_away_fires_once_for_the_latest_missed_time() -> None:
    # Given a daily 03:00 schedule, and a scheduler away for three days
    spec = parse("0 3 * * *").spec
    # Then only the latest missed fire is due
    assert latest_due(spec, T0, T0 + timedelta(days=3)) == T0.replace(day=3, hour=3)
    # And nothing is due before the first fire time
    assert latest_due(spec, T0, T0.replace(hour=2, minute=59)) is None


@pytest.mark.parametrize(
    ("text", "interval"),
    [
        ("0 * * * *", timedelta(hours=1)),
        ("*/15 * * * *", timedelta(minutes=15)),
        ("0 3 * * *", timedelta(days=1)),
        ("0,50 23 * * *", timedelta(minutes=50)),
        ("rate(2 days)", timedelta(days=2)),
    ],
)
def test_the_shortest_interval_is_the_closest_two_fires_can_be(
    text: str, interval: timedelta
) -> None:
    assert shortest_interval(parse(text).spec) == interval


@pytest.mark.parametrize(
    "text",
    [
        "*/5 * * * *",  # every 5 minutes
        "0,10 * * * *",  # 10 minutes apart within the hour
        "58,5 23,0 * * *",  # 23:58 then 00:05, across midnight
        "rate(14 minutes)",
    ],
)
def test_schedules_more_frequent_than_15_minutes_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(text)
    assert refused.value.pointer == "/expression"
    assert "at most every 15 minutes" in refused.value.message


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "1 to 200 characters"),
        ("0 3 * *", "five fields"),
        ("60 3 * * *", "outside 0-59"),
        ("0 24 * * *", "outside 0-23"),
        ("0 3 0 * *", "outside 1-31"),
        ("0 3 * 13 *", "outside 1-12"),
        ("0 3 * * 8", "outside 0-7"),
        ("0 3 5-1 * *", "outside 1-31"),
        ("0 3 1 * 1", "not both"),
        ("x 3 * * *", "not a number"),
        ("0 3 * * */0", "at least 1"),
        ("rate(1 hours)", "rate(1 hour)"),
        ("rate(2 weeks)", "not a rate"),
        ("rate(0 days)", "at least 1"),
    ],
)
def test_malformed_expressions_are_refused_naming_the_field(text: str, why: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse(text)
    assert refused.value.pointer == "/expression"
    assert why in refused.value.message


def test_specs_compare_by_meaning() -> None:
    assert parse("0 3 * * 0").spec == parse("0 3 * * SUN").spec == parse("0 3 * * 7").spec
    assert parse("rate(1 day)").spec == RateSpec(timedelta(days=1))
    assert isinstance(parse("0 3 * * *").spec, CronSpec)
