"""The attention index: one partition per organization (``ORG#<id>#ATTENTION``) holding a
notice of each run that may need a person, so the inbox and the header's count read
one partition instead of every workspace's runs.

The notices are written by the run's own moves (``attention_writes``, in the move's
transaction, so a notice exists exactly when its move committed):

- ``RUN#<run>``: a run awaiting approval (removed when it leaves that status) or ending in
  a recoverable status (kept: the inbox lists it while the run holds its workspace's
  writer authority, which recovery releases, and the completed recovery removes it);
- ``FAILED#<workspace>``: the workspace's latest failed run, replaced by the next
  failure, removed when a later run of the workspace succeeds, and expired by TTL
  after the window the inbox shows failures for (plus a day; reads apply the window).

Only what every move needs is here; the index is read by ``store.attention_index``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pynamodb.attributes import UnicodeAttribute, UTCDateTimeAttribute

from runplane.domain.attention import FAILED_STATUSES, FAILED_WINDOW, RECOVERABLE_STATUSES
from runplane.domain.entities import Run
from runplane.domain.run import RunStatus
from runplane.store.models import TableItem
from runplane.store.transaction import Transaction

_KEPT_BEYOND_WINDOW = timedelta(days=1)
FAILED_PREFIX = "FAILED#"


class AttentionItem(TableItem):
    run_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    kind = UnicodeAttribute()
    status = UnicodeAttribute()
    created_by = UnicodeAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    since = UTCDateTimeAttribute()
    deadline = UTCDateTimeAttribute(null=True)


def attention_partition(org_id: str) -> str:
    return f"ORG#{org_id}#ATTENTION"


def _run_slot(run: Run) -> tuple[str, str]:
    return attention_partition(run.organization_id), f"RUN#{run.id}"


def _failure_slot(run: Run) -> tuple[str, str]:
    return attention_partition(run.organization_id), f"{FAILED_PREFIX}{run.workspace_id}"


def attention_writes(
    run: Run, target: RunStatus, at: datetime, deadline: datetime | None
) -> Transaction:
    """The index's writes for ``run`` moving to ``target`` at ``at`` (unconditional: the
    move's own condition on the run's version orders them)."""
    tx = Transaction()
    if target is RunStatus.AWAITING_APPROVAL or target in RECOVERABLE_STATUSES:
        # Replaces the notice of its approval, if it had one: one write per item.
        waiting = deadline if target is RunStatus.AWAITING_APPROVAL else None
        tx.put(_item_of(run, target, at, waiting))
    elif run.status is RunStatus.AWAITING_APPROVAL:
        tx.delete(AttentionItem(*_run_slot(run)))
    if target in FAILED_STATUSES:
        failure = _item_of(run, target, at, None, slot=_failure_slot(run))
        failure.expires_at = at + FAILED_WINDOW + _KEPT_BEYOND_WINDOW
        tx.put(failure)
    elif target is RunStatus.SUCCEEDED:
        tx.delete(AttentionItem(*_failure_slot(run)))
    return tx


def _item_of(
    run: Run,
    status: RunStatus,
    at: datetime,
    deadline: datetime | None,
    slot: tuple[str, str] | None = None,
) -> AttentionItem:
    return AttentionItem(
        *(slot or _run_slot(run)),
        run_id=run.id,
        org_id=run.organization_id,
        workspace_id=run.workspace_id,
        kind=run.kind.value,
        status=status.value,
        created_by=run.created_by,
        created_at=run.created_at,
        since=at,
        deadline=deadline,
    )
