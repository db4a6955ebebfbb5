"""How the inbox says how long an approval has left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.attention import time_left

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("left", "said"),
    [
        (timedelta(days=2, hours=4, minutes=59), "2d 4h left"),
        (timedelta(hours=3, minutes=5, seconds=30), "3h 5m left"),
        (timedelta(minutes=45), "45m left"),
        (timedelta(seconds=59), "under a minute left"),
        (timedelta(0), "deadline passed"),
        (timedelta(hours=-1), "deadline passed"),
    ],
)
def test_time_left_is_said_in_the_two_largest_units(left: timedelta, said: str) -> None:
    # Given a deadline ``left`` from now; When it is said; Then it reads as a person would
    assert time_left(NOW + left, NOW) == said


def test_the_inbox_names_the_same_recoverable_endings_as_recovery() -> None:
    # Given the endings the inbox lists as needing recovery, and those recovery takes
    from runplane.domain import attention, recovery

    # Then they are the same
    assert attention.RECOVERABLE_STATUSES == recovery.RECOVERABLE_STATUSES
