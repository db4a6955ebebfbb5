"""In-memory fakes of the operations seams (runplane.services.repositories.operations),
keeping the promises the DynamoDB implementations keep (held to the same cases by
tests/integration/test_operations_store_contract.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from runplane.domain.launch_controls import Controls


class ControlsUnreadable(Exception):
    """The fake's store cannot answer (a throttled or unreachable table)."""


class InMemoryLaunchControls:
    """``LaunchControlStore`` in memory. ``running_sandboxes`` sets a scope's count
    (on the table, a runner attempt's own writes take and give back slots), and
    ``unreadable`` makes every read fail."""

    def __init__(self) -> None:
        self._controls: dict[str, Controls] = {}
        self._running: dict[str, int] = {}
        self.unreadable = False
        # Who set each scope's controls, and when: what the table's item notes.
        self.set_by: dict[str, tuple[str, datetime]] = {}

    def running_sandboxes(self, scope: str, count: int) -> None:
        self._running[scope] = count

    def read(
        self, scopes: Sequence[str], *, counts: bool
    ) -> tuple[dict[str, Controls], dict[str, int]]:
        self._readable()
        controls = {scope: self._controls.get(scope, Controls()) for scope in scopes}
        running = {scope: self._running.get(scope, 0) for scope in scopes} if counts else {}
        return controls, running

    def get(self, scope: str) -> Controls:
        self._readable()
        return self._controls.get(scope, Controls())

    def running(self, scope: str) -> int:
        self._readable()
        return self._running.get(scope, 0)

    def put(self, scope: str, controls: Controls, *, by: str, at: datetime) -> None:
        self._controls[scope] = controls
        self.set_by[scope] = (by, at)

    def _readable(self) -> None:
        if self.unreadable:
            raise ControlsUnreadable("launch controls unavailable")
