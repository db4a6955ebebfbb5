"""Schedule expressions: five-field cron in UTC or ``rate(N unit)``, their fire times,
the minimum interval, and the EventBridge Scheduler form of each.

People write standard cron (``minute hour day-of-month month day-of-week``, Sunday
is 0 or 7); EventBridge Scheduler wants ``cron(m h dom mon dow year)`` with one of
the day fields ``?`` and Sunday as 1. Both forms parse to the same ``CronSpec``,
so the embedded stack's scheduler evaluates exactly what a deployment registers.

Also the entities: a workspace's schedule, the record of each fire, and the
workspace's drift record with its document (``DriftFinding``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from runplane.domain.errors import InvalidInput
from runplane.domain.run_options import RunOptions

# Schedules fire at most every 15 minutes: a plan is minutes of sandbox time, and a
# workspace checked more often than that only queues skipped fires behind itself.
MIN_INTERVAL = timedelta(minutes=15)
MAX_SCHEDULES_PER_WORKSPACE = 10
EXPRESSION_POINTER = "/expression"
# Fire times are searched this far ahead (a 29 February schedule fires within it).
_HORIZON_DAYS = 366 * 8


class ScheduleKind(StrEnum):
    PLAN_ONLY = "plan_only"
    REFRESH_ONLY = "refresh_only"


class Remedy(StrEnum):
    """What a drift remediation run does (docs/schedules.md, "Remediating drift")."""

    # A normal plan and apply: the infrastructure is brought back to the configuration.
    RECONCILE = "reconcile"
    # A refresh-only plan and apply: the real world is accepted into the state.
    ACCEPT = "accept"

    @property
    def options(self) -> RunOptions:
        return RunOptions(refresh_only=self is Remedy.ACCEPT)


class ScheduleState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"


@dataclass(frozen=True)
class CronSpec:
    minutes: frozenset[int]
    hours: frozenset[int]
    # None: the field is unrestricted ("*" or "?").
    days_of_month: frozenset[int] | None
    months: frozenset[int]
    # 0 = Sunday .. 6 = Saturday.
    days_of_week: frozenset[int] | None

    def matches_day(self, day: datetime) -> bool:
        if day.month not in self.months:
            return False
        if self.days_of_month is not None and day.day not in self.days_of_month:
            return False
        weekday = (day.weekday() + 1) % 7  # Python: Monday = 0
        return self.days_of_week is None or weekday in self.days_of_week


@dataclass(frozen=True)
class RateSpec:
    every: timedelta


@dataclass(frozen=True)
class Expression:
    """A validated schedule expression: what the person wrote and what AWS is given."""

    text: str
    spec: CronSpec | RateSpec

    @property
    def aws(self) -> str:
        if isinstance(self.spec, RateSpec):
            return self.text
        return to_aws_cron(self.spec)

    def next_after(self, after: datetime, *, anchor: datetime | None = None) -> datetime:
        """The first fire time strictly after ``after`` (rates count from ``anchor``)."""
        return next_fire(self.spec, after, anchor=anchor)

    def latest_due(
        self, since: datetime, now: datetime, *, anchor: datetime | None = None
    ) -> datetime | None:
        return latest_due(self.spec, since, now, anchor=anchor)


# -- parsing -----------------------------------------------------------------------------

_RATE = re.compile(r"rate\(\s*(\d{1,6})\s+(minute|minutes|hour|hours|day|days)\s*\)")
_AWS_CRON = re.compile(r"cron\((.*)\)")
_UNITS = {"minute": 60, "hour": 3600, "day": 86400}
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
_DAYS = {d: i for i, d in enumerate(_DAY_NAMES)}


def parse(text: str, pointer: str = EXPRESSION_POINTER) -> Expression:
    """A person's expression, validated (422 naming ``pointer`` otherwise), with the
    minimum interval enforced."""
    cleaned = " ".join(str(text).split())
    if not cleaned or len(cleaned) > 200:
        raise InvalidInput("a schedule expression is 1 to 200 characters", pointer)
    spec: CronSpec | RateSpec
    if cleaned.startswith("rate("):
        spec = _parse_rate(cleaned, pointer)
    else:
        spec = _parse_cron(cleaned.split(" "), pointer)
    interval = shortest_interval(spec)
    if interval < MIN_INTERVAL:
        raise InvalidInput(
            f"schedule {cleaned!r} can fire {_minutes(interval)} apart; schedules fire at "
            f"most every {_minutes(MIN_INTERVAL)}",
            pointer,
        )
    return Expression(cleaned, spec)


def parse_aws(text: str) -> CronSpec | RateSpec:
    """An EventBridge Scheduler expression as a deployment registered it."""
    if text.startswith("rate("):
        return _parse_rate(text, EXPRESSION_POINTER)
    match = _AWS_CRON.fullmatch(text)
    fields = match.group(1).split() if match else []
    if len(fields) != 6 or fields[5] != "*":
        raise InvalidInput(f"not a schedule expression this service writes: {text!r}")
    minute, hour, dom, month, dow, _ = fields
    return CronSpec(
        minutes=_field(minute, 0, 59, {}, EXPRESSION_POINTER, "minute"),
        hours=_field(hour, 0, 23, {}, EXPRESSION_POINTER, "hour"),
        days_of_month=None
        if dom in {"?", "*"}
        else _field(dom, 1, 31, {}, EXPRESSION_POINTER, "day of month"),
        months=_field(month, 1, 12, _MONTHS, EXPRESSION_POINTER, "month"),
        days_of_week=None
        if dow in {"?", "*"}
        else frozenset(d - 1 for d in _field(dow, 1, 7, {}, EXPRESSION_POINTER, "weekday")),
    )


def to_aws_cron(spec: CronSpec) -> str:
    def listed(values: frozenset[int], full: range) -> str:
        return "*" if set(values) == set(full) else ",".join(str(v) for v in sorted(values))

    if spec.days_of_week is not None:
        dom, dow = "?", ",".join(str(d + 1) for d in sorted(spec.days_of_week))
    elif spec.days_of_month is not None:
        dom, dow = listed(spec.days_of_month, range(1, 32)), "?"
    else:
        # AWS needs one of the two day fields to be "?".
        dom, dow = "*", "?"
    return (
        f"cron({listed(spec.minutes, range(60))} {listed(spec.hours, range(24))} {dom} "
        f"{listed(spec.months, range(1, 13))} {dow} *)"
    )


def _parse_rate(text: str, pointer: str) -> RateSpec:
    match = _RATE.fullmatch(text)
    if match is None:
        raise InvalidInput(
            f"{text!r} is not a rate: write rate(N minutes), rate(N hours) or rate(N days)",
            pointer,
        )
    value, unit = int(match.group(1)), match.group(2).rstrip("s")
    if value < 1:
        raise InvalidInput("a rate is at least 1", pointer)
    if (value == 1) != (match.group(2) == unit):
        raise InvalidInput(f"write rate(1 {unit}) or rate(N {unit}s)", pointer)
    return RateSpec(timedelta(seconds=value * _UNITS[unit]))


def _parse_cron(fields: list[str], pointer: str) -> CronSpec:
    if len(fields) != 5:
        raise InvalidInput(
            "a cron expression has five fields: minute hour day-of-month month day-of-week "
            "(UTC), or write rate(N minutes|hours|days)",
            pointer,
        )
    minute, hour, dom, month, dow = fields
    days_of_month = None if dom == "*" else _field(dom, 1, 31, {}, pointer, "day of month")
    weekdays = None
    if dow != "*":
        weekdays = frozenset(d % 7 for d in _field(dow, 0, 7, _DAYS, pointer, "day of week"))
    if days_of_month is not None and weekdays is not None:
        raise InvalidInput(
            "restrict the day of month or the day of week, not both (write * in one)", pointer
        )
    return CronSpec(
        minutes=_field(minute, 0, 59, {}, pointer, "minute"),
        hours=_field(hour, 0, 23, {}, pointer, "hour"),
        days_of_month=days_of_month,
        months=_field(month, 1, 12, _MONTHS, pointer, "month"),
        days_of_week=weekdays,
    )


def _field(
    text: str, low: int, high: int, names: dict[str, int], pointer: str, what: str
) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = _number(step_text, names={}, pointer=pointer, what=what) if step_text else 1
        if step < 1:
            raise InvalidInput(f"the {what} step must be at least 1", pointer)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _number(first, names, pointer, what), _number(last, names, pointer, what)
        else:
            start = _number(base, names, pointer, what)
            end = high if step_text else start
        if not (low <= start <= high and low <= end <= high) or start > end:
            raise InvalidInput(f"{what} {part!r} is outside {low}-{high}", pointer)
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _number(text: str, names: dict[str, int], pointer: str, what: str) -> int:
    upper = text.upper()
    if upper in names:
        return names[upper]
    if not text.isascii() or not text.isdigit() or len(text) > 2:
        raise InvalidInput(f"{what} {text!r} is not a number", pointer)
    return int(text)


# -- fire times ---------------------------------------------------------------------------


def next_fire(
    spec: CronSpec | RateSpec, after: datetime, *, anchor: datetime | None = None
) -> datetime:
    after = after.astimezone(UTC)
    if isinstance(spec, RateSpec):
        start = (anchor or after).astimezone(UTC).replace(second=0, microsecond=0)
        if start > after:
            return start
        periods = (after - start) // spec.every + 1
        return start + spec.every * periods
    minute = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    day = minute.replace(hour=0, minute=0)
    times = sorted((h, m) for h in spec.hours for m in spec.minutes)
    for _ in range(_HORIZON_DAYS):
        if spec.matches_day(day):
            for hour, mins in times:
                candidate = day.replace(hour=hour, minute=mins)
                if candidate >= minute:
                    return candidate
        day += timedelta(days=1)
    raise InvalidInput("the schedule never fires", EXPRESSION_POINTER)


def latest_due(
    spec: CronSpec | RateSpec, since: datetime, now: datetime, *, anchor: datetime | None = None
) -> datetime | None:
    """The last fire time in ``(since, now]``, or None: a scheduler that was away
    fires once for what it missed, not once per missed time."""
    found = None
    cursor = since
    for _ in range(10_000):
        nxt = next_fire(spec, cursor, anchor=anchor)
        if nxt > now:
            return found
        found, cursor = nxt, nxt
    return found


def shortest_interval(spec: CronSpec | RateSpec) -> timedelta:
    """The shortest time that can pass between two fires (for cron, assuming two
    consecutive days can both match: the day fields never make it shorter)."""
    if isinstance(spec, RateSpec):
        return spec.every
    times = sorted(h * 60 + m for h in spec.hours for m in spec.minutes)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    gaps.append(24 * 60 - times[-1] + times[0])
    return timedelta(minutes=min(gaps))


def _minutes(interval: timedelta) -> str:
    minutes = int(interval.total_seconds() // 60)
    return f"{minutes} minute" + ("" if minutes == 1 else "s")


# -- schedules and their fires ----------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    id: str
    organization_id: str
    workspace_id: str
    expression: str
    aws_expression: str
    kind: str
    state: str
    created_at: datetime
    created_by: str
    updated_at: datetime
    # The scheduled run last started; a fire while it is active is skipped.
    active_run_id: str | None
    last_fire_at: datetime | None
    last_outcome: str | None


@dataclass(frozen=True)
class Fire:
    """What one fire of a schedule did: the run it started, or why none."""

    schedule_id: str
    scheduled_at: datetime
    outcome: str
    run_id: str | None
    reason: str | None


# -- the workspace's drift record --------------------------------------------------------------


@dataclass(frozen=True)
class Drift:
    """What the last scheduled plan or applied run said about the workspace's drift.
    ``as_of`` is the creation time of the run that wrote it; ``body`` is its document
    (``DriftFinding.from_body``)."""

    workspace_id: str
    state: str
    as_of: datetime
    run_id: str
    detected_at: datetime | None
    cleared_at: datetime | None
    body: dict[str, Any]


@dataclass(frozen=True)
class DriftFinding:
    """The drift record's document: a scheduled plan writes its schedule, counts and
    (when clear) ``cleared_by``; an applied run clears it, naming the run before it.
    ``to_body`` gives it back exactly as stored."""

    cleared_by: str | None = None
    schedule_id: str | None = None
    summary: Mapping[str, int] | None = None
    previous_run_id: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> DriftFinding:
        summary, schedule_id = body.get("summary"), body.get("schedule_id")
        previous, cleared_by = body.get("previous_run_id"), body.get("cleared_by")
        return cls(
            cleared_by=None if cleared_by is None else str(cleared_by),
            schedule_id=None if schedule_id is None else str(schedule_id),
            summary={str(k): int(v) for k, v in summary.items() if isinstance(v, int | float)}
            if isinstance(summary, Mapping)
            else None,
            previous_run_id=None if previous is None else str(previous),
        )

    @property
    def by_schedule(self) -> bool:
        return self.previous_run_id is None

    def to_body(self) -> dict[str, object]:
        if not self.by_schedule:
            return {"cleared_by": self.cleared_by, "previous_run_id": self.previous_run_id}
        return {
            "schedule_id": self.schedule_id,
            "summary": dict(self.summary or {}),
            "cleared_by": self.cleared_by,
        }
