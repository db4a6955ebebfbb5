"""How the dashboard writes times, durations, people and statuses for a person.

Jinja filters (registered in ``pages.templates``). Each returns escaped markup or plain
text; nothing here reads a store. Times are relative to the page's ``now`` (the control
plane's clock when ``pages.render`` renders it), with the exact UTC time in the ``title``
(shown on hover) and ``datetime`` attribute.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jinja2 import Undefined, pass_context
from jinja2.runtime import Context
from markupsafe import Markup

# A status's badge colour: what a reader should do about it, not which step it is.
_TONES = {
    "succeeded": "ok",
    "applied": "ok",
    "plan_complete": "ok",
    "policy_passed": "ok",
    "passed": "ok",
    "completed": "ok",
    "awaiting_approval": "wait",
    "pending": "wait",
    "waiting": "wait",
    "waiting_second": "wait",
    "approved": "ok",
    "soft_failed": "warn",
    "advisory_failed": "warn",
    "overridden": "warn",
    "planning": "busy",
    "applying": "busy",
    "queued": "busy",
    "dispatch_pending": "busy",
    "policy_evaluating": "busy",
    "running": "busy",
    "plan_failed": "bad",
    "policy_failed": "bad",
    "apply_failed": "bad",
    "hard_failed": "bad",
    "failed": "bad",
    "errored": "bad",
    "needs_recovery": "alert",
    "apply_interrupted": "alert",
    "apply_start_uncertain": "alert",
    "plan_credentials_required": "bad",
    "rejected": "off",
    "expired": "off",
    "canceled": "off",
    "discarded": "off",
    "skipped": "off",
}


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def exact(value: Any) -> str:
    """``2026-12-02 18:07:44 UTC``: to the second, in UTC."""
    moment = _as_datetime(value)
    if moment is None:
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def span(seconds: float) -> str:
    """A length of time as a person says it: ``45s``, ``3m 12s``, ``2h 5m``, ``6d 23h``."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def relative(moment: datetime, now: datetime) -> str:
    """``just now``, ``5 minutes ago``, ``in 2 days``: rounded to the nearest unit, a
    unit only once most of it has passed (47 hours is "2 days", 20 hours "20 hours")."""
    delta = (moment - now).total_seconds()
    ahead = delta > 0
    seconds = abs(delta)
    if seconds < 45:
        return "in a few seconds" if ahead else "just now"
    if seconds < 45 * 60:
        count, unit = max(1, round(seconds / 60)), "minute"
    elif seconds < 22 * 3600:
        count, unit = max(1, round(seconds / 3600)), "hour"
    else:
        count, unit = max(1, round(seconds / 86_400)), "day"
    words = f"{count} {unit}{'' if count == 1 else 's'}"
    return f"in {words}" if ahead else f"{words} ago"


def _now(context: Context) -> datetime:
    now = context.get("now")
    return now if isinstance(now, datetime) else datetime.now(UTC)


@pass_context
def when(context: Context, value: Any, element_id: str | None = None) -> Markup:
    """``<time datetime=… title=exact>5 minutes ago</time>``, or a dash for no time."""
    moment = _as_datetime(value)
    if moment is None:
        return Markup('<span class="none">—</span>')
    now = _now(context)
    if moment.tzinfo is None or now.tzinfo is None:
        moment, now = moment.replace(tzinfo=None), now.replace(tzinfo=None)
    id_attribute = Markup(' id="{}"').format(element_id) if element_id else Markup("")
    return Markup('<time datetime="{}" title="{}"{}>{}</time>').format(
        moment.isoformat(), exact(moment), id_attribute, relative(moment, now)
    )


@pass_context
def duration(context: Context, start: Any, end: Any = None) -> str:
    """How long from ``start`` to ``end`` (or to now, while it lasts): ``1m 12s``."""
    began = _as_datetime(start)
    if began is None:
        return ""
    ended = _as_datetime(end) or _now(context)
    if (began.tzinfo is None) != (ended.tzinfo is None):
        began, ended = began.replace(tzinfo=None), ended.replace(tzinfo=None)
    return span((ended - began).total_seconds())


@pass_context
def left(context: Context, until: Any) -> str:
    """How long from now until ``until`` (``6d 23h``), nothing once it has passed."""
    end = _as_datetime(until)
    if end is None:
        return ""
    now = _now(context)
    if (end.tzinfo is None) != (now.tzinfo is None):
        end, now = end.replace(tzinfo=None), now.replace(tzinfo=None)
    return span((end - now).total_seconds())


def seconds(value: Any) -> str:
    """A number of seconds as a span (``duration`` from a count)."""
    if isinstance(value, timedelta):
        return span(value.total_seconds())
    if isinstance(value, (int, float)):
        return span(value)
    return ""


def person(ref: Any, me: str | None = None, display: Any = None) -> Markup:
    """Who a principal reference (``kind:id``) is, for a reader: ``you``, a user's name,
    ``ci (API token)``, ``GitHub``, ``Runplane (auto destroy)``; the reference on hover.
    ``display`` is the principal's own words when the record kept them (``User ci``)."""
    if not isinstance(ref, str) or not ref:
        return Markup('<span class="none">—</span>')
    kind, _, rest = ref.partition(":")
    named = display.removeprefix("User ").strip() if isinstance(display, str) else ""
    if me is not None and ref == me:
        shown = "you"
    elif kind == "user":
        shown = named or rest
    elif kind == "token":
        shown = f"{named} (API token)" if named else f"API token {rest}"
    elif kind == "system":
        what = rest.partition(":")[0]
        shown = f"Runplane ({what.replace('-', ' ')})" if what else "Runplane"
    elif kind == "schedule":
        shown = "a schedule"
    elif kind == "source":
        shown = "GitHub"
    elif kind == "runner":
        shown = "the runner"
    else:
        shown = named or ref
    return Markup('<span class="person" title="{}">{}</span>').format(ref, shown)


def _status(status: Any) -> str:
    """A status given as an enum member, its value, or nothing (a missing field)."""
    if status is None or isinstance(status, Undefined):
        return ""
    return str(getattr(status, "value", status))


def tone(status: Any) -> str:
    """The badge class of a status: ``ok``, ``wait``, ``warn``, ``busy``, ``bad``,
    ``alert`` or ``off``."""
    return _TONES.get(_status(status), "off")


def badge(status: Any, label: str | None = None) -> Markup:
    """A status as a coloured badge with words (never colour alone)."""
    value = _status(status)
    text = label if label is not None else value.replace("_", " ")
    return Markup('<span class="badge badge-{}" data-status="{}">{}</span>').format(
        tone(value), value, text
    )


FILTERS = {
    "when": when,
    "exact": exact,
    "duration": duration,
    "left": left,
    "seconds": seconds,
    "person": person,
    "tone": tone,
    "badge": badge,
}
