"""What a run's creation writes besides the run: its caller's records.

A run created by a schedule's fire or by a run trigger is written in ONE transaction
with its caller's record, so the record exists exactly when the run does: a fire
delivered twice, or a source run's event handled twice, creates one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from runplane.domain.auto_destroy import AutoDestroy
from runplane.domain.schedules import Schedule

FIRST_VERSION = 1
"""A new run's version: each move of it adds one."""


@dataclass(frozen=True)
class ScheduleFire:
    """A schedule's fire that created the run: its fire record (refused with
    ``ScheduleAlreadyFired`` for a fire recorded already) and the schedule's active run
    moved to the new run, only from the active run and state ``schedule`` was read
    with (``ScheduleMoved`` otherwise)."""

    schedule: Schedule
    scheduled_at: datetime
    recorded_at: datetime


@dataclass(frozen=True)
class TriggerClaim:
    """A source run's claim on its dependent workspace: refused with
    ``AlreadyTriggered`` (naming the run claimed first, "" for a skip) if the source
    run already queued a run there or recorded why not."""

    source_run_id: str
    dependent_workspace_id: str
    claimed_at: datetime


@dataclass(frozen=True)
class AutoDestroyLaunch:
    """A workspace's auto-destroy starting its destroy run: ``launched`` (naming the
    run, at the next version) replaces ``read`` only while it is still at the version it
    was read with (``ConcurrentChange`` otherwise): one sweep's launch, never two."""

    read: AutoDestroy
    launched: AutoDestroy


CallerRecord = ScheduleFire | TriggerClaim | AutoDestroyLaunch
"""A record the caller of a run's creation writes with the run, or neither."""


@dataclass(frozen=True)
class ConfigurationVersion:
    """An upload of a workspace's configuration: ``pending`` until its archive is an
    artifact, then ``uploaded`` with that artifact's ID, SHA-256 and size."""

    id: str
    organization_id: str
    workspace_id: str
    status: str
    upload_id: str
    created_at: datetime
    artifact_id: str | None = None
    sha256: str | None = None
    size: int | None = None
    uploaded_at: datetime | None = None
    expires_at: datetime | None = None
    """Until it is uploaded: when the record of a version never uploaded expires."""
    speculative: bool | None = None
    """Created through the TFE API: True for a plan-only version."""
    upload_token_hash: str | None = None
    """Created through the TFE API: the hash of its one upload URL's secret."""
    source_id: str | None = None
    """Recorded from a GitHub commit: the source ingestion it came from."""
