"""The DynamoDB schedule store (``services.repositories.ScheduleStore``)."""

from __future__ import annotations

from datetime import datetime

from runplane.domain.schedules import Drift, Fire, Schedule
from runplane.store import schedules as store
from runplane.store.request_reads import REQUEST, RequestScope


class DynamoScheduleStore:
    def __init__(self, scope: RequestScope = REQUEST) -> None:
        # Reads are served from the request's identity map, taken at each call.
        self._scope = scope

    def get(self, schedule_id: str) -> Schedule:
        return store.get(schedule_id)

    def list_for_workspace(self, workspace_id: str) -> list[Schedule]:
        return store.list_for_workspace(workspace_id)

    def create(self, schedule: Schedule) -> None:
        store.create(schedule).commit()

    def set_state(self, schedule_id: str, state: str, now: datetime) -> None:
        store.set_state(schedule_id, state, now).commit()

    def delete(self, schedule_id: str) -> None:
        store.delete(schedule_id).commit()

    def record_fire(
        self,
        schedule: Schedule,
        scheduled_at: datetime,
        *,
        outcome: str,
        now: datetime,
        reason: str | None = None,
    ) -> None:
        store.record_fire(schedule, scheduled_at, outcome=outcome, now=now, reason=reason).commit()

    def fires(self, schedule_id: str, limit: int = 20) -> list[Fire]:
        return store.fires(schedule_id, limit)

    def latest_configuration_id(self, workspace_id: str) -> str | None:
        return store.latest_configuration_id(workspace_id)

    def drift(self, workspace_id: str) -> Drift | None:
        return store.get_drift(workspace_id, reads=self._scope.reads())
