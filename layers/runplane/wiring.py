"""The composition root: builds every service once per process, lazily."""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from runplane.adapters import aws
from runplane.adapters.clock import SystemClock
from runplane.adapters.ids import RandomIds
from runplane.adapters.jwt import JwtVerifier
from runplane.adapters.keys import DataKeys
from runplane.adapters.launchers import EcsFargateLauncher, Launcher, LocalProcessLauncher
from runplane.adapters.object_store import ObjectStore
from runplane.adapters.workflow import Workflow
from runplane.domain.clock import Clock
from runplane.domain.ids import IdGenerator
from runplane.services.artifacts import ArtifactStore, SandboxTransfers
from runplane.services.capabilities import Capabilities, RunnerSessions
from runplane.services.identity import Identity
from runplane.services.launch_controls import LaunchControls
from runplane.services.lifecycle import RunLifecycle
from runplane.services.logs import RunLogs
from runplane.services.orchestration import Orchestration, Timing
from runplane.services.policy import Evaluator, Policies
from runplane.services.recovery import Recoveries
from runplane.services.remote_runs import RemoteRuns
from runplane.services.runner_api import RunnerApi
from runplane.services.runs import Runs
from runplane.services.state import StateVersions
from runplane.services.tenancy import Tenancy
from runplane.services.web_sessions import WebSessions
from runplane.services.workspaces import Workspaces
from runplane.settings import Settings, get_settings
from runplane.store import models


def launcher_for(settings: Settings) -> Launcher:
    if settings.launcher == "local":
        return LocalProcessLauncher(engine=settings.engine_path)
    return EcsFargateLauncher(
        aws.ecs(settings),
        cluster=settings.ecs_cluster or "",
        task_definition=settings.ecs_task_definition or "",
        subnets=[s for s in (settings.ecs_subnets or "").split(",") if s],
        security_groups=[s for s in (settings.ecs_security_groups or "").split(",") if s],
    )


@dataclass(frozen=True)
class Services:
    settings: Settings
    clock: Clock
    ids: IdGenerator
    tenancy: Tenancy
    lifecycle: RunLifecycle
    artifacts: ArtifactStore
    transfers: SandboxTransfers
    capabilities: Capabilities
    sessions: RunnerSessions
    identity: Identity
    workspaces: Workspaces
    state: StateVersions
    workflow: Workflow
    runs: Runs
    recoveries: Recoveries
    logs: RunLogs
    orchestration: Orchestration
    runner_api: RunnerApi
    launcher: Launcher
    launch_controls: LaunchControls
    policies: Policies
    remote_runs: RemoteRuns
    web_sessions: WebSessions


def jwt_verifier(settings: Settings) -> JwtVerifier | None:
    if not (settings.jwt_issuer and settings.jwt_audience and settings.jwt_jwks):
        return None
    return JwtVerifier(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        jwks=json.loads(settings.jwt_jwks),
    )


def rego_release() -> str:
    """The policy runtime's release identity, read without loading the engine (the
    evaluator records its full identity, with the rego-cpp version, on each result)."""
    return f"regopy@{importlib.metadata.version('regopy')}"


@lru_cache(maxsize=1)
def rego_evaluator() -> Evaluator:
    from runplane.adapters.rego import RegoEvaluator

    return RegoEvaluator()


def build_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    ids: IdGenerator | None = None,
    verifier: JwtVerifier | None = None,
    launcher: Launcher | None = None,
) -> Services:
    clock = clock or SystemClock()
    ids = ids or RandomIds()
    models.bind(settings.table_name, settings.region, settings.aws_endpoint_url)
    objects = ObjectStore(aws.s3(settings), settings.artifact_bucket)
    keys = DataKeys(aws.kms(settings), settings.kms_key_id)
    artifacts = ArtifactStore(clock, ids, objects, keys, url_seconds=settings.transfer_url_seconds)
    lifecycle = RunLifecycle(clock, ids)
    sessions = RunnerSessions(clock, ids)
    workspaces = Workspaces(clock, ids, lifecycle.runs)
    capabilities = Capabilities(clock, ids)
    transfers = SandboxTransfers(
        clock, ids, objects, keys, url_seconds=settings.transfer_url_seconds
    )
    workflow = Workflow(aws.stepfunctions(settings), settings.state_machine_arn)
    launcher = launcher or launcher_for(settings)
    launch_controls = LaunchControls(
        clock, region=settings.region, policy_runtime=settings.policy_runtime or rego_release()
    )
    policies = Policies(clock, artifacts, rego_evaluator)
    orchestration = Orchestration(
        clock,
        ids,
        lifecycle,
        capabilities,
        workflow,
        launcher,
        control_plane_url=settings.control_plane_url,
        launch_controls=launch_controls,
        policies=policies,
        timing=Timing(
            approval_window=timedelta(seconds=settings.approval_window_seconds),
            runner_phase=timedelta(seconds=settings.runner_phase_seconds),
            runner_heartbeat=timedelta(seconds=settings.runner_heartbeat_seconds),
        ),
    )
    runs = Runs(
        clock,
        ids,
        lifecycle,
        workspaces,
        artifacts,
        workflow,
        definition_version=settings.definition_version,
        build_sha=settings.build_sha,
        launch_controls=launch_controls,
        runner_release=settings.runner_release,
        engine_versions=frozenset(
            v.strip() for v in (settings.engine_versions or "").split(",") if v.strip()
        ),
    )
    logs = RunLogs(clock, artifacts, runs)
    remote_runs = RemoteRuns(
        clock,
        ids,
        runs,
        lifecycle,
        workspaces,
        logs,
        workflow,
        keys,
        upload_seconds=settings.transfer_url_seconds,
    )
    return Services(
        settings=settings,
        clock=clock,
        ids=ids,
        tenancy=Tenancy(clock, ids),
        lifecycle=lifecycle,
        artifacts=artifacts,
        transfers=transfers,
        capabilities=capabilities,
        sessions=sessions,
        identity=Identity(clock, ids, sessions, lifecycle.runs, verifier or jwt_verifier(settings)),
        workspaces=workspaces,
        state=StateVersions(clock, ids, workspaces, artifacts),
        workflow=workflow,
        runs=runs,
        recoveries=Recoveries(clock, ids, artifacts, workflow),
        logs=logs,
        orchestration=orchestration,
        runner_api=RunnerApi(sessions, capabilities, transfers, orchestration, lifecycle.runs),
        launcher=launcher,
        launch_controls=launch_controls,
        policies=policies,
        remote_runs=remote_runs,
        web_sessions=WebSessions(clock, ids),
    )


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
