"""The DynamoDB run creations (``services.repositories.creation.RunCreations``): a run
written with its input and its caller's records in ONE TransactWriteItems."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from runplane.domain.creation import AutoDestroyLaunch, CallerRecord, ScheduleFire, TriggerClaim
from runplane.domain.entities import Run
from runplane.store import auto_destroy, run_batch, run_parts, run_triggers, schedules
from runplane.store.request_reads import REQUEST, RequestScope
from runplane.store.runs import RunRepository
from runplane.store.transaction import Transaction


class DynamoRunCreations:
    def __init__(self, runs: RunRepository, scope: RequestScope = REQUEST) -> None:
        self._runs = runs
        # A creation's first reads are served in the request's identity map.
        self._scope = scope

    def create(
        self,
        run: Run,
        *,
        actor: str,
        input: Mapping[str, Any],
        records: Sequence[CallerRecord] = (),
    ) -> None:
        self.writes(run, actor=actor, input=input, records=records).commit()

    def writes(
        self,
        run: Run,
        *,
        actor: str,
        input: Mapping[str, Any],
        records: Sequence[CallerRecord] = (),
    ) -> Transaction:
        return self._runs.creation(
            run,
            actor=actor,
            extra_writes=[
                run_parts.put(run.id, "input", state="recorded", body=input, now=run.created_at),
                *(_record_write(run, record) for record in records),
            ],
        )

    def reading_ahead(
        self,
        workspace_id: str,
        configuration_version_id: str,
        control_scopes: Sequence[str],
        organization_id: str | None = None,
    ) -> AbstractContextManager[None]:
        return run_batch.creation_reads(
            workspace_id,
            configuration_version_id,
            control_scopes,
            organization_id,
            scope=self._scope,
        )


def _record_write(run: Run, record: CallerRecord) -> Transaction:
    if isinstance(record, ScheduleFire):
        return schedules.record_fire(
            record.schedule,
            record.scheduled_at,
            outcome="created",
            run_id=run.id,
            now=record.recorded_at,
        )
    if isinstance(record, TriggerClaim):
        return run_triggers.claim(
            record.source_run_id, record.dependent_workspace_id, run.id, record.claimed_at
        )
    if isinstance(record, AutoDestroyLaunch):
        return auto_destroy.put(record.launched, previous_version=record.read.version)
    raise TypeError(f"no write records {record!r}")
