"""The DynamoDB state version reads (``services.repositories.StateVersionReader``)."""

from __future__ import annotations

import threading

from runplane.domain.identity import Principal
from runplane.domain.state import StateVersion
from runplane.store import state_versions as store
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.runs import RunRepository

# Attempt -> the state version its run had pinned (oldest forgotten first).
_PINS: dict[str, str | None] = {}
_PINS_LOCK = threading.Lock()
_REMEMBERED_PINS = 10_000


class DynamoStateVersionReader:
    def __init__(self, runs: RunRepository, scope: RequestScope = REQUEST) -> None:
        # Reads are served from the request's identity map, taken at each call.
        self._runs = runs
        self._scope = scope

    def get(self, sv_id: str) -> StateVersion:
        return store.get(sv_id, reads=self._scope.reads())

    def list_for_workspace(self, workspace_id: str) -> list[StateVersion]:
        return store.list_for_workspace(workspace_id)

    def pinned(self, principal: Principal) -> str | None:
        """The state version a runner sees as current: the one its run pinned.

        The pin is written with the plan attempt, before any session of the run
        exists, and only a new plan attempt writes it again: for one attempt it
        never changes, so it is read once per attempt and process (every state
        read of the engine's backend asks for it)."""
        attempt = principal.attempt_id
        if not attempt:
            return self._runs.get(principal.run_id or "").predecessor_sv_id
        with _PINS_LOCK:
            if attempt in _PINS:
                return _PINS[attempt]
        pinned = self._runs.get(principal.run_id or "").predecessor_sv_id
        with _PINS_LOCK:
            if len(_PINS) >= _REMEMBERED_PINS:
                _PINS.pop(next(iter(_PINS)))
            _PINS[attempt] = pinned
        return pinned
