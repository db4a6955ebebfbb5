"""The attention inbox's rules: which runs and workspaces wait for a person, and in what
order they are listed (docs/dashboard.md, "Attention").

The store keeps an index of the runs that may need someone (``Notice``); these rules
decide, from the notices, the caller's workspaces and the clock, what is listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from runplane.domain.entities import Workspace
from runplane.domain.run import INTERVENTION_STATUSES, RunKind, RunStatus


class Category(StrEnum):
    APPROVAL = "awaiting_approval"
    RECOVERY = "needs_recovery"
    FAILED = "failed"
    DRIFT = "drift"


# The endings recovery takes (``domain.recovery.RECOVERABLE_STATUSES``, named here so
# that every move of a run, which writes the index, need not load recovery's rules).
RECOVERABLE_STATUSES: frozenset[RunStatus] = INTERVENTION_STATUSES | {RunStatus.APPLY_FAILED}
# A run that ended in one of these failed; it is listed for a while (below).
FAILED_STATUSES: frozenset[RunStatus] = frozenset(
    {
        RunStatus.PLAN_FAILED,
        RunStatus.POLICY_FAILED,
        RunStatus.APPLY_FAILED,
        RunStatus.PLAN_CREDENTIALS_REQUIRED,
    }
)
# A workspace's latest failure is listed until a later run of the workspace succeeds, and
# for at most this long: older failures are history, not news.
FAILED_WINDOW = timedelta(days=7)
# An armed auto-destroy is mentioned when it is due within this long.
AUTO_DESTROY_HORIZON = timedelta(hours=24)


@dataclass(frozen=True)
class Notice:
    """A run as the attention index holds it: what the inbox shows without reading the
    run. ``since`` is when it entered ``status``; ``deadline`` its approval deadline.
    ``latest_failure``: the notice of its workspace's latest failure (a run that failed
    in a recoverable way has a notice of each kind)."""

    run_id: str
    organization_id: str
    workspace_id: str
    kind: RunKind
    status: RunStatus
    created_by: str | None
    created_at: datetime
    since: datetime
    deadline: datetime | None = None
    latest_failure: bool = False


@dataclass(frozen=True)
class Entry:
    """One line of the inbox: a run (or a workspace, for drift) and why it is listed."""

    category: Category
    workspace: Workspace
    notice: Notice | None = None


@dataclass(frozen=True)
class Inbox:
    approvals: tuple[Entry, ...]
    recoveries: tuple[Entry, ...]
    failures: tuple[Entry, ...]
    drifted: tuple[Entry, ...]

    @property
    def count(self) -> int:
        """Everything listed waits for a person: the header's number."""
        return len(self.approvals) + len(self.recoveries) + len(self.failures) + len(self.drifted)


def inbox(
    notices: Iterable[Notice],
    workspaces: Iterable[Workspace],
    drifted: Iterable[str],
    now: datetime,
) -> Inbox:
    """The inbox of a caller who sees ``workspaces`` (the others' notices are dropped),
    whose workspaces ``drifted`` last found drift.

    - awaiting approval: soonest deadline first (no deadline last);
    - needing recovery: a recoverable run that still holds its workspace's writer
      authority (recovery releases it; the run keeps its status as history);
    - failed: the notice of a workspace's latest failure, within ``FAILED_WINDOW``,
      unless it is listed as needing recovery; newest first;
    - drift: by workspace name.
    """
    seen: Mapping[str, Workspace] = {w.id: w for w in workspaces}
    approvals: list[Entry] = []
    recoveries: list[Entry] = []
    failures: list[Entry] = []
    for notice in notices:
        workspace = seen.get(notice.workspace_id)
        if workspace is None or workspace.organization_id != notice.organization_id:
            continue
        if notice.latest_failure:
            if notice.status in FAILED_STATUSES and now - notice.since <= FAILED_WINDOW:
                failures.append(Entry(Category.FAILED, workspace, notice))
        elif notice.status is RunStatus.AWAITING_APPROVAL:
            approvals.append(Entry(Category.APPROVAL, workspace, notice))
        elif notice.status in RECOVERABLE_STATUSES and workspace.writer_run_id == notice.run_id:
            recoveries.append(Entry(Category.RECOVERY, workspace, notice))
    recovering = {_notice(e).run_id for e in recoveries}
    failures = [e for e in failures if _notice(e).run_id not in recovering]
    far = datetime.max.replace(tzinfo=now.tzinfo)
    approvals.sort(key=lambda e: (_notice(e).deadline or far, _notice(e).run_id))
    recoveries.sort(key=lambda e: (_notice(e).since, _notice(e).run_id))
    failures.sort(key=lambda e: (_notice(e).since, _notice(e).run_id), reverse=True)
    drift = sorted(
        (Entry(Category.DRIFT, seen[w]) for w in set(drifted) if w in seen),
        key=lambda e: e.workspace.name,
    )
    return Inbox(tuple(approvals), tuple(recoveries), tuple(failures), tuple(drift))


def _notice(entry: Entry) -> Notice:
    assert entry.notice is not None
    return entry.notice


# An approval whose deadline is this close is flagged: it expires before most people's
# next working day.
EXPIRING_SOON = timedelta(hours=24)


def expiring_soon(deadline: datetime, now: datetime) -> bool:
    """Whether the decision must be taken within ``EXPIRING_SOON`` (and still can be)."""
    return now < deadline <= now + EXPIRING_SOON


def time_left(deadline: datetime, now: datetime) -> str:
    """A deadline as a person reads it: ``2d 4h left``, ``3h 5m left``, ``45m left``,
    ``under a minute left``, or ``deadline passed``."""
    seconds = int((deadline - now).total_seconds())
    if seconds <= 0:
        return "deadline passed"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h left"
    if hours:
        return f"{hours}h {minutes}m left"
    if minutes:
        return f"{minutes}m left"
    return "under a minute left"
