"""The composition root: builds every service once per process, lazily."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from runplane.adapters import aws
from runplane.adapters.clock import SystemClock
from runplane.adapters.ids import RandomIds
from runplane.adapters.jwt import JwtVerifier
from runplane.adapters.keys import DataKeys
from runplane.adapters.object_store import ObjectStore
from runplane.domain.clock import Clock
from runplane.domain.ids import IdGenerator
from runplane.services.artifacts import ArtifactStore, SandboxTransfers
from runplane.services.capabilities import Capabilities, RunnerSessions
from runplane.services.identity import Identity
from runplane.services.lifecycle import RunLifecycle
from runplane.services.state import StateVersions
from runplane.services.tenancy import Tenancy
from runplane.services.workspaces import Workspaces
from runplane.settings import Settings, get_settings
from runplane.store import models


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


def jwt_verifier(settings: Settings) -> JwtVerifier | None:
    if not (settings.jwt_issuer and settings.jwt_audience and settings.jwt_jwks):
        return None
    return JwtVerifier(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        jwks=json.loads(settings.jwt_jwks),
    )


def build_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    ids: IdGenerator | None = None,
    verifier: JwtVerifier | None = None,
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
    return Services(
        settings=settings,
        clock=clock,
        ids=ids,
        tenancy=Tenancy(clock, ids),
        lifecycle=lifecycle,
        artifacts=artifacts,
        transfers=SandboxTransfers(
            clock, ids, objects, keys, url_seconds=settings.transfer_url_seconds
        ),
        capabilities=Capabilities(clock, ids),
        sessions=sessions,
        identity=Identity(clock, ids, sessions, lifecycle.runs, verifier or jwt_verifier(settings)),
        workspaces=workspaces,
        state=StateVersions(clock, ids, workspaces, artifacts),
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
