"""What every workflow service shares: its collaborators and three small helpers.

The run workflow's work is split by purpose (services/workflow_steps.py,
services/runner_start.py, services/runner_reports.py); each is built from the
same collaborators, and services/orchestration.py composes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from runplane.adapters.launchers import Launcher
from runplane.adapters.workflow import Workflow
from runplane.domain.clock import Clock
from runplane.domain.entities import Run
from runplane.domain.errors import (
    RunEnded,
    StaleDriftFinding,
)
from runplane.domain.ids import IdGenerator
from runplane.domain.intents import MovedRun
from runplane.domain.parts import RunPart
from runplane.domain.run import RunStatus
from runplane.domain.run_scope import RunScope
from runplane.services.capabilities import Capabilities
from runplane.services.lifecycle import RunLifecycle
from runplane.services.unit_of_work import UnitOfWork, UnitsOfWork
from runplane.services.writer import hand_off

if TYPE_CHECKING:
    from runplane.domain.schedules import Drift
    from runplane.services.launch_controls import LaunchControls
    from runplane.services.policy import Policies

logger = logging.getLogger(__name__)
S = RunStatus
WORKFLOW = "workflow"


@dataclass(frozen=True)
class Timing:
    approval_window: timedelta = timedelta(days=7)
    bootstrap_lifetime: timedelta = timedelta(minutes=15)
    apply_start_lifetime: timedelta = timedelta(minutes=30)
    # The workflow's waits on a runner phase: overall, and between two heartbeats.
    runner_phase: timedelta = timedelta(hours=4)
    runner_heartbeat: timedelta = timedelta(minutes=15)


def heartbeat_interval(window: timedelta) -> int:
    """How often a runner heartbeats: six chances per window, so one slow call is no loss."""
    return max(1, int(window.total_seconds()) // 6)


def committed_move(moved: MovedRun | None) -> MovedRun:
    """A unit of work's committed move (it intended one)."""
    assert moved is not None, "the unit of work intended a move"
    return moved


def _unended(run: Run) -> Run:
    if run.status.is_terminal:
        raise RunEnded(run.id, run.status)
    return run


class ReadsAhead(Protocol):
    """Reads the run, its parts ``names``, the workspace, the launch controls of
    ``control_scopes``, the records of ``artifact_ids`` and the policy-set tally of the
    organization ``policy_tally_of`` in one consistent request, and serves each (found
    or absent) to the block's first read of it: once each, and none after a write (the
    request's identity map, ``store.run_batch.reading_ahead``)."""

    def __call__(
        self,
        run_id: str,
        names: Iterable[str],
        *,
        workspace_id: str | None = None,
        control_scopes: Sequence[str] = (),
        artifact_ids: Sequence[str] = (),
        policy_tally_of: str | None = None,
    ) -> AbstractContextManager[None]: ...


class WorkflowService:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        lifecycle: RunLifecycle,
        capabilities: Capabilities,
        workflow: Workflow,
        launcher: Launcher,
        *,
        control_plane_url: str,
        launch_controls: Callable[[], LaunchControls],
        policies: Callable[[], Policies],
        units: UnitsOfWork,
        reads_ahead: ReadsAhead,
        timing: Timing | None = None,
    ) -> None:
        # Providers, called on use: a step that never evaluates policy (or never
        # launches) does not import or build those services at a cold start.
        self._clock = clock
        self._ids = ids
        self._lifecycle = lifecycle
        self._capabilities = capabilities
        self._workflow = workflow
        self._launcher = launcher
        self._url = control_plane_url
        self._launch_controls_of = launch_controls
        self._policies_of = policies
        self._timing = timing or Timing()
        # A unit of work per step that goes through one (the approval's expiry, a failed or
        # lost phase).
        self._units = units
        self._reads_ahead = reads_ahead

    @property
    def _launch_controls(self) -> LaunchControls:
        return self._launch_controls_of()

    @property
    def _policies(self) -> Policies:
        return self._policies_of()

    def _active(self, run_id: str) -> Run:
        """The run, if it has not ended; a step of an ended run ends the workflow."""
        return _unended(self._lifecycle.runs.get(run_id))

    def _reading_ahead(
        self,
        run_id: str,
        scope: RunScope | None,
        parts: Iterable[str] = (),
        *,
        workspace: bool = False,
        control_scopes: Sequence[str] = (),
    ) -> AbstractContextManager[None]:
        """With the run's ``scope`` (from its execution input), read the run, its
        ``parts``, its workspace and launch controls at once, for the step's first reads
        of each (``ReadsAhead``); without one, each is read when asked."""
        if scope is None:
            return nullcontext()
        return self._reads_ahead(
            run_id,
            parts,
            workspace_id=scope.workspace_id if workspace else None,
            control_scopes=control_scopes,
        )

    def _active_with(
        self, run_id: str, parts: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None]]:
        """As ``_active``, with the step's parts of the run read in the same request."""
        with self._units() as uow:
            return self._active_in(uow, run_id, parts)

    @staticmethod
    def _active_in(
        uow: UnitOfWork, run_id: str, parts: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None]]:
        """As ``_active_with``, read through the unit of work ``uow``."""
        run, found = uow.runs.with_parts(run_id, parts)
        return _unended(run), found

    def _commit_noting_drift(
        self,
        run: Run,
        target: RunStatus,
        found: Drift | None,
        intend: Callable[[UnitOfWork], None] = lambda uow: None,
        *,
        uow: UnitOfWork | None = None,
        **move: Any,
    ) -> tuple[MovedRun, bool]:
        """Move with the drift record ``found`` (see services/drift.py) and, if it is a
        finding, its ``drift_detected`` event, in one unit of work with what ``intend``
        intends on it (``uow``: the caller's open unit, for the first try); if a run
        created later already wrote the record, move without either in a new unit.
        Returns the move and whether the record was written."""

        def commit(unit: UnitOfWork, noting: Drift | None) -> MovedRun:
            intend(unit)
            if noting is None:
                unit.runs.move(run, target, **move)
            else:
                from runplane.services import drift

                unit.drift.put(noting)
                unit.runs.move(
                    run,
                    target,
                    also_announce=lambda done: drift.detected_event(noting, run, done),
                    **move,
                )
            return committed_move(unit.commit())

        if found is not None:
            try:
                if uow is not None:
                    return commit(uow, found), True
                with self._units() as fresh:
                    return commit(fresh, found), True
            except StaleDriftFinding:
                pass
        elif uow is not None:
            return commit(uow, None), False
        with self._units() as fresh:
            return commit(fresh, None), False

    def _hand_off(self, moved: MovedRun) -> None:
        hand_off(self._workflow, moved.handoff)
