"""Reading the attention index (``store.attention``): an organization's notices in one
query, and the drift records and plan counts the inbox shows, several at once
(``BatchGetItem``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from runplane.domain.attention import Notice
from runplane.domain.parts import PlanEvidence
from runplane.domain.run import RunKind, RunStatus
from runplane.store import run_parts
from runplane.store.attention import FAILED_PREFIX, AttentionItem, attention_partition
from runplane.store.batch import get_many
from runplane.store.models import drift_key, run_part_key
from runplane.store.prefetch import IdentityMap
from runplane.store.schedules import get_drift

# BatchGetItem takes at most 100 keys a request.
_BATCH = 100
_T = TypeVar("_T")


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
        latest_failure=item.sk.startswith(FAILED_PREFIX),
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
