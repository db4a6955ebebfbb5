"""Ephemeral workspaces: when a workspace destroys what it manages, and what the sweep
does about it (docs/auto-destroy.md).

A workspace's auto-destroy setting names a time (``destroy_at``), a length of
inactivity (``destroy_after_inactivity``, counted from its last state change, an
applied run's or a native client's), or both: whichever comes first is due. A
postponement moves that moment later, never earlier. The sweep, every few minutes,
looks at each armed workspace and takes at most one step (``next_step``): a notice 24 h
and 1 h before, the destroy run once due, the approval an opted-in workspace gives it,
or the outcome of its run; a failed destroy is retried with backoff and notified.

Pure rules and the entity; storage lives in store/auto_destroy.py, the sweep in
services/auto_destroy.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Final

from runplane.domain.errors import InvalidInput
from runplane.domain.run import RunStatus

# The sweep: its input's name (the fire-schedule function's ``{"sweep": ...}``) and how
# often a deployment's scheduler runs it.
SWEEP: Final = "auto_destroy"
SWEEP_RATE: Final = "rate(5 minutes)"
MIN_INACTIVITY: Final = timedelta(hours=1)
MAX_INACTIVITY: Final = timedelta(days=365)
# How far ahead a destroy may be set or postponed.
MAX_AHEAD: Final = timedelta(days=366)
# Notices go out this long before the destroy is due, the nearer one last.
NOTICE_LEADS: Final = (timedelta(hours=24), timedelta(hours=1))
# A failed destroy is tried again after 30 min, 1 h, 2 h, ... at most a day apart.
RETRY_BASE: Final = timedelta(minutes=30)
RETRY_CAP: Final = timedelta(hours=24)
# The notices remembered (two per due time): enough for the last few postponements.
_NOTICES_KEPT: Final = 8
_DURATION = re.compile(r"(\d{1,6})([mhd])")
_UNITS: Final = {"m": 60, "h": 3600, "d": 86400}


class Outcome(StrEnum):
    DESTROYED = "destroyed"
    FAILED = "failed"


def parse_duration(text: object, pointer: str) -> timedelta:
    """``90m``, ``36h`` or ``7d`` (also a number of seconds)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return timedelta(seconds=text)
    match = _DURATION.fullmatch(str(text).strip())
    if match is None:
        raise InvalidInput(
            f"{str(text)[:40]!r} is not a duration: write minutes, hours or days as 90m, 36h or 7d",
            pointer,
        )
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def format_duration(length: timedelta) -> str:
    seconds = int(length.total_seconds())
    for unit in ("d", "h", "m"):
        if seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


def parse_time(text: object, pointer: str) -> datetime:
    """An ISO 8601 time with its zone, in UTC to the second."""
    try:
        parsed = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"{str(text)[:40]!r} is not a time: write ISO 8601 with a zone, "
            "as 2026-12-24T18:00:00Z",
            pointer,
        ) from None
    if parsed.tzinfo is None:
        raise InvalidInput("write the time with its zone, as 2026-12-24T18:00:00Z", pointer)
    return parsed.astimezone(UTC).replace(microsecond=0)


@dataclass(frozen=True)
class AutoDestroySettings:
    """What a person set: when, after how long without a state change, and whether the
    destroy run applies without a person's approval (``auto_apply``)."""

    destroy_at: datetime | None = None
    destroy_after_inactivity: timedelta | None = None
    auto_apply: bool = False

    def checked(self, now: datetime) -> AutoDestroySettings:
        """These settings, or a 422 naming the field that cannot be right."""
        if self.destroy_at is None and self.destroy_after_inactivity is None:
            raise InvalidInput(
                "set destroy_at, destroy_after_inactivity or both (to stop, clear the "
                "setting instead)",
                "/destroy_at",
            )
        if self.destroy_at is not None:
            if self.destroy_at <= now:
                raise InvalidInput("destroy_at must be in the future", "/destroy_at")
            if self.destroy_at > now + MAX_AHEAD:
                raise InvalidInput("destroy_at is at most a year ahead", "/destroy_at")
        inactivity = self.destroy_after_inactivity
        if inactivity is not None and not MIN_INACTIVITY <= inactivity <= MAX_INACTIVITY:
            raise InvalidInput(
                "destroy_after_inactivity is 1h to 365d", "/destroy_after_inactivity"
            )
        return self


@dataclass(frozen=True)
class AutoDestroy:
    """A workspace's auto-destroy: its settings, who set them and when, any
    postponement, the notices sent, and its destroy runs. ``version`` counts every
    write: each write is conditioned on the version it was built from."""

    workspace_id: str
    organization_id: str
    settings: AutoDestroySettings
    set_at: datetime
    set_by: str
    version: int = 1
    postponed_until: datetime | None = None
    postponed_by: str | None = None
    # "<due ISO>/<lead>" of every notice sent (the newest few).
    notices: tuple[str, ...] = ()
    # The destroy run in flight, and the last one that ended.
    active_run_id: str | None = None
    last_run_id: str | None = None
    last_outcome: str | None = None
    last_reason: str | None = None
    # Destroy runs started for the current due time (the retry count), and when the
    # next may start after a failure.
    attempts: int = 0
    next_attempt_at: datetime | None = None
    destroyed_at: datetime | None = None

    def due_at(self, last_activity: datetime | None) -> datetime | None:
        """When the workspace is due to be destroyed, or None once it was and nothing
        changed since: the earlier of ``destroy_at`` and the end of the inactivity
        (from ``last_activity`` or, if later, from when the setting was made), never
        before a postponement. A destroy carried out spends its ``destroy_at`` and the
        activity before it (the destroy's own state included): only a state change or a
        setting made after it arms the workspace again."""
        done = self.destroyed_at
        candidates = []
        destroy_at = self.settings.destroy_at
        if destroy_at is not None and (done is None or destroy_at > done):
            candidates.append(destroy_at)
        inactivity = self.settings.destroy_after_inactivity
        if inactivity is not None:
            since = max(last_activity or self.set_at, self.set_at)
            if done is None or since > done:
                candidates.append(since + inactivity)
        if not candidates:
            return None
        due = min(candidates)
        if self.postponed_until is not None and self.postponed_until > due:
            return self.postponed_until
        return due


# -- the sweep's steps -----------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Nothing to do now (``why`` says what is awaited)."""

    why: str


@dataclass(frozen=True)
class Notify:
    """Send the notice ``lead`` before ``due`` (and count the wider ones as sent)."""

    due: datetime
    lead: timedelta


@dataclass(frozen=True)
class Launch:
    """Start the destroy run for ``due``."""

    due: datetime


@dataclass(frozen=True)
class Approve:
    """The opted-in workspace approves its waiting destroy run."""

    run_id: str


@dataclass(frozen=True)
class Ended:
    """The destroy run in flight ended with ``status``."""

    run_id: str
    status: RunStatus
    reason: str | None


Step = Wait | Notify | Launch | Approve | Ended


def notice_label(lead: timedelta) -> str:
    """``24h`` or ``1h``: how a notice names how long is left."""
    return f"{int(lead.total_seconds() // 3600)}h"


def notice_key(due: datetime, lead: timedelta) -> str:
    return f"{due.isoformat()}/{notice_label(lead)}"


def next_step(
    record: AutoDestroy,
    now: datetime,
    *,
    last_activity: datetime | None,
    active_status: RunStatus | None,
    active_reason: str | None = None,
) -> Step:
    """The one thing the sweep does for ``record`` at ``now``; ``active_status`` is the
    status of its run in flight (None if it has none, or the run is gone)."""
    if record.active_run_id is not None and active_status is not None:
        if active_status.is_terminal:
            return Ended(record.active_run_id, active_status, active_reason)
        if active_status is RunStatus.AWAITING_APPROVAL and record.settings.auto_apply:
            return Approve(record.active_run_id)
        return Wait(f"destroy run {record.active_run_id} is {active_status.value}")
    due = record.due_at(last_activity)
    if due is None:
        return Wait("destroyed, and not armed again since")
    if now >= due:
        if record.next_attempt_at is not None and now < record.next_attempt_at:
            return Wait(f"retrying at {record.next_attempt_at.isoformat()}")
        return Launch(due)
    for lead in sorted(NOTICE_LEADS):
        if now >= due - lead:
            if notice_key(due, lead) in record.notices:
                break
            return Notify(due, lead)
    return Wait(f"due at {due.isoformat()}")


def noticed(record: AutoDestroy, step: Notify) -> AutoDestroy:
    """The record once ``step``'s notice is sent: it and every wider one count as sent
    (a setting made 30 minutes before its time gets one notice, not two)."""
    keys = [notice_key(step.due, lead) for lead in NOTICE_LEADS if lead >= step.lead]
    kept = tuple(k for k in record.notices if k not in keys) + tuple(keys)
    return replace(record, notices=kept[-_NOTICES_KEPT:], version=record.version + 1)


def retry_delay(failures: int) -> timedelta:
    """How long after failure ``failures`` (1-based) the next destroy run may start."""
    doublings = min(max(0, failures - 1), 16)
    return min(RETRY_CAP, RETRY_BASE * (1 << doublings))


def after_run(record: AutoDestroy, step: Ended, now: datetime) -> AutoDestroy:
    """The record once its destroy run's ending is taken in: ``succeeded`` destroyed the
    workspace (a destroy with nothing left to destroy ends there too); any other ending
    is a failure, tried again after ``retry_delay``."""
    base = replace(
        record,
        active_run_id=None,
        last_run_id=step.run_id,
        version=record.version + 1,
    )
    if step.status is RunStatus.SUCCEEDED:
        return replace(
            base,
            last_outcome=Outcome.DESTROYED.value,
            last_reason=None,
            attempts=0,
            next_attempt_at=None,
            destroyed_at=now,
        )
    reason = f"destroy run {step.run_id} ended {step.status.value}"
    if step.reason:
        reason += f": {step.reason[:300]}"
    return replace(
        base,
        last_outcome=Outcome.FAILED.value,
        last_reason=reason,
        next_attempt_at=now + retry_delay(record.attempts),
    )


def failed_to_start(record: AutoDestroy, reason: str, now: datetime) -> AutoDestroy:
    """The record once a due destroy run could not even be created (no configuration,
    a launch denied): counted and retried like a failed run."""
    attempts = record.attempts + 1
    return replace(
        record,
        attempts=attempts,
        last_outcome=Outcome.FAILED.value,
        last_reason=reason[:400],
        next_attempt_at=now + retry_delay(attempts),
        version=record.version + 1,
    )


def launched(record: AutoDestroy, run_id: str) -> AutoDestroy:
    return replace(
        record,
        active_run_id=run_id,
        attempts=record.attempts + 1,
        version=record.version + 1,
    )


def postponed(
    record: AutoDestroy, until: datetime, by: str, now: datetime, last_activity: datetime | None
) -> AutoDestroy:
    """The record postponed to ``until`` (later than it is due now, at most a year
    ahead); a postponement also ends a failure's wait for its retry."""
    due = record.due_at(last_activity)
    if due is None:
        raise InvalidInput("nothing is due to be postponed: the workspace was destroyed", "/until")
    if until <= due or until <= now:
        raise InvalidInput(
            f"postpone to a time after the one it is due, {due.isoformat()}", "/until"
        )
    if until > now + MAX_AHEAD:
        raise InvalidInput("postpone at most a year ahead", "/until")
    return replace(
        record,
        postponed_until=until,
        postponed_by=by,
        attempts=0,
        next_attempt_at=None,
        version=record.version + 1,
    )
