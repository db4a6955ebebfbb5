"""Workspace schedules, their fire records, and the workspace's drift record.

A fire record is keyed by schedule and scheduled time and put only if absent: a
duplicate delivery of the same fire is refused by the database and creates
nothing. The schedule's ``active_run_id`` is moved only by a write that names the
value it replaces, so two fires never both start a run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pynamodb.attributes import JSONAttribute, UnicodeAttribute
from pynamodb.attributes import UTCDateTimeAttribute as Time

from runplane.domain.errors import (
    NotFound,
    ScheduleAlreadyFired,
    ScheduleMoved,
    StaleDriftFinding,
)
from runplane.domain.schedules import Drift, Fire, Schedule
from runplane.store.models import (
    ConfigurationVersionItem,
    Gsi1,
    TableItem,
    configurations_partition,
    drift_key,
)
from runplane.store.prefetch import IdentityMap
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


def _schedule(item: ScheduleItem) -> Schedule:
    """The schedule an item holds (the inverse of ``_schedule_item``)."""
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


def _schedule_item(schedule: Schedule) -> ScheduleItem:
    """The item holding ``schedule`` (the inverse of ``_schedule``)."""
    return ScheduleItem(
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
        active_run_id=schedule.active_run_id,
        last_fire_at=schedule.last_fire_at,
        last_outcome=schedule.last_outcome,
    )


def create(schedule: Schedule) -> Transaction:
    return Transaction().put_new(_schedule_item(schedule))


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
        _fire_item(Fire(schedule.id, scheduled_at, outcome, run_id, reason), now),
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
    return [_fire(item) for item in list(items)[:limit]]


def _fire(item: ScheduleFireItem) -> Fire:
    """The fire an item records (the inverse of ``_fire_item``)."""
    return Fire(item.schedule_id, item.scheduled_at, item.outcome, item.run_id, item.reason)


def _fire_item(fire: Fire, recorded_at: datetime) -> ScheduleFireItem:
    """The item recording ``fire`` (the inverse of ``_fire``), kept for
    ``FIRE_RECORD_TTL``."""
    return ScheduleFireItem(
        *fire_key(fire.schedule_id, fire.scheduled_at),
        schedule_id=fire.schedule_id,
        scheduled_at=fire.scheduled_at,
        outcome=fire.outcome,
        run_id=fire.run_id,
        reason=fire.reason,
        recorded_at=recorded_at,
        expires_at=recorded_at + FIRE_RECORD_TTL,
    )


# -- drift -------------------------------------------------------------------------------


def get_drift(workspace_id: str, *, reads: IdentityMap) -> Drift | None:
    """The workspace's drift record (consistent; None if absent), served from ``reads``
    (found or absent) if it was read ahead there."""
    known, raw = reads.take_known(drift_key(workspace_id))
    if known and raw is None:
        return None  # read absent ahead, in this request
    try:
        item = (
            DriftItem.from_raw_data(raw)
            if raw is not None
            else DriftItem.get(*drift_key(workspace_id), consistent_read=True)
        )
    except DriftItem.DoesNotExist:
        return None
    return _drift(item)


def _drift(item: DriftItem) -> Drift:
    """The drift record an item holds (the inverse of ``_drift_item``)."""
    return Drift(
        workspace_id=item.workspace_id,
        state=item.state,
        as_of=item.as_of,
        run_id=item.run_id,
        detected_at=item.detected_at,
        cleared_at=item.cleared_at,
        body=dict(item.body or {}),
    )


def _drift_item(drift: Drift) -> DriftItem:
    """The item holding ``drift`` (the inverse of ``_drift``)."""
    return DriftItem(
        *drift_key(drift.workspace_id),
        workspace_id=drift.workspace_id,
        state=drift.state,
        as_of=drift.as_of,
        run_id=drift.run_id,
        detected_at=drift.detected_at,
        cleared_at=drift.cleared_at,
        body=drift.body,
    )


def put_drift(drift: Drift) -> Transaction:
    """The workspace's drift record, unless a run created after ``drift.as_of`` wrote it."""
    return Transaction().put(
        _drift_item(drift),
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
