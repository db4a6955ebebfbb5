"""The DynamoDB reads of the workspace listing (``services.workspace_overview``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runplane.domain.entities import Run
from runplane.store.batch import get_many
from runplane.store.models import RunItem, StateVersionItem, drift_key, state_version_key
from runplane.store.request_reads import REQUEST
from runplane.store.runs import runs_partition, to_run
from runplane.store.schedules import DriftItem

# BatchGetItem takes at most 100 keys a request.
_BATCH = 100


class DynamoOverviewReads:
    def latest_runs(self, workspace_ids: Sequence[str]) -> dict[str, Run]:
        # The index sorts a workspace's runs by "<created_at>#<run ID>": the last is newest.
        found: dict[str, Run] = {}
        for workspace_id in workspace_ids:
            for item in RunItem.gsi1.query(
                runs_partition(workspace_id), scan_index_forward=False, limit=1
            ):
                found[workspace_id] = to_run(item)
        return found

    def drifted(self, workspace_ids: Sequence[str]) -> set[str]:
        items = _batched([drift_key(w) for w in workspace_ids])
        drifts = (DriftItem.from_raw_data(raw) for raw in items)
        return {d.workspace_id for d in drifts if d.state == "drifted"}

    def resources(self, state_version_ids: Sequence[str]) -> dict[str, int]:
        items = _batched([state_version_key(v) for v in state_version_ids])
        versions = (StateVersionItem.from_raw_data(raw) for raw in items)
        return {v.sv_id: int(v.resources) for v in versions if v.resources is not None}


def _batched(keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for start in range(0, len(keys), _BATCH):
        chunk = keys[start : start + _BATCH]
        found.extend(get_many(chunk, reads=REQUEST.reads()).values())
    return found
