"""The cloud settings store's contract: the same cases against the DynamoDB store (on
moto) and the in-memory fake the service tier uses (tests/service), so the fake cannot
drift from the table's versions, refusals and audit events."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runplane.domain.cloud_settings import (
    CloudSettings,
    SealedExternalId,
    StoredCloudSettings,
)
from runplane.domain.entities import AuditEvent
from runplane.domain.errors import ConcurrentChange
from runplane.services.repositories.cloud_settings import CloudSettingsStore
from runplane.store import audit
from runplane.store.cloud_settings import DynamoCloudSettingsStore
from tests.fakes_cloud import InMemoryCloudSettings

AT = datetime(2026, 1, 1, tzinfo=UTC)
ORG, WS = "org-acme", "ws-1"
PLAN = "arn:aws:iam::123456789012:role/plan"
APPLY = "arn:aws:iam::123456789012:role/deploy/apply"


@pytest.fixture(params=["dynamodb", "memory"])
def store(request: pytest.FixtureRequest) -> CloudSettingsStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoCloudSettingsStore()
    return InMemoryCloudSettings()


def _stored(
    version: int,
    settings: CloudSettings,
    *,
    workspace_id: str = WS,
    external_id: SealedExternalId | None = None,
) -> StoredCloudSettings:
    return StoredCloudSettings(
        workspace_id=workspace_id,
        settings=settings,
        version=version,
        updated_at=AT,
        updated_by="user:ada",
        external_id=external_id,
    )


def _event(tag: str, workspace_id: str = WS, org_id: str = ORG) -> AuditEvent:
    return AuditEvent(
        id=f"evt-{tag}",
        organization_id=org_id,
        subject_id=workspace_id,
        type="workspace.cloud_settings_set",
        actor="user:ada",
        at=AT,
        details={"changed": "aws_plan_role_arn", "version": tag},
    )


def _trail(store: CloudSettingsStore, org_id: str = ORG) -> list[AuditEvent]:
    if isinstance(store, InMemoryCloudSettings):
        return [e for e in store.audit if e.organization_id == org_id]
    return sorted(audit.organization_trail(org_id), key=lambda e: e.id)


FULL = CloudSettings(
    aws_plan_role_arn=PLAN,
    aws_apply_role_arn=APPLY,
    aws_external_id_set=True,
    aws_session_duration=7200,
    aws_region="eu-west-3",
    gcp_audience="//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/x",
    azure_audience="api://AzureADTokenExchange",
    azure_client_id="11111111-2222-3333-4444-555555555555",
    azure_tenant_id="66666666-7777-8888-9999-000000000000",
)
SEALED = SealedExternalId(b"\x00wrapped\xff", b"\x01cipher\xfe")


def test_settings_are_none_until_written_and_read_back_whole(store: CloudSettingsStore) -> None:
    # Given a workspace with no settings, and another workspace with some
    assert store.get(WS) is None
    store.put(
        _stored(1, CloudSettings(aws_plan_role_arn=PLAN), workspace_id="ws-2"),
        org_id=ORG,
        previous_version=0,
        event=_event("other", "ws-2"),
    )
    # When every setting is written, with a sealed external ID
    store.put(
        _stored(1, FULL, external_id=SEALED), org_id=ORG, previous_version=0, event=_event("1")
    )
    # Then they read back exactly, and the other workspace's are its own
    assert store.get(WS) == _stored(1, FULL, external_id=SEALED)
    other = store.get("ws-2")
    assert other is not None
    assert other.settings == CloudSettings(aws_plan_role_arn=PLAN)


def test_a_replacement_at_the_version_read_moves_the_version_and_replaces_everything(
    store: CloudSettingsStore,
) -> None:
    # Given settings with an external ID
    store.put(
        _stored(1, FULL, external_id=SEALED), org_id=ORG, previous_version=0, event=_event("1")
    )
    # When they are replaced at version 1 by fewer settings
    fewer = CloudSettings(aws_plan_role_arn=PLAN)
    store.put(_stored(2, fewer), org_id=ORG, previous_version=1, event=_event("2"))
    # Then only those are left, at version 2 (no external ID, no audiences)
    assert store.get(WS) == _stored(2, fewer)


@pytest.mark.parametrize("previous", [0, 2, 5])
def test_a_write_not_at_the_current_version_is_refused_and_writes_nothing(
    store: CloudSettingsStore, previous: int
) -> None:
    # Given settings at version 1 and their audit event
    store.put(
        _stored(1, FULL, external_id=SEALED), org_id=ORG, previous_version=0, event=_event("1")
    )
    # When a write names another version (a create over them, or a version never read)
    with pytest.raises(ConcurrentChange):
        store.put(
            _stored(previous + 1, CloudSettings()),
            org_id=ORG,
            previous_version=previous,
            event=_event("stale"),
        )
    # Then the settings and the audit trail are as they were
    assert store.get(WS) == _stored(1, FULL, external_id=SEALED)
    assert [e.id for e in _trail(store)] == ["evt-1"]


def test_each_write_records_its_audit_event_with_it(store: CloudSettingsStore) -> None:
    # When settings are written twice, and another organization's once
    store.put(_stored(1, FULL), org_id=ORG, previous_version=0, event=_event("1"))
    store.put(_stored(2, CloudSettings()), org_id=ORG, previous_version=1, event=_event("2"))
    store.put(
        _stored(1, FULL, workspace_id="ws-9"),
        org_id="org-other",
        previous_version=0,
        event=_event("9", "ws-9", "org-other"),
    )
    # Then each organization's trail holds its own events, exactly as given
    assert _trail(store) == [_event("1"), _event("2")]
    assert _trail(store, "org-other") == [_event("9", "ws-9", "org-other")]
