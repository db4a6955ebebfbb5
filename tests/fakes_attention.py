"""The attention index in memory: derived from the runs and drift records a test holds,
by the rules the table's index is written by (``store.attention``); the contract test
(tests/integration/test_attention_index_contract.py) holds the two to the same answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runplane.domain.attention import FAILED_STATUSES, RECOVERABLE_STATUSES, Notice
from runplane.domain.entities import Run
from runplane.domain.parts import PlanEvidence
from runplane.domain.run import RunStatus
from runplane.domain.schedules import Drift
from tests.fakes import InMemoryRuns


def _notice(run: Run, *, latest_failure: bool = False) -> Notice:
    waiting = run.status is RunStatus.AWAITING_APPROVAL
    return Notice(
        run_id=run.id,
        organization_id=run.organization_id,
        workspace_id=run.workspace_id,
        kind=run.kind,
        status=run.status,
        created_by=run.created_by,
        created_at=run.created_at,
        since=run.updated_at,
        deadline=run.approval_expires_at if waiting and not latest_failure else None,
        latest_failure=latest_failure,
    )


class InMemoryAttentionIndex:
    def __init__(self, runs: InMemoryRuns, drift: Callable[[str], Drift | None]) -> None:
        self._runs = runs
        self._drift = drift

    def notices(self, org_id: str) -> list[Notice]:
        own = [r for r in self._runs.runs.values() if r.organization_id == org_id]
        found = [
            _notice(r)
            for r in own
            if r.status is RunStatus.AWAITING_APPROVAL or r.status in RECOVERABLE_STATUSES
        ]
        # A workspace's latest failure, unless a run of the workspace succeeded after it.
        for workspace_id in {r.workspace_id for r in own}:
            ended = sorted(
                (r for r in own if r.workspace_id == workspace_id),
                key=lambda r: r.updated_at,
            )
            failed = [r for r in ended if r.status in FAILED_STATUSES]
            if not failed:
                continue
            latest = failed[-1]
            if not any(
                r.status is RunStatus.SUCCEEDED and r.updated_at > latest.updated_at for r in ended
            ):
                found.append(_notice(latest, latest_failure=True))
        return found

    def drifted(self, workspace_ids: Sequence[str]) -> set[str]:
        return {
            w
            for w in workspace_ids
            if (drift := self._drift(w)) is not None and drift.state == "drifted"
        }

    def plan_summaries(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        summaries: dict[str, dict[str, Any]] = {}
        for run_id in run_ids:
            plan = self._runs.parts(run_id).get("plan")
            if plan is not None:
                summaries[run_id] = dict(PlanEvidence.from_body(plan.body).summary)
        return summaries
