"""In-memory fakes of the creation seams (``services/repositories/creation.py``): a
run written with its input and its caller's records, or none of them, with the same
refusals as the DynamoDB store (tests/integration/test_run_creations_contract.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from runplane.domain.artifacts import Artifact
from runplane.domain.creation import (
    AutoDestroyLaunch,
    CallerRecord,
    ConfigurationVersion,
    ScheduleFire,
    TriggerClaim,
)
from runplane.domain.entities import Run
from runplane.domain.errors import (
    AlreadyTriggered,
    ConcurrentChange,
    Conflict,
    RunAlreadyExists,
    ScheduleAlreadyFired,
    ScheduleMoved,
)
from runplane.domain.run_triggers import Triggered
from runplane.domain.schedules import Fire
from tests.fakes import AuditedChange, InMemoryRunLedger, InMemorySchedules
from tests.fakes_auto_destroy import InMemoryAutoDestroys

Write = Callable[[], None]
"""The fakes' kind of write not yet made: applied when called, all or nothing."""


class InMemoryTriggerClaims:
    """``TriggerClaims`` in a dict: what each source run did in each dependent, and the
    organization audit events its skips recorded (``audit``)."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], Triggered] = {}
        self.audit: list[AuditedChange] = []

    def of_source(self, source_run_id: str) -> list[Triggered]:
        found = [t for (source, _), t in self.claims.items() if source == source_run_id]
        return sorted(found, key=lambda t: t.dependent_workspace_id)

    def skip(
        self,
        source_run_id: str,
        dependent_id: str,
        *,
        org_id: str,
        reason: str,
        event_id: str,
        now: datetime,
    ) -> None:
        self.refuse_claimed(source_run_id, dependent_id)
        self.claims[(source_run_id, dependent_id)] = Triggered(dependent_id, None, reason)
        self.audit.append(
            AuditedChange(
                f"{event_id}.skipped.{dependent_id}",
                "run_trigger.skipped",
                source_run_id,
                "system:run-trigger",
                {"dependent_workspace_id": dependent_id, "reason": reason},
            )
        )

    def refuse_claimed(self, source_run_id: str, dependent_id: str) -> None:
        """``AlreadyTriggered`` (naming the run claimed, "" for a skip) if the source
        run claimed the dependent already."""
        held = self.claims.get((source_run_id, dependent_id))
        if held is not None:
            raise AlreadyTriggered(held.run_id or "")


class InMemoryRunCreations:
    """``RunCreations`` over the in-memory ledger (the run, its stages, input and audit
    event), schedules (a fire's record and the schedule's active run) and trigger
    claims: every condition is checked before anything is written, in the order the
    DynamoDB store reports them."""

    def __init__(
        self,
        ledger: InMemoryRunLedger,
        schedules: InMemorySchedules,
        claims: InMemoryTriggerClaims,
        auto_destroys: InMemoryAutoDestroys | None = None,
    ) -> None:
        self._ledger = ledger
        self._schedules = schedules
        self._claims = claims
        self._auto_destroys = auto_destroys or InMemoryAutoDestroys(schedules)

    def create(
        self,
        run: Run,
        *,
        actor: str,
        input: Mapping[str, Any],
        records: Sequence[CallerRecord] = (),
    ) -> None:
        self.writes(run, actor=actor, input=input, records=records)()

    def writes(
        self,
        run: Run,
        *,
        actor: str,
        input: Mapping[str, Any],
        records: Sequence[CallerRecord] = (),
    ) -> Write:
        def write() -> None:
            if run.id in self._ledger.runs:
                raise RunAlreadyExists(run.id)
            for record in records:
                self._refuse(record)
            self._ledger.create(run, actor=actor, input=input)
            for record in records:
                self._record(run, record)

        return write

    @contextmanager
    def reading_ahead(
        self,
        workspace_id: str,
        configuration_version_id: str,
        control_scopes: Sequence[str],
        organization_id: str | None = None,
    ) -> Iterator[None]:
        yield  # in memory, every read is as cheap as a read ahead

    def _refuse(self, record: CallerRecord) -> None:
        if isinstance(record, ScheduleFire):
            schedule = record.schedule
            if (schedule.id, record.scheduled_at) in self._schedules.fire_records:
                raise ScheduleAlreadyFired(
                    f"schedule {schedule.id} already fired for "
                    f"{record.scheduled_at.isoformat()}; nothing was written"
                )
            current = self._schedules.schedules.get(schedule.id)
            if (
                current is None
                or current.active_run_id != schedule.active_run_id
                or current.state != schedule.state
            ):
                raise ScheduleMoved(
                    f"schedule {schedule.id} changed while it fired; nothing was written"
                )
        elif isinstance(record, AutoDestroyLaunch):
            self._auto_destroys.refuse_moved(record.read.workspace_id, record.read.version)
        else:
            self._claims.refuse_claimed(record.source_run_id, record.dependent_workspace_id)

    def _record(self, run: Run, record: CallerRecord) -> None:
        if isinstance(record, ScheduleFire):
            schedule, at = record.schedule, record.scheduled_at
            self._schedules.fire_records[(schedule.id, at)] = Fire(
                schedule.id, at, "created", run.id, None
            )
            self._schedules.schedules[schedule.id] = replace(
                self._schedules.schedules[schedule.id],
                last_fire_at=at,
                last_outcome="created",
                active_run_id=run.id,
            )
        elif isinstance(record, TriggerClaim):
            key = (record.source_run_id, record.dependent_workspace_id)
            self._claims.claims[key] = Triggered(record.dependent_workspace_id, run.id, None)
        else:
            self._auto_destroys.put(record.launched, previous_version=record.read.version)


class InMemoryConfigurationVersions:
    """``ConfigurationVersions`` in a dict, with ``add_uploaded`` for a test to give a
    workspace a configuration its runs can use."""

    def __init__(self) -> None:
        self.versions: dict[str, ConfigurationVersion] = {}

    def get(self, cv_id: str) -> ConfigurationVersion | None:
        return self.versions.get(cv_id)

    def create(self, version: ConfigurationVersion) -> None:
        if version.id in self.versions:
            raise ConcurrentChange(f"configuration version {version.id} changed concurrently")
        self.versions[version.id] = version

    def record_upload(
        self, cv_id: str, workspace_id: str, artifact: Artifact, now: datetime
    ) -> Write:
        def write() -> None:
            current = self.versions.get(cv_id)
            if current is None or current.status != "pending":
                raise Conflict(f"configuration version {cv_id} was already uploaded")
            self.versions[cv_id] = replace(
                current,
                status="uploaded",
                artifact_id=artifact.id,
                sha256=artifact.sha256 or "",
                size=artifact.size or 0,
                uploaded_at=now,
                expires_at=None,
            )

        return write

    def add_uploaded(
        self, cv_id: str, organization_id: str, workspace_id: str, at: datetime
    ) -> ConfigurationVersion:
        version = ConfigurationVersion(
            id=cv_id,
            organization_id=organization_id,
            workspace_id=workspace_id,
            status="uploaded",
            upload_id=f"upload-{cv_id}",
            created_at=at,
            artifact_id=f"art-{cv_id}",
            sha256="0" * 64,
            size=10,
            uploaded_at=at,
        )
        self.create(version)
        return version
