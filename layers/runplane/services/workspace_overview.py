"""The workspace listing as the dashboard shows it: each workspace the caller sees with
its latest run, its current state's size, its drift and what needs attention.

Shown a page at a time (``PAGE_SIZE`` workspaces, by name): runs are indexed per
workspace, so the latest run of each is one small query (the newest item only), and a
page reads those of its own workspaces only. Drift records and current state versions
are read in batches, for the page's workspaces too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from runplane.domain.entities import Run, Workspace
from runplane.domain.identity import Permission, Principal
from runplane.domain.paging import Page
from runplane.domain.run import INTERVENTION_STATUSES, RunStatus
from runplane.domain.workspace_overview import Attention, attention_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runplane.services.workspaces import Workspaces


class OverviewReads(Protocol):
    """What the listing reads beyond the workspaces themselves.

    - ``latest_runs``: each workspace's newest run (absent: it has none).
    - ``drifted``: the workspaces whose last drift check found drift.
    - ``resources``: the resource count recorded with each of the given state versions
      (absent: unknown).
    """

    def latest_runs(self, workspace_ids: Sequence[str]) -> dict[str, Run]: ...

    def drifted(self, workspace_ids: Sequence[str]) -> set[str]: ...

    def resources(self, state_version_ids: Sequence[str]) -> dict[str, int]: ...


# Workspaces a page shows: each costs one query for its latest run.
PAGE_SIZE = 50


@dataclass(frozen=True)
class WorkspaceRow:
    workspace: Workspace
    latest_run: Run | None
    resources: int | None
    attention: tuple[Attention, ...]


class WorkspaceOverview:
    def __init__(self, workspaces: Workspaces, reads: OverviewReads) -> None:
        self._workspaces = workspaces
        self._reads = reads

    def page(self, principal: Principal, number: int = 1) -> Page[WorkspaceRow]:
        """Page ``number`` (from 1; past the last: the last) of the workspaces the caller
        sees, by name. Runs are read only for callers who may read runs, resource counts
        only for those who may read state."""
        every = self._workspaces.list_own(principal)
        last = max(1, -(-len(every) // PAGE_SIZE))
        shown = Page.of(every, min(number, last), PAGE_SIZE)
        listed = shown.items
        ids = [w.id for w in listed]
        runs = self._reads.latest_runs([i for i in ids if principal.may(Permission.RUN_READ, i)])
        drifted = self._reads.drifted(ids)
        current = [
            w.current_state_version_id
            for w in listed
            if w.current_state_version_id and principal.may(Permission.STATE_READ, w.id)
        ]
        counts = self._reads.resources(current) if current else {}
        rows = [
            _row(w, runs.get(w.id), counts.get(w.current_state_version_id or ""), w.id in drifted)
            for w in listed
        ]
        return Page(rows, shown.number, shown.size, shown.total)


def _row(
    workspace: Workspace, latest: Run | None, resources: int | None, drifted: bool
) -> WorkspaceRow:
    held = (
        latest is not None
        and workspace.writer_run_id == latest.id
        and (latest.status in INTERVENTION_STATUSES or latest.status is RunStatus.APPLY_FAILED)
    )
    status = None if latest is None else latest.status
    return WorkspaceRow(
        workspace, latest, resources, attention_of(status, held_for_recovery=held, drifted=drifted)
    )
