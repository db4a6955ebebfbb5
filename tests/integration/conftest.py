from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import boto3
import pytest
from moto import mock_aws

from runplane.adapters.jwt import LocalIssuer
from runplane.adapters.keys import DataKeys
from runplane.adapters.object_store import ObjectStore
from runplane.domain.artifacts import ArtifactStatus
from runplane.domain.entities import Organization, Run, Workspace
from runplane.domain.ids import IdGenerator
from runplane.domain.run import RunKind
from runplane.local.moto_serial import serialize_requests
from runplane.services.artifacts import ArtifactStore, SandboxTransfers
from runplane.services.capabilities import Capabilities, RunnerSessions
from runplane.services.identity import Identity
from runplane.services.lifecycle import RunLifecycle
from runplane.services.state import StateVersions
from runplane.services.tenancy import Tenancy
from runplane.services.workspaces import Workspaces
from runplane.store import artifacts as artifact_store
from runplane.store import models
from runplane.store.prefetch import IdentityMap
from runplane.store.provision import create_table
from runplane.store.runs import RunRepository
from runplane.store.unit_of_work import DynamoUnitOfWork
from runplane.wiring import Services
from tests.builders import bare_run
from tests.composition import services_for
from tests.fakes import FakeClock, SeededIds
from tests.integration.arena import Arena, FakeLauncher, FakeWorkflow, build_arena

TABLE = "runplane-test"


BUCKET = "runplane-artifacts-test"

# What the stack's services are configured with (over the defaults of Settings).
SETTINGS: dict[str, Any] = {
    "control_plane_url": "http://127.0.0.1:1",
    "policy_runtime": "none",
    "approval_window_seconds": 600,
    "definition_version": "test",
    "build_sha": "test",
    "runner_release": "runner@test",
}


@dataclass
class Stack:
    clock: FakeClock
    ids: SeededIds
    tenancy: Tenancy
    lifecycle: RunLifecycle
    dynamodb: object
    s3: object
    objects: ObjectStore
    keys: DataKeys
    artifacts: ArtifactStore
    transfers: SandboxTransfers
    capabilities: Capabilities
    sessions: RunnerSessions
    identity: Identity
    workspaces: Workspaces
    state: StateVersions
    issuer: LocalIssuer
    services: Services

    def new_run(self, organization_id: str, workspace_id: str, kind: RunKind, *, actor: str) -> Run:
        """A bare ``dispatch_pending`` run (see ``tests/builders.py``)."""
        return bare_run(
            self.clock,
            self.ids,
            self.records,
            organization_id,
            workspace_id,
            kind,
            actor=actor,
        )

    @property
    def records(self) -> RunRepository:
        """The runs' records on the stack's table."""
        return RunRepository(self.clock, self.ids)

    def units(self) -> DynamoUnitOfWork:
        """A unit of work over the stack's table, as the composition root opens one."""
        return DynamoUnitOfWork(self.records, self.lifecycle.mover.move)

    def rewired(self, ids: IdGenerator | None = None, **settings: Any) -> Services:
        """Another process's services on this stack: the same table, objects, keys, clock
        and fakes, with ``settings`` over the stack's (and other ``ids``, if given)."""
        return services_for(
            self.clock,
            ids or self.ids,
            table=TABLE,
            objects=self.objects,
            keys=self.keys,
            verifier=self.issuer.verifier(leeway_seconds=0),
            launcher=self.services.launcher,
            workflow=self.services.workflow,
            **{**SETTINGS, **settings},
        )

    def artifacts_status(self, artifact_id: str) -> ArtifactStatus:
        return artifact_store.get(artifact_id, reads=IdentityMap()).artifact.status

    def bucket_keys(self) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET)  # type: ignore[attr-defined]
        return sorted(entry["Key"] for entry in listed.get("Contents", []))

    def scan(self) -> list[dict[str, Any]]:
        """Every item of the table, in key order: a byte-for-byte snapshot."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, object] = {"TableName": TABLE, "ConsistentRead": True}
        while True:
            page = self.dynamodb.scan(**kwargs)  # type: ignore[attr-defined]
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(items, key=lambda item: (item["PK"]["S"], item["SK"]["S"]))


@pytest.fixture
def stack() -> Iterator[Stack]:
    serialize_requests("dynamodb")
    with mock_aws():
        session = _session()
        client = session.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        models.bind(TABLE, "us-east-1")
        s3 = session.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        kms = session.client("kms", region_name="us-east-1")
        key_id = kms.create_key(Description="runplane test key")["KeyMetadata"]["KeyId"]
        clock, ids = FakeClock(), SeededIds()
        objects, keys = ObjectStore(s3, BUCKET), DataKeys(kms, key_id)
        issuer = _issuer()
        services = services_for(
            clock,
            ids,
            table=TABLE,
            objects=objects,
            keys=keys,
            verifier=issuer.verifier(leeway_seconds=0),
            launcher=FakeLauncher(),
            workflow=FakeWorkflow(),
            **SETTINGS,
        )
        yield Stack(
            clock=clock,
            ids=ids,
            tenancy=services.tenancy,
            lifecycle=services.lifecycle,
            dynamodb=client,
            s3=s3,
            objects=objects,
            keys=keys,
            artifacts=services.artifacts,
            transfers=services.transfers,
            capabilities=services.capabilities,
            sessions=services.sessions,
            identity=services.identity,
            workspaces=services.workspaces,
            state=services.state,
            issuer=issuer,
            services=services,
        )


@lru_cache(maxsize=1)
def _session() -> boto3.session.Session:
    """One boto3 session for every test's clients (each test still gets its own).

    mock_aws drops boto3's default session each time it starts, and with it the loader's
    caches: through ``boto3.client`` every test's three clients loaded their service
    models and endpoint rules from disk again (a third of a short test's time). moto
    intercepts this session's clients as any other's (its handler is a built-in one)."""
    return boto3.session.Session()


@lru_cache(maxsize=1)
def _issuer() -> LocalIssuer:
    # RSA key generation is slow: one issuer serves the whole session.
    return LocalIssuer.create("https://issuer.test", "runplane-test")


@pytest.fixture
def org(stack: Stack) -> Organization:
    return stack.tenancy.create_organization("acme")


@pytest.fixture
def workspace(stack: Stack, org: Organization) -> Workspace:
    return stack.tenancy.create_workspace(org.id, "network")


@pytest.fixture
def arena(stack: Stack, org: Organization) -> Arena:
    """The real run services on moto, driven step by step (see ``arena.py``)."""
    return build_arena(stack, org)
