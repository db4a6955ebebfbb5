"""Run events other features listen to (commit statuses, notifications).

A listener is called after the move that ended a run has committed. It must be
quick (start a workflow, enqueue a message) and it can never undo or block the
move: a failing listener is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from runplane.domain.entities import Run
from runplane.domain.run import RunStatus

logger = logging.getLogger("runplane.run_events")

RunEnded = Callable[[Run, RunStatus], None]


class RunEvents:
    def __init__(self) -> None:
        self._ended: list[RunEnded] = []

    def on_end(self, listener: RunEnded) -> None:
        self._ended.append(listener)

    def ended(self, run: Run, status: RunStatus) -> None:
        for listener in self._ended:
            try:
                listener(run, status)
            except Exception:
                logger.exception(
                    "a run-end listener failed", extra={"run_id": run.id, "status": status.value}
                )
