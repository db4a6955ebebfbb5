"""The attention index: one partition per organization (``ORG#<id>#ATTENTION``) holding a
notice of each run that may need a person, so the inbox and the header's count read
one partition instead of every workspace's runs.

The notices are written by the run's own moves (``attention_writes``, in the move's
transaction, so a notice exists exactly when its move committed):

- ``RUN#<run>``: a run awaiting approval (removed when it leaves that status) or ending in
  a recoverable status (kept: the inbox lists it while the run holds its workspace's
  writer authority, which recovery releases);
- ``FAILED#<workspace>``: the workspace's latest failed run, replaced by the next
  failure, removed when a later run of the workspace succeeds, and expired by TTL
  after the window the inbox shows failures for (plus a day; reads apply the window).

Drift and plan counts are read from their own items, several at once (``BatchGetItem``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pynamodb.attributes import UnicodeAttribute, UTCDateTimeAttribute

from runplane.domain.attention import FAILED_STATUSES, FAILED_WINDOW, Notice
from runplane.domain.entities import Run
from runplane.domain.parts import PlanEvidence
from runplane.domain.recovery import RECOVERABLE_STATUSES
from runplane.domain.run import RunKind, RunStatus
from runplane.store import run_parts
from runplane.store.batch import get_many
from runplane.store.models import TableItem, drift_key, run_part_key
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Transaction

# BatchGetItem takes at most 100 keys a request.
_BATCH = 100
_KEPT_BEYOND_WINDOW = timedelta(days=1)
_T = TypeVar("_T")
_FAILED = "FAILED#"


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
    return attention_partition(run.organization_id), f"{_FAILED}{run.workspace_id}"


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


def _notice(item: AttentionItem) -> Notice:
    return Notice(
        run_id=item.run_id,
        organization_id=item.org_id,
        workspace_id=item.workspace_id,
        kind=RunKind(item.kind),
        status=RunStatus(item.status),
        created_by=item.created_by,
        created_at=item.created_at,
        since=item.since,
        deadline=item.deadline,
        latest_failure=item.sk.startswith(_FAILED),
    )


def _chunks(values: Sequence[_T]) -> list[Sequence[_T]]:
    return [values[i : i + _BATCH] for i in range(0, len(values), _BATCH)]


class DynamoAttentionIndex:
    """``services.attention.AttentionIndex`` on the table."""

    def notices(self, org_id: str) -> list[Notice]:
        """Every notice of the organization: one query (paged by DynamoDB past 1 MB)."""
        return [_notice(item) for item in AttentionItem.query(attention_partition(org_id))]

    def drifted(self, workspace_ids: Sequence[str]) -> set[str]:
        """Those of ``workspace_ids`` whose last drift check found drift: one batch read
        per 100 workspaces."""
        # Drift's store loads where the inbox is read, not with every move of a run.
        from runplane.store.schedules import get_drift

        found: set[str] = set()
        for chunk in _chunks(list(workspace_ids)):
            keys = [drift_key(w) for w in chunk]
            raws = get_many(keys, reads=IdentityMap())
            reads = IdentityMap(raws, absent=[key for key in keys if key not in raws])
            for workspace_id in chunk:
                drift = get_drift(workspace_id, reads=reads)
                if drift is not None and drift.state == "drifted":
                    found.add(workspace_id)
        return found

    def plan_summaries(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The plan counts of those of ``run_ids`` that committed a plan: one batch read
        per 100 runs."""
        summaries: dict[str, dict[str, Any]] = {}
        for chunk in _chunks([run_part_key(r, "plan") for r in run_ids]):
            for raw in get_many(chunk, reads=IdentityMap()).values():
                part = run_parts.from_raw(raw)
                summaries[part.run_id] = dict(PlanEvidence.from_body(part.body).summary)
        return summaries
