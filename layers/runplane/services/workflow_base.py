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
from typing import TYPE_CHECKING, Any

from runplane.adapters.launchers import Launcher
from runplane.adapters.workflow import Workflow
from runplane.domain.clock import Clock
from runplane.domain.entities import Run
from runplane.domain.errors import (
    RunEnded,
    StaleDriftFinding,
)
from runplane.domain.ids import IdGenerator
from runplane.domain.parts import RunPart
from runplane.domain.run import RunStatus
from runplane.domain.run_scope import RunScope
from runplane.services.capabilities import Capabilities
from runplane.services.lifecycle import Moved, RunLifecycle
from runplane.services.unit_of_work import UnitOfWork, UnitsOfWork
from runplane.services.writer import hand_off
from runplane.store import run_batch
from runplane.store.transaction import Transaction

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


def _unended(run: Run) -> Run:
    if run.status.is_terminal:
        raise RunEnded(run.id, run.status)
    return run


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

    @property
    def _launch_controls(self) -> LaunchControls:
        return self._launch_controls_of()

    @property
    def _policies(self) -> Policies:
        return self._policies_of()

    def _active(self, run_id: str) -> Run:
        """The run, if it has not ended; a step of an ended run ends the workflow."""
        return _unended(self._lifecycle.runs.get(run_id))

    @staticmethod
    def _reading_ahead(
        run_id: str,
        scope: RunScope | None,
        parts: Iterable[str] = (),
        *,
        workspace: bool = False,
        control_scopes: Sequence[str] = (),
    ) -> AbstractContextManager[None]:
        """With the run's ``scope`` (from its execution input), read the run, its
        ``parts``, its workspace and launch controls at once, for the step's first reads
        of each (``run_batch.reading_ahead``); without one, each is read when asked."""
        if scope is None:
            return nullcontext()
        return run_batch.reading_ahead(
            run_id,
            parts,
            workspace_id=scope.workspace_id if workspace else None,
            control_scopes=control_scopes,
        )

    @staticmethod
    def _active_with(run_id: str, parts: Iterable[str]) -> tuple[Run, dict[str, RunPart | None]]:
        """As ``_active``, with the step's parts of the run read in the same request."""
        run, found = run_batch.run_and_parts(run_id, parts)
        return _unended(run), found

    @staticmethod
    def _active_in(
        uow: UnitOfWork, run_id: str, parts: Sequence[str]
    ) -> tuple[Run, dict[str, RunPart | None]]:
        """As ``_active_with``, read through the unit of work ``uow``."""
        run, found = uow.runs.with_parts(run_id, parts)
        return _unended(run), found

    def _move_noting_drift(
        self,
        run: Run,
        target: RunStatus,
        findings: list[Transaction],
        found: Drift | None = None,
        **move: Any,
    ) -> tuple[Moved, bool]:
        """Move with the drift record (see services/drift.py) and, if ``found`` is a
        finding, its ``drift_detected`` event; if a run created later already wrote the
        record, move without either. Returns whether the record was written."""
        extra = list(move.pop("extra_writes", ()))
        if findings:
            # Only steps that found drift get here: the start step does not load it.
            from runplane.services import drift

            try:
                moved = self._lifecycle.move(
                    run,
                    target,
                    extra_writes=[*extra, *findings],
                    also_announce=lambda done: drift.detected_event(found, run, done),
                    **move,
                )
                return moved, True
            except StaleDriftFinding:
                pass
        return self._lifecycle.move(run, target, extra_writes=extra, **move), False

    def _hand_off(self, moved: Moved) -> None:
        hand_off(self._workflow, moved.handoff)
