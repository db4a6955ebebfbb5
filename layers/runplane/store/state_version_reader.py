"""The DynamoDB state version reads (``services.repositories.StateVersionReader``)."""

from __future__ import annotations

from runplane.domain.identity import Principal
from runplane.services import runner_authority
from runplane.store import state_versions as store
from runplane.store.runs import RunRepository
from runplane.store.state_versions import StateVersion


class DynamoStateVersionReader:
    def __init__(self, runs: RunRepository) -> None:
        self._runs = runs

    def get(self, sv_id: str) -> StateVersion:
        return store.get(sv_id)

    def list_for_workspace(self, workspace_id: str) -> list[StateVersion]:
        return store.list_for_workspace(workspace_id)

    def pinned(self, principal: Principal) -> str | None:
        # Remembered per attempt by the runner's authority (the pin never changes
        # within one attempt).
        return runner_authority.pinned_state(principal, self._runs)
