"""Drift: what the workspace's real infrastructure differs from its state by, as the
last scheduled plan (or applied run) found it.

A scheduled plan-only run that ends with changes records drift on the workspace
(when, which run, the plan's counts); the next scheduled plan without changes, or
the next applied run, clears it. Each write commits in the same transaction as
the run's final move, and names the creation time of its run: a run created
earlier never overwrites what a later one found (``StaleDriftFinding``).
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal
from typing import Any

from runplane.domain.entities import Run
from runplane.domain.parts import PlanEvidence, RunInput, RunPart
from runplane.domain.run import RunKind, Transitioned
from runplane.domain.run_events import EventType, RunEvent, drift_event_id
from runplane.domain.schedules import Drift, DriftFinding

logger = logging.getLogger("runplane.drift")
_COUNTS = ("adds", "changes", "destroys", "replaces", "drifted")


def on_scheduled_plan(
    run: Run, snapshot: RunPart | None, part: RunPart | None, now: datetime
) -> Drift | None:
    """The drift record a finished plan-only or refresh-only run writes, if a schedule
    created it (``snapshot``: the run's input part; ``part``: its plan)."""
    if run.kind not in {RunKind.PLAN_ONLY, RunKind.REFRESH_ONLY}:
        return None
    origin = RunInput.from_body(snapshot.body).schedule if snapshot else None
    if not origin or part is None:
        return None
    plan = PlanEvidence.from_body(part.body)
    summary = plan.summary
    drifted = plan.has_changes
    return Drift(
        workspace_id=run.workspace_id,
        state="drifted" if drifted else "clear",
        as_of=run.created_at,
        run_id=run.id,
        detected_at=now if drifted else None,
        cleared_at=None if drifted else now,
        body=DriftFinding(
            cleared_by=None if drifted else "scheduled_plan",
            schedule_id=_opt_str(origin.get("schedule_id")),
            summary={name: _count(summary.get(name)) for name in _COUNTS},
        ).to_body(),
    )


def on_applied(current: Drift | None, run: Run, now: datetime) -> Drift | None:
    """An applied run makes the state match the infrastructure: the record clearing
    ``current`` (the workspace's drift as read), if it says drifted."""
    if current is None or current.state != "drifted":
        return None
    return Drift(
        workspace_id=run.workspace_id,
        state="clear",
        as_of=run.created_at,
        run_id=run.id,
        detected_at=None,
        cleared_at=now,
        body=DriftFinding(cleared_by="apply", previous_run_id=current.run_id).to_body(),
    )


def detected_event(drift: Drift | None, run: Run, moved: Transitioned) -> list[RunEvent]:
    """The ``drift_detected`` run event of a drift record committed with ``run``'s final
    move (``moved``): notification destinations that subscribe to it get the counts. It
    is an outbox item of that same transaction, so the finding and its event commit
    together (``RunLifecycle.move``'s ``also_announce``)."""
    if drift is None or drift.state != "drifted":
        return []
    finding = DriftFinding.from_body(drift.body)
    details = {name: str(count) for name, count in (finding.summary or {}).items()}
    if finding.schedule_id:
        details["schedule_id"] = finding.schedule_id
    return [
        RunEvent(
            id=drift_event_id(run.id),
            type=EventType.DRIFT_DETECTED,
            run_id=run.id,
            organization_id=run.organization_id,
            workspace_id=run.workspace_id,
            run_kind=run.kind,
            status=moved.status,
            at=moved.at,
            details=details,
        )
    ]


def log_finding(drift: Drift | None) -> None:
    """One structured line per committed drift finding (alarms count them)."""
    if drift is None or drift.state != "drifted":
        return
    summary = DriftFinding.from_body(drift.body).summary or {}
    logger.info(
        "drift detected",
        extra={"run_id": drift.run_id, "workspace_id": drift.workspace_id, **summary},
    )


def view(drift: Drift | None) -> dict[str, Any] | None:
    """A workspace's drift record as reads show it (None: never checked by a schedule)."""
    if drift is None:
        return None
    finding = DriftFinding.from_body(drift.body)
    return {
        "drifted": drift.state == "drifted",
        "run_id": drift.run_id,
        "detected_at": drift.detected_at.isoformat() if drift.detected_at else None,
        "cleared_at": drift.cleared_at.isoformat() if drift.cleared_at else None,
        "schedule_id": finding.schedule_id,
        "summary": None if finding.summary is None else dict(finding.summary),
        "cleared_by": finding.cleared_by,
    }


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _count(value: object) -> int:
    # DynamoDB gives numbers back as Decimal.
    return int(value) if isinstance(value, int | float | Decimal) else 0
