"""Helpers that walk runs along the lifecycle in integration tests."""

from __future__ import annotations

from runplane.domain.entities import Run
from runplane.domain.run import RunStatus
from runplane.domain.transitions import MAIN_PATH
from runplane.services.lifecycle import RunLifecycle

S = RunStatus


def walk(lifecycle: RunLifecycle, run: Run, until: RunStatus, *, changes: bool = True) -> Run:
    """Move ``run`` along the main path until it rests in ``until``."""
    for target in MAIN_PATH[1:]:
        if run.status is until:
            break
        updates = {"plan_has_changes": changes} if target is S.PLAN_COMPLETE else None
        lifecycle.move(run, target, actor="workflow", run_updates=updates)
        run = lifecycle.runs.get(run.id)
    assert run.status is until
    return run


__all__ = ["walk"]
