"""Workspace schedules, their fire records, and the workspace's drift record.

A fire record is keyed by schedule and scheduled time and put only if absent: a
duplicate delivery of the same fire is refused by the database and creates
nothing. The schedule's ``active_run_id`` is moved only by a write that names the
value it replaces, so two fires never both start a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pynamodb.attributes import JSONAttribute, UnicodeAttribute
from pynamodb.attributes import UTCDateTimeAttribute as Time

from runplane.domain.errors import (
    NotFound,
    ScheduleAlreadyFired,
    ScheduleMoved,
    StaleDriftFinding,
)
from runplane.store import prefetch
from runplane.store.models import (
    ConfigurationVersionItem,
    Gsi1,
    TableItem,
    configurations_partition,
    drift_key,
)
from runplane.store.table import GSI1
from runplane.store.transaction import Item, Transaction
from runplane.store.workspaces import is_exactly

# Fire records are evidence for a while, then expire (DynamoDB TTL).
FIRE_RECORD_TTL = timedelta(days=90)
FIRE_PREFIX = "FIRE#"


def schedule_key(schedule_id: str) -> tuple[str, str]:
    return f"SCHED#{schedule_id}", "SCHED"


def fire_key(schedule_id: str, scheduled_at: datetime) -> tuple[str, str]:
    return f"SCHED#{schedule_id}", f"{FIRE_PREFIX}{scheduled_at.isoformat()}"


def schedules_partition(workspace_id: str) -> str:
    return f"WS#{workspace_id}#SCHEDULES"


class ScheduleItem(TableItem):
    # Its own connection: a model first used after ``models.bind`` would otherwise share
    # TableItem's, whose schema has no index.
    _connection = None
    gsi1: Gsi1[ScheduleItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    schedule_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    expression = UnicodeAttribute()
    aws_expression = UnicodeAttribute()
    kind = UnicodeAttribute()
    state = UnicodeAttribute()
    created_at = Time()
    created_by = UnicodeAttribute()
    updated_at = Time()
    # The scheduled run last started; a fire while it is active is skipped.
    active_run_id = UnicodeAttribute(null=True)
    last_fire_at = Time(null=True)
    last_outcome = UnicodeAttribute(null=True)


class ScheduleFireItem(TableItem):
    # Its own connection: a model first used after ``models.bind`` would otherwise share
    # TableItem's, whose schema has no index.
    _connection = None
    schedule_id = UnicodeAttribute()
    scheduled_at = Time()
    outcome = UnicodeAttribute()
    run_id = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)
    recorded_at = Time()


class DriftItem(TableItem):
    """What the last scheduled plan or applied run said about the workspace's drift.

    ``as_of`` is the creation time of the run that wrote it: an older run that
    finishes later never overwrites a newer run's finding.
    """

    _connection = None

    workspace_id = UnicodeAttribute()
    state = UnicodeAttribute()
    as_of = Time()
    run_id = UnicodeAttribute()
    detected_at = Time(null=True)
    cleared_at = Time(null=True)
    body = JSONAttribute(default=dict)


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
    active_run_id: str | None
    last_fire_at: datetime | None
    last_outcome: str | None


@dataclass(frozen=True)
class Fire:
    schedule_id: str
    scheduled_at: datetime
    outcome: str
    run_id: str | None
    reason: str | None


@dataclass(frozen=True)
class Drift:
    workspace_id: str
    state: str
    as_of: datetime
    run_id: str
    detected_at: datetime | None
    cleared_at: datetime | None
    body: dict[str, Any]


def _schedule(item: ScheduleItem) -> Schedule:
    return Schedule(
        id=item.schedule_id,
        organization_id=item.org_id,
        workspace_id=item.workspace_id,
        expression=item.expression,
        aws_expression=item.aws_expression,
        kind=item.kind,
        state=item.state,
        created_at=item.created_at,
        created_by=item.created_by,
        updated_at=item.updated_at,
        active_run_id=item.active_run_id,
        last_fire_at=item.last_fire_at,
        last_outcome=item.last_outcome,
    )


# -- schedules ---------------------------------------------------------------------------


def get(schedule_id: str) -> Schedule:
    try:
        return _schedule(ScheduleItem.get(*schedule_key(schedule_id), consistent_read=True))
    except ScheduleItem.DoesNotExist:
        raise NotFound("schedule", schedule_id) from None


def list_for_workspace(workspace_id: str) -> list[Schedule]:
    items = ScheduleItem.gsi1.query(schedules_partition(workspace_id))
    return [_schedule(item) for item in items]


def create(schedule: Schedule) -> Transaction:
    return Transaction().put_new(
        ScheduleItem(
            *schedule_key(schedule.id),
            gsi1pk=schedules_partition(schedule.workspace_id),
            gsi1sk=f"{schedule.created_at.isoformat()}#{schedule.id}",
            schedule_id=schedule.id,
            org_id=schedule.organization_id,
            workspace_id=schedule.workspace_id,
            expression=schedule.expression,
            aws_expression=schedule.aws_expression,
            kind=schedule.kind,
            state=schedule.state,
            created_at=schedule.created_at,
            created_by=schedule.created_by,
            updated_at=schedule.updated_at,
        )
    )


def set_state(schedule_id: str, state: str, now: datetime) -> Transaction:
    return Transaction().update(
        ScheduleItem(*schedule_key(schedule_id)),
        [ScheduleItem.state.set(state), ScheduleItem.updated_at.set(now)],
        condition=ScheduleItem.pk.exists(),
        on_refused=lambda current: NotFound("schedule", schedule_id),
    )


def delete(schedule_id: str) -> Transaction:
    return Transaction().delete(
        ScheduleItem(*schedule_key(schedule_id)),
        condition=ScheduleItem.pk.exists(),
        on_refused=lambda current: NotFound("schedule", schedule_id),
    )


def record_fire(
    schedule: Schedule,
    scheduled_at: datetime,
    *,
    outcome: str,
    now: datetime,
    run_id: str | None = None,
    reason: str | None = None,
) -> Transaction:
    """The fire record (put only if absent) and, when it started a run, the schedule's
    active run moved from exactly the one it was read with."""

    def fired(current: Item | None) -> Exception:
        return ScheduleAlreadyFired(
            f"schedule {schedule.id} already fired for {scheduled_at.isoformat()}; "
            "nothing was written"
        )

    tx = Transaction().put_new(
        ScheduleFireItem(
            *fire_key(schedule.id, scheduled_at),
            schedule_id=schedule.id,
            scheduled_at=scheduled_at,
            outcome=outcome,
            run_id=run_id,
            reason=reason,
            recorded_at=now,
            expires_at=now + FIRE_RECORD_TTL,
        ),
        on_refused=fired,
    )
    actions = [ScheduleItem.last_fire_at.set(scheduled_at), ScheduleItem.last_outcome.set(outcome)]
    if run_id is not None:
        actions.append(ScheduleItem.active_run_id.set(run_id))
    return tx.update(
        ScheduleItem(*schedule_key(schedule.id)),
        actions,
        condition=is_exactly(ScheduleItem.active_run_id, schedule.active_run_id)
        & (ScheduleItem.state == schedule.state),
        on_refused=lambda current: ScheduleMoved(
            f"schedule {schedule.id} changed while it fired; nothing was written"
        ),
    )


def fires(schedule_id: str, limit: int = 20) -> list[Fire]:
    items = ScheduleFireItem.query(
        schedule_key(schedule_id)[0],
        ScheduleFireItem.sk.startswith(FIRE_PREFIX),
        scan_index_forward=False,
        limit=limit,
        consistent_read=True,
    )
    return [
        Fire(i.schedule_id, i.scheduled_at, i.outcome, i.run_id, i.reason)
        for i in list(items)[:limit]
    ]


# -- drift -------------------------------------------------------------------------------


def get_drift(workspace_id: str) -> Drift | None:
    known, raw = prefetch.take_known(drift_key(workspace_id))
    if known and raw is None:
        return None  # read absent with this request's authentication
    try:
        item = (
            DriftItem.from_raw_data(raw)
            if raw is not None
            else DriftItem.get(*drift_key(workspace_id), consistent_read=True)
        )
    except DriftItem.DoesNotExist:
        return None
    return Drift(
        workspace_id=item.workspace_id,
        state=item.state,
        as_of=item.as_of,
        run_id=item.run_id,
        detected_at=item.detected_at,
        cleared_at=item.cleared_at,
        body=dict(item.body or {}),
    )


def put_drift(drift: Drift) -> Transaction:
    """The workspace's drift record, unless a run created after ``drift.as_of`` wrote it."""
    return Transaction().put(
        DriftItem(
            *drift_key(drift.workspace_id),
            workspace_id=drift.workspace_id,
            state=drift.state,
            as_of=drift.as_of,
            run_id=drift.run_id,
            detected_at=drift.detected_at,
            cleared_at=drift.cleared_at,
            body=drift.body,
        ),
        condition=DriftItem.as_of.does_not_exist() | (DriftItem.as_of <= drift.as_of),
        on_refused=lambda current: StaleDriftFinding(
            f"a newer run wrote workspace {drift.workspace_id}'s drift record"
        ),
    )


# -- configurations ----------------------------------------------------------------------


def latest_configuration_id(workspace_id: str) -> str | None:
    """The workspace's most recently uploaded configuration version that may apply
    (speculative ones, from a plan-only remote operation, are passed over)."""
    items = ConfigurationVersionItem.gsi1.query(
        configurations_partition(workspace_id), scan_index_forward=False, page_size=20
    )
    for item in items:
        if item.status == "uploaded" and not item.speculative:
            return str(item.cv_id)
    return None
