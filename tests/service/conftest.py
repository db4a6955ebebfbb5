"""The service tier: real services over the in-memory repositories (tests/fakes.py),
no moto and no AWS client. Only services whose store access goes through a repository
seam (runplane.services.repositories) can be tested here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Never

import boto3
import pytest
from botocore.client import BaseClient
from pynamodb.connection.base import Connection

from runplane.adapters.keys import DataKeys
from runplane.adapters.object_store import ObjectStore
from runplane.domain.entities import Organization
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.run_events import RunEvent
from runplane.services.artifacts import ArtifactStore
from runplane.services.auto_destroy import AutoDestroys
from runplane.services.capabilities import Capabilities
from runplane.services.cloud_settings import WorkspaceCloudSettings
from runplane.services.launch_controls import LaunchControls
from runplane.services.runs import ReviewReads, Runs
from runplane.services.schedules import Schedules
from runplane.services.tenancy import Tenancy
from runplane.services.variables import WorkspaceVariables
from runplane.services.workflow_steps import WorkflowSteps
from runplane.services.workspaces import Workspaces
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import (
    InMemoryDriftRecords,
    InMemorySandboxes,
    InMemoryUnitOfWork,
    InMemoryWriterQueue,
)
from tests.fakes import (
    FakeClock,
    InMemoryArtifactRecords,
    InMemoryRunLedger,
    InMemorySchedules,
    InMemoryStateVersions,
    InMemoryVariables,
    InMemoryWorkspaces,
    LocalDataKeys,
    RecordingLauncher,
    RecordingRegistry,
    RecordingWorkflow,
    SeededIds,
    no_read_ahead,
)
from tests.fakes_access import NothingReadAhead
from tests.fakes_auto_destroy import InMemoryAutoDestroys
from tests.fakes_cloud import InMemoryCloudSettings
from tests.fakes_creation import (
    InMemoryConfigurationVersions,
    InMemoryRunCreations,
    InMemoryTriggerClaims,
)
from tests.fakes_operations import InMemoryLaunchControls, InMemorySourceRecords
from tests.fakes_state import InMemoryWorkspaceLocks

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client


@pytest.fixture(autouse=True)
def no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A service test that reaches DynamoDB fails loudly: the seam leaked."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a service test reached DynamoDB")

    monkeypatch.setattr(Connection, "_make_api_call", refuse)
    # Nor may it reach any other AWS service (S3, KMS, Step Functions).
    monkeypatch.setattr(BaseClient, "_make_api_call", refuse)


@dataclass
class Tier:
    clock: FakeClock
    ids: SeededIds
    directory: InMemoryWorkspaces
    tenancy: Tenancy
    workspaces: Workspaces
    run_reader: InMemoryRunLedger
    runs: Runs
    variable_store: InMemoryVariables
    variables: WorkspaceVariables
    schedule_store: InMemorySchedules
    registry: RecordingRegistry
    schedules: Schedules
    # What a decision writes through (its unit of work) and resumes.
    writer_queue: InMemoryWriterQueue
    workflow: RecordingWorkflow
    units: list[InMemoryUnitOfWork]
    # The sandbox slots and runner sessions a cancellation's attempt closes give back
    # and revoke.
    sandboxes: InMemorySandboxes
    # The workflow's own steps whose writes go through the unit of work (an approval's
    # expiry); sandboxes it would stop are recorded by ``launcher``.
    steps: WorkflowSteps
    launcher: RecordingLauncher
    # A run's creation with its caller's records (a schedule's fire, a trigger's
    # claim), over the reader's ledger and the schedule store.
    claims: InMemoryTriggerClaims
    configurations: InMemoryConfigurationVersions
    # A new unit of work over the tier's repositories (recorded in ``units``).
    new_unit: Callable[[], InMemoryUnitOfWork]
    # Workspace cloud settings (the external ID sealed with a local key), which ``runs``
    # pins into each new run as its credential decisions.
    cloud_store: InMemoryCloudSettings
    cloud_settings: WorkspaceCloudSettings
    # Workspaces' auto-destroys, and the notifications their sweep sent.
    auto_destroy_store: InMemoryAutoDestroys
    auto_destroys: AutoDestroys
    notified: list[RunEvent]

    def admin(self, org: Organization) -> Principal:
        return Principal(
            kind=PrincipalKind.USER,
            id="ada",
            organization_id=org.id,
            permissions=frozenset(Permission),
            display="ada",
        )


@pytest.fixture
def tier() -> Tier:
    clock, ids, directory = FakeClock(), SeededIds(), InMemoryWorkspaces()
    run_reader = InMemoryRunLedger(clock, ids)
    workspaces = Workspaces(
        clock,
        ids,
        directory,
        locks=InMemoryWorkspaceLocks(directory, run_reader),
        engine_reads=NothingReadAhead(),
    )
    writer_queue, workflow = InMemoryWriterQueue(), RecordingWorkflow()
    sandboxes, drift_records = InMemorySandboxes(), InMemoryDriftRecords()
    units: list[InMemoryUnitOfWork] = []

    def unit_of_work() -> InMemoryUnitOfWork:
        units.append(
            InMemoryUnitOfWork(
                run_reader, writer_queue, sandboxes, directory=directory, drift=drift_records
            )
        )
        return units[-1]

    # The reads under test go through the in-memory reader; these clients are never
    # called by them (the guard above fails a test that does).
    region = "us-east-1"
    schedule_store, claims = InMemorySchedules(), InMemoryTriggerClaims()
    auto_destroy_store = InMemoryAutoDestroys(schedule_store)
    configurations = InMemoryConfigurationVersions()
    cloud_store = InMemoryCloudSettings()
    cloud_settings = WorkspaceCloudSettings(
        clock, ids, workspaces, LocalDataKeys(), cloud_store, deployment_region=region
    )
    runs = Runs(
        clock,
        ids,
        run_lifecycle(clock, ids),
        workspaces,
        ArtifactStore(
            clock,
            ids,
            ObjectStore(_s3(), "artifacts"),
            DataKeys(_kms(), "alias/artifacts"),
            records=InMemoryArtifactRecords(),
        ),
        workflow,
        definition_version="def-1",
        build_sha="build-1",
        launch_controls=LaunchControls(
            clock, InMemoryLaunchControls(), region=region, policy_runtime="rego-1"
        ),
        runner_release="runner-1",
        units=unit_of_work,
        creations=InMemoryRunCreations(run_reader, schedule_store, claims, auto_destroy_store),
        configurations=configurations,
        review_reads=ReviewReads(
            runs=run_reader,
            claims=claims,
            state_versions=InMemoryStateVersions(),
            sources=InMemorySourceRecords(),
            artifacts=InMemoryArtifactRecords(),
        ),
        cloud_settings=cloud_settings,
    )
    lifecycle, launcher = run_lifecycle(clock, ids), RecordingLauncher()
    steps = WorkflowSteps(
        clock,
        ids,
        lifecycle,
        Capabilities(clock, ids, unit_of_work),
        workflow,
        launcher,
        control_plane_url="http://runplane.test",
        launch_controls=_not_here,
        policies=_not_here,
        units=unit_of_work,
        reads_ahead=no_read_ahead,
    )
    variable_store = InMemoryVariables()
    # No fake key service exists: only non-sensitive variables are set here (a
    # sensitive one would reach KMS, which the guard above refuses).
    variables = WorkspaceVariables(
        clock,
        ids,
        workspaces,
        DataKeys(_kms(), "alias/variables"),
        variable_store,
    )
    registry = RecordingRegistry()
    schedules = Schedules(clock, ids, workspaces, runs, run_reader, registry, schedule_store)
    # An event is announced as itself: the store keeps what committed with its record.
    auto_destroys = AutoDestroys(
        clock, ids, workspaces, runs, run_reader, auto_destroy_store, lambda event: event
    )
    notified: list[RunEvent] = auto_destroy_store.announced
    return Tier(
        clock,
        ids,
        directory,
        Tenancy(clock, ids, directory),
        workspaces,
        run_reader,
        runs,
        variable_store,
        variables,
        schedule_store,
        registry,
        schedules,
        writer_queue,
        workflow,
        units,
        sandboxes,
        steps,
        launcher,
        claims,
        configurations,
        unit_of_work,
        cloud_store=cloud_store,
        cloud_settings=cloud_settings,
        auto_destroy_store=auto_destroy_store,
        auto_destroys=auto_destroys,
        notified=notified,
    )


# One client per service for the whole tier: building one costs more than most service
# tests, and the guard above fails any test whose path calls it.
@cache
def _s3() -> S3Client:
    return boto3.client("s3", region_name="us-east-1")


@cache
def _kms() -> KMSClient:
    return boto3.client("kms", region_name="us-east-1")


def _not_here() -> Never:
    raise AssertionError("the step under test reached a service the tier does not build")
