"""Run triggers: each workspace's source list, the reverse links, and the claim that
makes a source run queue at most one run per dependent workspace.

- ``WS#<dependent> / TRIGGERS``: the sources, the run kind, and a version every change
  is conditioned on (a cycle check re-checks the versions it read).
- ``WS#<source> / DEPENDENT#<dependent>``: found with one query when a source applies.
- ``RUN#<source run> / TRIGGERED#<dependent>``: put only if absent, in the same
  transaction as the run it names, or with the reason no run was queued (a skip,
  written with an organization audit event).
"""

from __future__ import annotations

from datetime import datetime

from pynamodb.attributes import (
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)

from runplane.domain.errors import AlreadyTriggered, ConcurrentChange
from runplane.domain.run import RunKind
from runplane.domain.run_triggers import Triggered, Triggers
from runplane.store import audit
from runplane.store.models import TableItem, WorkspaceItem, org_event_key, run_key, workspace_key
from runplane.store.transaction import Item, Transaction
from runplane.store.workspaces import count_change

TRIGGERS_SK = "TRIGGERS"
DEPENDENT_PREFIX = "DEPENDENT#"
TRIGGERED_PREFIX = "TRIGGERED#"


class RunTriggersItem(TableItem):
    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    sources: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    run_kind = UnicodeAttribute(default=RunKind.PLAN_AND_APPLY.value)
    version = NumberAttribute(default=0)
    updated_at = UTCDateTimeAttribute()


class DependentLinkItem(TableItem):
    source_workspace_id = UnicodeAttribute()
    dependent_workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()


class TriggeredRunItem(TableItem):
    source_run_id = UnicodeAttribute()
    dependent_workspace_id = UnicodeAttribute()
    run_id = UnicodeAttribute()  # "" when skipped
    skipped = UnicodeAttribute(null=True)  # why no run was queued
    created_at = UTCDateTimeAttribute()


def triggers_key(workspace_id: str) -> tuple[str, str]:
    return workspace_key(workspace_id)[0], TRIGGERS_SK


def dependent_key(source_id: str, dependent_id: str) -> tuple[str, str]:
    return workspace_key(source_id)[0], f"{DEPENDENT_PREFIX}{dependent_id}"


def triggered_key(source_run_id: str, dependent_id: str) -> tuple[str, str]:
    return run_key(source_run_id)[0], f"{TRIGGERED_PREFIX}{dependent_id}"


def get(workspace_id: str) -> Triggers:
    try:
        item = RunTriggersItem.get(*triggers_key(workspace_id), consistent_read=True)
    except RunTriggersItem.DoesNotExist:
        return Triggers(workspace_id, (), RunKind.PLAN_AND_APPLY, 0)
    return _triggers(item)


def _triggers(item: RunTriggersItem) -> Triggers:
    """The trigger list an item holds (the inverse of ``_triggers_item``)."""
    return Triggers(
        item.workspace_id, tuple(item.sources), RunKind(item.run_kind), int(item.version)
    )


def _triggers_item(triggers: Triggers, org_id: str, now: datetime) -> RunTriggersItem:
    """The item holding ``triggers`` (the inverse of ``_triggers``)."""
    return RunTriggersItem(
        *triggers_key(triggers.workspace_id),
        workspace_id=triggers.workspace_id,
        org_id=org_id,
        sources=list(triggers.sources),
        run_kind=triggers.run_kind.value,
        version=triggers.version,
        updated_at=now,
    )


def unchanged(triggers: Triggers) -> Transaction:
    """A condition check: the workspace's trigger list is still at the version read."""

    def refused(current: Item | None) -> Exception:
        return ConcurrentChange(
            f"the run triggers of workspace {triggers.workspace_id} changed meanwhile; "
            "nothing was written, retry"
        )

    condition = (
        RunTriggersItem.version == triggers.version
        if triggers.version
        else RunTriggersItem.pk.does_not_exist()
    )
    return Transaction().check(
        RunTriggersItem, triggers_key(triggers.workspace_id), condition, refused
    )


def replace(
    current: Triggers,
    org_id: str,
    sources: tuple[str, ...],
    run_kind: RunKind,
    now: datetime,
) -> Transaction:
    """Write the new source list, conditioned on the version ``current`` was read at."""

    def refused(found: Item | None) -> Exception:
        return ConcurrentChange(
            f"the run triggers of workspace {current.workspace_id} changed meanwhile; "
            "nothing was written, retry"
        )

    condition = (
        RunTriggersItem.version == current.version
        if current.version
        else RunTriggersItem.pk.does_not_exist()
    )
    item = _triggers_item(
        Triggers(current.workspace_id, sources, run_kind, current.version + 1), org_id, now
    )
    return Transaction().put(item, condition=condition, on_refused=refused)


def link(source_id: str, dependent_id: str, org_id: str) -> Transaction:
    """A new link, counted on its source in the same write (a trigger list changes only
    at the version read, so each link is made and removed once)."""
    return (
        Transaction()
        .put_new(
            DependentLinkItem(
                *dependent_key(source_id, dependent_id),
                source_workspace_id=source_id,
                dependent_workspace_id=dependent_id,
                org_id=org_id,
            )
        )
        .extend([count_change(WorkspaceItem.dependent_count, source_id, 1)])
    )


def unlink(source_id: str, dependent_id: str) -> Transaction:
    return (
        Transaction()
        .delete(
            DependentLinkItem(*dependent_key(source_id, dependent_id)),
            condition=DependentLinkItem.pk.exists(),
        )
        .extend([count_change(WorkspaceItem.dependent_count, source_id, -1)])
    )


def dependents(source_id: str) -> list[str]:
    items = DependentLinkItem.query(
        workspace_key(source_id)[0],
        DependentLinkItem.sk.startswith(DEPENDENT_PREFIX),
        consistent_read=True,
    )
    return [item.dependent_workspace_id for item in items]


def claim(source_run_id: str, dependent_id: str, run_id: str, now: datetime) -> Transaction:
    """The claim a triggered run is created with: refused if the source run already
    queued a run in this workspace (``AlreadyTriggered`` names that run)."""

    def refused(current: Item | None) -> Exception:
        return AlreadyTriggered(str((current or {}).get("run_id", "")))

    return Transaction().put_new(
        _triggered_item(source_run_id, Triggered(dependent_id, run_id, None), now),
        on_refused=refused,
    )


def skip(
    source_run_id: str,
    dependent_id: str,
    org_id: str,
    reason: str,
    event_id: str,
    now: datetime,
) -> Transaction:
    """Record that the source run queued nothing in ``dependent_id`` and why: the claim
    (so a redelivered event does not try again) and an organization audit event."""
    claim = Transaction().put_new(
        _triggered_item(source_run_id, Triggered(dependent_id, None, reason), now),
        on_refused=lambda current: AlreadyTriggered(str((current or {}).get("run_id", ""))),
    )
    audit_id = f"{event_id}.skipped.{dependent_id}"
    audit_event = audit.audit_item(
        key=org_event_key(org_id, f"{now.isoformat()}#{audit_id}"),
        event_id=audit_id,
        org_id=org_id,
        subject_id=source_run_id,
        type="run_trigger.skipped",
        actor="system:run-trigger",
        at=now,
        details={"dependent_workspace_id": dependent_id, "reason": reason},
    )
    return claim.put_new(audit_event)


def triggered_runs(source_run_id: str) -> list[Triggered]:
    """What the source run did in each dependent workspace: the run it queued, or why not."""
    items = TriggeredRunItem.query(
        run_key(source_run_id)[0],
        TriggeredRunItem.sk.startswith(TRIGGERED_PREFIX),
        consistent_read=True,
    )
    return [_triggered(item) for item in items]


def _triggered(item: TriggeredRunItem) -> Triggered:
    """What a claim item records (the inverse of ``_triggered_item``)."""
    return Triggered(item.dependent_workspace_id, item.run_id or None, item.skipped)


def _triggered_item(source_run_id: str, triggered: Triggered, now: datetime) -> TriggeredRunItem:
    """The claim item recording ``triggered`` (the inverse of ``_triggered``): its run
    ID is "" when the source run queued nothing."""
    return TriggeredRunItem(
        *triggered_key(source_run_id, triggered.dependent_workspace_id),
        source_run_id=source_run_id,
        dependent_workspace_id=triggered.dependent_workspace_id,
        run_id=triggered.run_id or "",
        skipped=triggered.skipped,
        created_at=now,
    )


def triggered(source_run_id: str) -> dict[str, str]:
    """dependent workspace -> the run the source run queued there ("" when skipped)."""
    return {t.dependent_workspace_id: t.run_id or "" for t in triggered_runs(source_run_id)}
