"""The composition root: every service of the process, each built on first use.

A handler imports this module and nothing else of the service layer: a service
(and the modules it needs) is imported and built only when a request first asks
for it, so an authorizer cold start pays for identity, not for orchestration,
policy evaluation or remote runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, cast

from runplane.adapters.clock import SystemClock
from runplane.adapters.ids import RandomIds
from runplane.domain.errors import NotConfigured
from runplane.settings import Settings, get_settings

if TYPE_CHECKING:
    from runplane.adapters.event_queue import EventQueue
    from runplane.adapters.jwt import JwtVerifier
    from runplane.adapters.keys import DataKeys
    from runplane.adapters.launchers import Launcher
    from runplane.adapters.object_store import ObjectStore
    from runplane.adapters.role_sessions import RoleSessions
    from runplane.adapters.scheduler import EventBridgeSchedules
    from runplane.adapters.secrets import Secrets
    from runplane.adapters.workflow import Workflow
    from runplane.domain.clock import Clock
    from runplane.domain.identity import Principal
    from runplane.domain.ids import IdGenerator
    from runplane.domain.read_ahead import ReadAhead
    from runplane.services.artifacts import ArtifactStore, SandboxTransfers
    from runplane.services.attention import Attention
    from runplane.services.audit import AuditTrail
    from runplane.services.audit_export import AuditExporter
    from runplane.services.auto_destroy import AutoDestroys
    from runplane.services.capabilities import Capabilities, RunnerSessions
    from runplane.services.cloud_settings import WorkspaceCloudSettings
    from runplane.services.event_relay import EventRelay
    from runplane.services.github import GitHubSources
    from runplane.services.github_installations import GitHubInstallations
    from runplane.services.github_reports import PullRequestReports
    from runplane.services.gitlab import GitLabSources
    from runplane.services.identity import Identity
    from runplane.services.launch_controls import LaunchControls
    from runplane.services.lifecycle import RunLifecycle
    from runplane.services.logs import RunLogs
    from runplane.services.notifications import Notifications
    from runplane.services.orchestration import Orchestration
    from runplane.services.plan_views import PlanViews
    from runplane.services.policy import Evaluator, Policies
    from runplane.services.recovery import Recoveries
    from runplane.services.remote_runs import RemoteRuns
    from runplane.services.repositories import (
        DeliverySlots,
        RunLedger,
        RunReader,
        WorkspaceDirectory,
    )
    from runplane.services.repositories.access import TeamStore
    from runplane.services.repositories.audit import AuditSink
    from runplane.services.run_credentials import RunCredentials
    from runplane.services.run_events import EventWorker, RunEvents
    from runplane.services.run_triggers import RunTriggers
    from runplane.services.runner_api import RunnerApi
    from runplane.services.runs import Runs
    from runplane.services.sandbox_exits import SandboxExits
    from runplane.services.schedules import Schedules
    from runplane.services.sign_in import HostedUiSignIn
    from runplane.services.standby import StandbyClaims, StandbyPool
    from runplane.services.state import StateVersions
    from runplane.services.teams import Teams
    from runplane.services.tenancy import Tenancy
    from runplane.services.unit_of_work import UnitOfWork
    from runplane.services.variable_sets import VariableSets
    from runplane.services.variables import WorkspaceVariables
    from runplane.services.web_sessions import WebSessions
    from runplane.services.workload_identity import WorkloadIdentity
    from runplane.services.workspace_deletion import WorkspaceCleanup, WorkspaceDeletion
    from runplane.services.workspace_overview import WorkspaceOverview
    from runplane.services.workspaces import Workspaces
    from runplane.store.runs import RunRepository


def run_lifecycle(
    clock: Clock,
    ids: IdGenerator,
    events: RunEvents | None = None,
    ledger: RunLedger | None = None,
) -> RunLifecycle:
    """The run lifecycle on the table: its records, the writer authority, the run ledger
    (``ledger`` if given) and the mover. The mover and the ledger read the lifecycle's
    ``events`` at each move, so whoever holds it may set them later."""
    from runplane.services.lifecycle import RunLifecycle
    from runplane.store.moves import DynamoMover
    from runplane.store.run_ledger import DynamoRunLedger
    from runplane.store.runs import RunRepository
    from runplane.store.writer import DynamoWriterAuthority

    records, writer = RunRepository(clock, ids), DynamoWriterAuthority(clock, ids)
    built: list[RunLifecycle] = []

    def announcer() -> RunEvents | None:
        return built[0].events

    plain = ledger or DynamoRunLedger(records, announcer)
    mover = DynamoMover(clock, records, writer, announcer, plain)
    built.append(
        RunLifecycle(runs=records, writer=writer, ledger=plain, mover=mover, events=events)
    )
    return built[0]


# -- a request's identity map: what its authentication read, served to its first reads.
# Handlers open it here, so they never import the store; the request's units of work own
# it (``units``), and ``store.request_reads`` says who reads it and when an item may be
# served.


def read_ahead_in(authorizer: Mapping[str, Any] | None) -> ReadAhead:
    """What an authorizer context carries of its authentication's reads."""
    from runplane.store import prefetch

    return prefetch.decode(authorizer)


def read_ahead_context(ahead: ReadAhead) -> dict[str, str]:
    """``ahead`` as an authorizer context entry (empty when it read nothing)."""
    from runplane.store import prefetch

    return prefetch.encode(ahead)


@contextmanager
def identity_map(ahead: ReadAhead) -> Iterator[None]:
    """The request's identity map, holding what ``ahead`` read, for the block."""
    from runplane.store.request_reads import REQUEST

    with REQUEST.opened(ahead):
        yield


def launcher_for(settings: Settings) -> Launcher:
    from runplane.adapters import aws
    from runplane.adapters.launchers import EcsFargateLauncher, LocalProcessLauncher

    if settings.launcher == "local":
        return LocalProcessLauncher(engine=settings.engine_path)
    return EcsFargateLauncher(
        aws.ecs(settings),
        cluster=settings.ecs_cluster or "",
        task_definition=settings.ecs_task_definition or "",
        subnets=[s for s in (settings.ecs_subnets or "").split(",") if s],
        security_groups=[s for s in (settings.ecs_security_groups or "").split(",") if s],
    )


def jwt_verifier(settings: Settings) -> JwtVerifier | None:
    if not (settings.jwt_issuer and settings.jwt_audience and settings.jwt_jwks):
        return None
    from runplane.adapters.jwt import JwtVerifier

    return JwtVerifier(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        jwks=json.loads(settings.jwt_jwks),
    )


def rego_release() -> str:
    """The policy runtime's release identity, read without loading the engine (the
    evaluator records its full identity, with the engine's version, on each result)."""
    from runplane.adapters.rego import engine_release

    return engine_release()


@lru_cache(maxsize=1)
def rego_evaluator() -> Evaluator:
    from runplane.adapters.rego import RegoEvaluator

    return RegoEvaluator()


class Services:
    """The process's services. Each is built once, on first use, from the others."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        verifier: JwtVerifier | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        from runplane.store import models

        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.ids: IdGenerator = ids or RandomIds()
        self._verifier = verifier
        self._launcher = launcher
        models.bind(settings.resource("table_name"), settings.region, settings.aws_endpoint_url)

    # -- adapters -------------------------------------------------------------------------

    @cached_property
    def objects(self) -> ObjectStore:
        from runplane.adapters import aws
        from runplane.adapters.object_store import ObjectStore

        return ObjectStore(aws.s3(self.settings), self.settings.resource("artifact_bucket"))

    @cached_property
    def keys(self) -> DataKeys:
        from runplane.adapters import aws
        from runplane.adapters.keys import DataKeys

        return DataKeys(aws.kms(self.settings), self.settings.resource("kms_key_id"))

    @cached_property
    def workflow(self) -> Workflow:
        from runplane.adapters import aws
        from runplane.adapters.workflow import Workflow

        return Workflow(
            aws.stepfunctions(self.settings), self.settings.resource("state_machine_arn")
        )

    @cached_property
    def source_workflow(self) -> Workflow | None:
        """The source workflow (GitHub ingestions), when the deployment has one."""
        from runplane.adapters import aws
        from runplane.adapters.workflow import Workflow

        arn = self.settings.source_state_machine_arn
        return Workflow(aws.stepfunctions(self.settings), arn) if arn else None

    @cached_property
    def secrets(self) -> Secrets:
        from runplane.adapters import aws
        from runplane.adapters.secrets import Secrets

        return Secrets(aws.secretsmanager(self.settings))

    @cached_property
    def launcher(self) -> Launcher:
        return self.standby_pool or self._sandboxes

    @cached_property
    def _sandboxes(self) -> Launcher:
        return self._launcher or launcher_for(self.settings)

    @cached_property
    def standby_pool(self) -> StandbyPool | None:
        """The pool of standby runners over the sandboxes' launcher (docs/standby.md);
        None when the deployment keeps none."""
        settings = self.settings
        if not settings.runner_standby:
            return None
        from runplane.services.standby import StandbyPool, StandbyTasks
        from runplane.store.standby import DynamoStandbys

        if not hasattr(self._sandboxes, "start_standby"):
            raise ValueError("this launcher cannot start standby runners")
        return StandbyPool(
            self.clock,
            DynamoStandbys(),
            cast("StandbyTasks", self._sandboxes),
            self.keys,
            size=settings.runner_standby,
            wait=timedelta(seconds=settings.runner_standby_seconds),
            poll_seconds=settings.runner_standby_poll_seconds,
            control_plane_url=settings.control_plane_url,
        )

    @cached_property
    def standby_claims(self) -> StandbyClaims:
        from runplane.services.standby import StandbyClaims
        from runplane.store.standby import DynamoStandbys

        return StandbyClaims(self.clock, DynamoStandbys(), self.keys)

    # -- services -------------------------------------------------------------------------

    @cached_property
    def tenancy(self) -> Tenancy:
        from runplane.services.tenancy import Tenancy

        return Tenancy(
            self.clock,
            self.ids,
            self.directory,
            single_organization=self.settings.single_organization,
        )

    # -- the store behind each seam: the composition root alone picks the DynamoDB
    # implementations, so the services name only the seams --------------------------------

    @cached_property
    def directory(self) -> WorkspaceDirectory:
        from runplane.store.workspace_directory import DynamoWorkspaceDirectory

        return DynamoWorkspaceDirectory()

    @cached_property
    def run_records(self) -> RunRepository:
        """The runs' records, without the lifecycle's moves: authenticating a caller and
        reading a workspace need only these, not what moving a run loads."""
        from runplane.store.runs import RunRepository

        return RunRepository(self.clock, self.ids)

    def units(self) -> UnitOfWork:
        """A new unit of work on the table: each use case opens its own. It owns the
        identity map of the request in progress (a new empty one outside a request)."""
        from runplane.store.request_reads import REQUEST
        from runplane.store.unit_of_work import DynamoUnitOfWork

        return DynamoUnitOfWork(self.run_records, self.lifecycle.mover.move, reads=REQUEST.reads())

    @cached_property
    def lifecycle(self) -> RunLifecycle:
        return run_lifecycle(self.clock, self.ids, self.run_events)

    @cached_property
    def artifacts(self) -> ArtifactStore:
        from runplane.services.artifacts import ArtifactStore
        from runplane.store.artifact_records import DynamoArtifactRecords

        return ArtifactStore(
            self.clock,
            self.ids,
            self.objects,
            self.keys,
            url_seconds=self.settings.transfer_url_seconds,
            records=DynamoArtifactRecords(),
        )

    @cached_property
    def transfers(self) -> SandboxTransfers:
        from runplane.services.artifacts import SandboxTransfers
        from runplane.store.artifact_records import DynamoArtifactRecords

        return SandboxTransfers(
            self.clock,
            self.ids,
            self.objects,
            self.keys,
            url_seconds=self.settings.transfer_url_seconds,
            records=DynamoArtifactRecords(),
        )

    @cached_property
    def capabilities(self) -> Capabilities:
        from runplane.services.capabilities import Capabilities

        return Capabilities(self.clock, self.ids, self.units)

    @cached_property
    def sessions(self) -> RunnerSessions:
        from runplane.services.capabilities import RunnerSessions
        from runplane.store.capabilities import DynamoRunnerSessions

        return RunnerSessions(self.clock, self.ids, DynamoRunnerSessions())

    @cached_property
    def identity(self) -> Identity:
        from runplane.services.identity import Identity
        from runplane.store.identity import DynamoApiTokens

        verifier = self._verifier or jwt_verifier(self.settings)
        # Runner sessions and run records are built for the first runner session to
        # authenticate: a token or a user's JWT needs neither.
        return Identity(
            self.clock,
            self.ids,
            DynamoApiTokens(),
            lambda: self.sessions,
            self._identity_runs,
            verifier,
            federation=self.settings.federation,
        )

    def _identity_runs(self) -> RunReader:
        from runplane.store.run_reader import DynamoRunReader

        return DynamoRunReader(self.run_records)

    @cached_property
    def workspaces(self) -> Workspaces:
        from runplane.services.workspaces import Workspaces
        from runplane.store.apply_lock import DynamoWorkspaceLocks
        from runplane.store.engine_start_reads import DynamoEngineStartReads

        return Workspaces(
            self.clock,
            self.ids,
            self.directory,
            locks=DynamoWorkspaceLocks(self.run_records),
            engine_reads=DynamoEngineStartReads(),
        )

    @cached_property
    def workspace_overview(self) -> WorkspaceOverview:
        from runplane.services.workspace_overview import WorkspaceOverview
        from runplane.store.workspace_overview import DynamoOverviewReads

        return WorkspaceOverview(self.workspaces, DynamoOverviewReads())

    @cached_property
    def workspace_deletion(self) -> WorkspaceDeletion:
        from runplane.services.workspace_deletion import WorkspaceDeletion
        from runplane.store.run_reader import DynamoRunReader
        from runplane.store.state_version_reader import DynamoStateVersionReader

        def cleanups() -> tuple[WorkspaceCleanup, ...]:
            # What acts on a workspace, built only once a deletion committed.
            return (
                self.schedules,
                self.auto_destroys,
                self.github,
                self.notifications,
                self.teams,
            )

        return WorkspaceDeletion(
            self.clock,
            self.ids,
            self.workspaces,
            self.directory,
            runs=DynamoRunReader(self.run_records),
            state_versions=DynamoStateVersionReader(self.run_records),
            content=lambda: self.artifacts,
            cleanups=cleanups,
        )

    @cached_property
    def state(self) -> StateVersions:
        from runplane.services.state import StateVersions
        from runplane.store.state_publication import DynamoStatePublication
        from runplane.store.state_version_reader import DynamoStateVersionReader

        return StateVersions(
            self.clock,
            self.ids,
            self.workspaces,
            lambda: self.artifacts,
            reader=DynamoStateVersionReader(self.run_records),
            publication=DynamoStatePublication(),
        )

    @cached_property
    def launch_controls(self) -> LaunchControls:
        from runplane.services.launch_controls import LaunchControls
        from runplane.store.launch_controls import DynamoLaunchControls

        runtime = self.settings.policy_runtime or rego_release()
        return LaunchControls(
            self.clock,
            DynamoLaunchControls(),
            region=self.settings.region,
            policy_runtime=runtime,
        )

    @cached_property
    def policies(self) -> Policies:
        from runplane.services.policy import Policies
        from runplane.store.artifact_records import DynamoArtifactRecords
        from runplane.store.github import DynamoSourceRecords
        from runplane.store.policy_set_store import DynamoPolicySetStore

        return Policies(
            self.clock,
            self.artifacts,
            rego_evaluator,
            DynamoPolicySetStore(),
            self.directory,
            units=self.units,
            sources=DynamoSourceRecords(),
            records=DynamoArtifactRecords(),
        )

    @cached_property
    def orchestration(self) -> Orchestration:
        from runplane.services.orchestration import Orchestration, Timing
        from runplane.store import run_batch

        settings = self.settings
        return Orchestration(
            self.clock,
            self.ids,
            self.lifecycle,
            self.capabilities,
            self.workflow,
            self.launcher,
            control_plane_url=settings.control_plane_url,
            launch_controls=lambda: self.launch_controls,
            policies=lambda: self.policies,
            # The lifecycle's move commits a unit of work's move with its other intents.
            units=self.units,
            reads_ahead=run_batch.reading_ahead,
            timing=Timing(
                approval_window=timedelta(seconds=settings.approval_window_seconds),
                runner_phase=timedelta(seconds=settings.runner_phase_seconds),
                runner_heartbeat=timedelta(seconds=settings.runner_heartbeat_seconds),
            ),
        )

    @cached_property
    def sandbox_exits(self) -> SandboxExits:
        from runplane.services.sandbox_exits import SandboxExits
        from runplane.store.sandbox_refs import DynamoSandboxRefs

        return SandboxExits(
            self.orchestration.steps,
            self.workflow,
            self.units,
            DynamoSandboxRefs(),
            cluster=self.settings.ecs_cluster,
        )

    @cached_property
    def runs(self) -> Runs:
        from runplane.services.runs import ReviewReads, Runs
        from runplane.store.artifact_records import DynamoArtifactRecords
        from runplane.store.configuration_versions import DynamoConfigurationVersions
        from runplane.store.github import DynamoSourceRecords
        from runplane.store.run_creations import DynamoRunCreations
        from runplane.store.run_reader import DynamoRunReader
        from runplane.store.run_trigger_store import DynamoTriggerClaims
        from runplane.store.state_version_reader import DynamoStateVersionReader

        settings = self.settings
        return Runs(
            self.clock,
            self.ids,
            self.lifecycle,
            self.workspaces,
            self.artifacts,
            self.workflow,
            definition_version=settings.definition_version,
            build_sha=settings.build_sha,
            launch_controls=self.launch_controls,
            runner_release=settings.runner_release,
            engine_versions=frozenset(
                v.strip() for v in (settings.engine_versions or "").split(",") if v.strip()
            ),
            # The lifecycle's move commits a unit of work's move with its other intents.
            units=self.units,
            creations=DynamoRunCreations(self.run_records),
            configurations=DynamoConfigurationVersions(),
            review_reads=ReviewReads(
                runs=DynamoRunReader(self.run_records),
                claims=DynamoTriggerClaims(),
                state_versions=DynamoStateVersionReader(self.run_records),
                sources=DynamoSourceRecords(),
                artifacts=DynamoArtifactRecords(),
            ),
            workspace_variables=self.workspace_variables,
            cloud_settings=self.cloud_settings,
            variable_sets=self.variable_sets,
        )

    @cached_property
    def plan_views(self) -> PlanViews:
        from runplane.services.plan_views import PlanViews

        # The run review's permission rule (``Runs.get``), over the plan's document.
        return PlanViews(self.runs, self.artifacts, self.units)

    @cached_property
    def workspace_variables(self) -> WorkspaceVariables:
        from runplane.services.variables import WorkspaceVariables
        from runplane.store.variable_store import DynamoVariableStore

        return WorkspaceVariables(
            self.clock, self.ids, self.workspaces, self.keys, DynamoVariableStore()
        )

    @cached_property
    def cloud_settings(self) -> WorkspaceCloudSettings:
        from runplane.services.cloud_settings import WorkspaceCloudSettings
        from runplane.store.cloud_settings import DynamoCloudSettingsStore

        return WorkspaceCloudSettings(
            self.clock,
            self.ids,
            self.workspaces,
            self.keys,
            DynamoCloudSettingsStore(),
            deployment_region=self.settings.region,
        )

    @cached_property
    def variable_sets(self) -> VariableSets:
        from runplane.services.variable_sets import VariableSets
        from runplane.store.variable_set_store import DynamoVariableSetStore

        return VariableSets(
            self.clock, self.ids, self.workspaces, self.keys, DynamoVariableSetStore()
        )

    @cached_property
    def recoveries(self) -> Recoveries:
        from runplane.services.recovery import Recoveries

        return Recoveries(
            self.clock,
            self.ids,
            self.artifacts,
            self.workflow,
            units=self.units,
        )

    @cached_property
    def logs(self) -> RunLogs:
        from runplane.services.logs import RunLogs
        from runplane.store.log_chunks import DynamoLogChunks
        from runplane.store.run_reader import DynamoRunReader

        return RunLogs(
            self.clock,
            self.artifacts,
            self.runs,
            reader=DynamoRunReader(self.run_records),
            chunks=DynamoLogChunks(),
        )

    @cached_property
    def runner_api(self) -> RunnerApi:
        from runplane.services.runner_api import RunnerApi
        from runplane.store.capabilities import DynamoRunnerSessions
        from runplane.store.engine_start_reads import DynamoEngineStartReads

        return RunnerApi(
            self.sessions,
            self.capabilities,
            self.transfers,
            self.orchestration,
            self.units,
            DynamoRunnerSessions(),
            DynamoEngineStartReads(),
        )

    @cached_property
    def remote_runs(self) -> RemoteRuns:
        from runplane.services.remote_runs import RemoteRuns
        from runplane.store.configuration_versions import DynamoConfigurationVersions
        from runplane.store.run_reader import DynamoRunReader

        return RemoteRuns(
            self.clock,
            self.ids,
            self.runs,
            self.workspaces,
            self.logs,
            self.keys,
            upload_seconds=self.settings.transfer_url_seconds,
            configurations=DynamoConfigurationVersions(),
            reader=DynamoRunReader(self.run_records),
        )

    @cached_property
    def github(self) -> GitHubSources:
        from runplane.services.github import GitHubConfig, GitHubSources
        from runplane.store.github import DynamoGitHubSources

        settings = self.settings
        return GitHubSources(
            self.clock,
            self.ids,
            self.workspaces,
            self.runs,
            self.lifecycle,
            self.artifacts,
            self.source_workflow,
            self.secrets,
            GitHubConfig(
                api_url=settings.github_api_url,
                app_id=settings.github_app_id,
                private_key_secret_arn=settings.github_app_private_key_secret_arn,
                webhook_secret_arn=settings.github_webhook_secret_arn,
                delivery_window=timedelta(seconds=settings.github_delivery_window_seconds),
                webhook_max_bytes=settings.github_webhook_max_bytes,
                archive_max_bytes=settings.github_archive_max_bytes,
                review_url=settings.public_url or settings.control_plane_url,
            ),
            self.github_installations,
            DynamoGitHubSources(),
            self.auto_destroys,
            reports=self.pull_request_reports,
            refusals=self.audit,
        )

    @cached_property
    def pull_request_reports(self) -> PullRequestReports:
        """Pull requests' comments and check runs, and merge requests' notes."""
        from runplane.services.github_reports import PullRequestReports
        from runplane.store.github_reports import DynamoGitHubReports

        settings = self.settings
        return PullRequestReports(
            self.clock,
            DynamoGitHubReports(),
            self.runs,
            self.workspaces,
            self.plan_views,
            settings.public_url or settings.control_plane_url,
        )

    @cached_property
    def gitlab(self) -> GitLabSources:
        from runplane.services.gitlab import GitLabConfig, GitLabSources
        from runplane.store.github import DynamoGitHubSources
        from runplane.store.gitlab import DynamoGitLabBindings

        settings = self.settings
        return GitLabSources(
            self.clock,
            self.ids,
            self.workspaces,
            self.runs,
            self.lifecycle,
            self.artifacts,
            self.source_workflow,
            self.keys,
            GitLabConfig(
                delivery_window=timedelta(seconds=settings.gitlab_delivery_window_seconds),
                webhook_max_bytes=settings.gitlab_webhook_max_bytes,
                archive_max_bytes=settings.gitlab_archive_max_bytes,
                review_url=settings.public_url or settings.control_plane_url,
                allow_http=settings.gitlab_allow_http,
            ),
            DynamoGitLabBindings(),
            DynamoGitHubSources(),
            # The merge request note: GitHub's plan comment, in the same report records.
            reports=self.pull_request_reports,
            refusals=self.audit,
        )

    @cached_property
    def github_installations(self) -> GitHubInstallations:
        from runplane.services.github_installations import ConnectConfig, GitHubInstallations
        from runplane.store.github_installations import DynamoGitHubInstallations
        from runplane.store.web_sessions import DynamoWebSessions

        settings = self.settings
        return GitHubInstallations(
            self.clock,
            self.ids,
            self.secrets,
            ConnectConfig(
                web_url=settings.github_web_url,
                api_url=settings.github_api_url,
                app_slug=settings.github_app_slug,
                client_id=settings.github_client_id,
                client_secret_arn=settings.github_client_secret_arn,
                max_installations=settings.github_installations_max,
            ),
            DynamoGitHubInstallations(),
            DynamoWebSessions(),
        )

    @cached_property
    def schedule_registry(self) -> EventBridgeSchedules:
        from runplane.adapters import aws
        from runplane.adapters.scheduler import EventBridgeSchedules

        settings = self.settings
        return EventBridgeSchedules(
            aws.scheduler(settings),
            group=settings.scheduler_group,
            target_arn=settings.scheduler_target_arn,
            role_arn=settings.scheduler_role_arn,
        )

    @cached_property
    def schedules(self) -> Schedules:
        from runplane.services.schedules import Schedules
        from runplane.store.run_reader import DynamoRunReader
        from runplane.store.schedule_store import DynamoScheduleStore

        return Schedules(
            self.clock,
            self.ids,
            self.workspaces,
            self.runs,
            DynamoRunReader(self.run_records),
            self.schedule_registry,
            DynamoScheduleStore(),
        )

    @cached_property
    def auto_destroys(self) -> AutoDestroys:
        from runplane.services.auto_destroy import AutoDestroys
        from runplane.store.auto_destroy import DynamoAutoDestroyStore
        from runplane.store.run_reader import DynamoRunReader

        return AutoDestroys(
            self.clock,
            self.ids,
            self.workspaces,
            self.runs,
            DynamoRunReader(self.run_records),
            DynamoAutoDestroyStore(),
            # Its notices are outbox events, written with the records of them.
            self.run_events.announce,
        )

    @cached_property
    def attention(self) -> Attention:
        """The attention inbox (and the dashboard header's count)."""
        from runplane.services.attention import Attention
        from runplane.store.attention_index import DynamoAttentionIndex

        return Attention(self.clock, self.workspaces, DynamoAttentionIndex())

    @cached_property
    def workload_identity(self) -> WorkloadIdentity:
        """Runplane as an OpenID Connect issuer (KMS-signed workload identity tokens)."""
        from runplane.adapters import aws
        from runplane.adapters.token_signer import KmsTokenSigner
        from runplane.services.workload_identity import WorkloadIdentity

        settings = self.settings
        return WorkloadIdentity(
            self.clock,
            self.ids,
            KmsTokenSigner(aws.kms(settings)),
            issuer=settings.oidc_issuer_url,
            key_ids=settings.oidc_signing_keys,
        )

    @cached_property
    def role_sessions(self) -> RoleSessions:
        """AWS role sessions for runs, from STS in the workspace's region (the embedded
        stack replaces it with one whose STS checks role trust as AWS does)."""
        from runplane.adapters import aws
        from runplane.adapters.role_sessions import RoleSessions

        endpoint = self.settings.aws_endpoint_url
        return RoleSessions(
            lambda region, signed: aws.sts(endpoint, region, signed), endpoint_url=endpoint
        )

    @cached_property
    def run_credentials(self) -> RunCredentials:
        """A run phase's cloud credentials, issued once to its runner."""
        from runplane.services.run_credentials import RunCredentials

        return RunCredentials(
            self.clock,
            self.ids,
            self.capabilities,
            self.units,
            self.workload_identity,
            self.role_sessions,
            self.cloud_settings.external_id,
            phase_limit=timedelta(seconds=self.settings.runner_phase_seconds),
        )

    @cached_property
    def team_store(self) -> TeamStore:
        from runplane.store.teams import DynamoTeams

        return DynamoTeams()

    @cached_property
    def teams(self) -> Teams:
        from runplane.services.teams import Teams

        return Teams(self.clock, self.ids, self.team_store, self.workspaces, lambda: self.identity)

    def with_teams(self, principal: Principal) -> Principal:
        """The caller of one request, with what its teams grant read when first asked."""
        from runplane.services.teams import with_teams

        return with_teams(self.team_store, principal)

    @cached_property
    def web_sessions(self) -> WebSessions:
        from runplane.services.web_sessions import WebSessions
        from runplane.store.security_records import DynamoSecurityTrail
        from runplane.store.web_sessions import DynamoWebSessions

        return WebSessions(self.clock, self.ids, DynamoWebSessions(), DynamoSecurityTrail())

    @cached_property
    def audit(self) -> AuditTrail:
        from runplane.services.audit import AuditTrail
        from runplane.store.security_records import DynamoSecurityTrail

        return AuditTrail(self.clock, self.ids, DynamoSecurityTrail())

    @cached_property
    def audit_export(self) -> AuditExporter:
        from pathlib import Path

        from runplane.adapters.audit_sinks import BucketAuditSink, DirectoryAuditSink
        from runplane.services.audit_export import AuditExporter
        from runplane.store.security_records import DynamoAuditExport

        directory = self.settings.audit_export_directory
        sink: AuditSink = (
            DirectoryAuditSink(Path(directory)) if directory else BucketAuditSink(self.objects)
        )
        return AuditExporter(
            self.clock,
            DynamoAuditExport(),
            sink,
            settle_seconds=self.settings.audit_export_settle_seconds,
        )

    # -- run events (triggers, notifications) ------------------------------------------------

    @cached_property
    def event_queue(self) -> EventQueue:
        if self.settings.event_queue_url:
            from runplane.adapters import aws
            from runplane.adapters.event_queue import SqsEventQueue

            return SqsEventQueue(aws.sqs(self.settings), self.settings.event_queue_url)
        if self.settings.deployed:
            # Only the relay and the worker are given the queue; any other function
            # that tried to send would otherwise queue in its own memory and lose it.
            raise NotConfigured("event_queue_url")
        from runplane.adapters.acting_function import as_function
        from runplane.adapters.event_queue import InProcessQueue

        # It stands for the run-event queue and its worker function.
        return InProcessQueue(
            as_function(
                "functions.events.handler.handler",
                lambda message: self.event_worker.handle(message),
            ),
            per_organization=self.settings.notification_organization_slots,
            per_destination=self.settings.notification_destination_slots,
        )

    @cached_property
    def run_events(self) -> RunEvents:
        from runplane.services.run_events import RunEvents
        from runplane.store.outbox import DynamoEventOutbox

        return RunEvents(self.clock, lambda: self.event_queue, DynamoEventOutbox())

    @cached_property
    def event_relay(self) -> EventRelay:
        from runplane.services.event_relay import EventRelay
        from runplane.store.outbox import DynamoEventOutbox

        return EventRelay(lambda: self.event_queue, DynamoEventOutbox())

    @cached_property
    def notifications(self) -> Notifications:
        from runplane.domain.notifications import AddressPolicy
        from runplane.services.notifications import Notifications
        from runplane.store.notification_store import DynamoNotificationStore

        settings = self.settings
        return Notifications(
            self.clock,
            self.ids,
            self.workspaces,
            self.keys,
            self.event_queue,
            allow_http=settings.notification_allow_http,
            retry_base_seconds=settings.notification_retry_base_seconds,
            control_plane_url=settings.control_plane_url,
            address_policy=AddressPolicy(
                allow_loopback=settings.notification_allow_loopback,
                refused_ports=frozenset(settings.notification_refused_ports),
            ),
            slots=self._delivery_slots(),
            destinations=DynamoNotificationStore(),
            directory=self.directory,
        )

    def _delivery_slots(self) -> DeliverySlots | None:
        """On SQS every worker invocation is a process of its own: only the table can
        bound one organization's deliveries across them. In process, the embedded
        queue's FairLanes bounds the same with no table writes."""
        if not self.settings.event_queue_url:
            return None
        from runplane.store.delivery_slots import DynamoDeliverySlots

        return DynamoDeliverySlots(
            per_organization=self.settings.notification_organization_slots,
            per_destination=self.settings.notification_destination_slots,
        )

    @cached_property
    def run_triggers(self) -> RunTriggers:
        from runplane.services.run_triggers import RunTriggers
        from runplane.store.run_reader import DynamoRunReader
        from runplane.store.run_trigger_store import DynamoRunTriggerStore, DynamoTriggerClaims

        return RunTriggers(
            self.clock,
            self.ids,
            self.workspaces,
            self.runs,
            DynamoRunReader(self.run_records),
            self.workflow,
            self.event_queue,
            triggers=DynamoRunTriggerStore(),
            directory=self.directory,
            claims=DynamoTriggerClaims(),
        )

    @cached_property
    def event_worker(self) -> EventWorker:
        from runplane.services.run_events import EventWorker

        worker = EventWorker(
            self.clock,
            self.event_queue,
            self.run_events,
            deliver=self.notifications.attempt,
            approval_lead=timedelta(seconds=self.settings.approval_expiring_lead_seconds),
            run_status=lambda run_id: self.run_records.get(run_id).status,
        )
        from runplane.services.run_triggers import RETRY

        worker.route(RETRY, self.run_triggers.retry)
        worker.subscribe(self.run_triggers.on_event)
        worker.subscribe(self.notifications.on_event)
        if self.source_workflow is not None:
            from runplane.services.github import commit_status_reports
            from runplane.store.github import DynamoGitHubSources

            worker.subscribe(
                commit_status_reports(self.source_workflow, self.run_records, DynamoGitHubSources())
            )
        return worker

    @cached_property
    def sign_in(self) -> HostedUiSignIn | None:
        """Hosted-UI sign-in for the dashboard, when the settings configure it."""
        settings = self.settings
        if not settings.hosted_ui_sign_in:
            return None
        from botocore.exceptions import BotoCoreError, ClientError

        from runplane.adapters import aws
        from runplane.adapters.hosted_ui import HostedUi, fetch_jwks
        from runplane.domain.errors import SignInUnavailable
        from runplane.services.sign_in import CachedKeys, HostedUiSignIn, organization_exists
        from runplane.store.sign_in import DynamoPreSessions

        assert settings.sign_in_domain
        assert settings.sign_in_client_id
        assert settings.sign_in_redirect_uri
        assert settings.jwt_issuer
        inline, arn = settings.sign_in_client_secret, settings.sign_in_client_secret_arn

        @lru_cache(maxsize=1)
        def client_secret() -> str:
            if inline:
                return inline.get_secret_value()
            try:
                return aws.secret_string(settings, arn or "")
            except (BotoCoreError, ClientError, ValueError):
                raise SignInUnavailable(
                    "the dashboard's sign-in client secret cannot be read"
                ) from None

        hosted_ui = HostedUi(
            domain=settings.sign_in_domain,
            client_id=settings.sign_in_client_id,
            client_secret=client_secret,
            redirect_uri=settings.sign_in_redirect_uri,
        )
        keys = CachedKeys(
            settings.jwt_issuer,
            settings.sign_in_client_id,
            json.loads(settings.jwt_jwks) if settings.jwt_jwks else None,
            fetch_jwks,
        )
        exists = organization_exists(self.workspaces.organization_name)
        return HostedUiSignIn(
            self.clock,
            DynamoPreSessions(),
            self.web_sessions,
            hosted_ui,
            keys,
            exists,
            federation=settings.federation,
        )


def build_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    ids: IdGenerator | None = None,
    verifier: JwtVerifier | None = None,
    launcher: Launcher | None = None,
) -> Services:
    return Services(settings, clock=clock, ids=ids, verifier=verifier, launcher=launcher)


_installed: list[Services] = []


def install(built: Services) -> None:
    """Use ``built`` for this process (the embedded stack runs handlers in-process)."""
    _installed[:] = [built]


def services() -> Services:
    """The process's services, built on first use (never at import)."""
    return _installed[0] if _installed else _from_environment()


@lru_cache(maxsize=1)
def _from_environment() -> Services:
    return build_services(get_settings())
