"""The standby pool's seams in memory: its records (``StandbyStore``) with the same
conditional writes as the table's, and where standbys run (``StandbyTasks``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

from runplane.adapters.launchers import LaunchRequest
from runplane.domain.standby import SealedEnvironment, Standby, StandbyStatus
from tests.fakes import RecordingLauncher


class InMemoryStandbys:
    def __init__(self) -> None:
        self.items: dict[str, Standby] = {}

    def put_starting(self, standby: Standby) -> None:
        assert standby.standby_id not in self.items
        self.items[standby.standby_id] = standby

    def mark_waiting(self, standby_id: str, task: str) -> bool:
        current = self.items.get(standby_id)
        if current is None or current.status is not StandbyStatus.STARTING:
            return False
        self.items[standby_id] = dataclasses.replace(
            current, status=StandbyStatus.WAITING, task=task
        )
        return True

    def pool(self) -> list[Standby]:
        return list(self.items.values())

    def get(self, standby_id: str) -> Standby | None:
        return self.items.get(standby_id)

    def assign(
        self,
        standby_id: str,
        sandbox_id: str,
        sealed: SealedEnvironment,
        *,
        waiting_past: datetime,
        claim_by: datetime,
    ) -> bool:
        current = self.items.get(standby_id)
        if (
            current is None
            or current.status is not StandbyStatus.WAITING
            or current.task is None
            or current.waits_until <= waiting_past
        ):
            return False
        self.items[standby_id] = dataclasses.replace(
            current,
            status=StandbyStatus.ASSIGNED,
            sandbox_id=sandbox_id,
            claim_by=claim_by,
            environment=sealed,
        )
        return True

    def take(self, standby_id: str, sandbox_id: str, now: datetime) -> bool:
        current = self.items.get(standby_id)
        if (
            current is None
            or current.status is not StandbyStatus.ASSIGNED
            or current.sandbox_id != sandbox_id
            or current.claim_by is None
            or current.claim_by <= now
        ):
            return False
        del self.items[standby_id]
        return True

    def remove(self, standby: Standby) -> bool:
        current = self.items.get(standby.standby_id)
        if current is None or current.status is not standby.status:
            return False
        del self.items[standby.standby_id]
        return True


class RecordingStandbyTasks(RecordingLauncher):
    """A launcher that also starts standbys: records each one's environment."""

    def __init__(self) -> None:
        super().__init__()
        self.standbys: dict[str, dict[str, str]] = {}
        self.crashed: set[str] = set()
        # The sandbox each standby was assigned, by its reference.
        self.assignments: dict[str, str] = {}

    def start_standby(self, standby_id: str, environment: Mapping[str, str]) -> str:
        reference = f"standby-task-{len(self.standbys) + 1}"
        self.standbys[reference] = dict(environment)
        return reference

    def assigned(self, reference: str, request: LaunchRequest) -> None:
        self.assignments[reference] = request.sandbox_id

    def ended(self, references: Sequence[str]) -> set[str]:
        return {r for r in references if r in self.crashed or r in self.stopped}
