"""Workspace cloud settings on moto, through the composition root: the external ID
sealed with KMS and nowhere in the table in the clear, each change and its audit event
one transaction, a refused change writing nothing, and a run's creation pinning the
settings within its one read and one write."""

from __future__ import annotations

import json

import pytest

from runplane.domain.cloud_settings import CloudSettingsChange
from runplane.domain.entities import AuditEvent
from runplane.domain.errors import ConcurrentChange
from runplane.domain.parts import RunInput
from runplane.services.cloud_settings import CLEARED_EVENT, SET_EVENT
from runplane.store import audit, run_parts
from runplane.store.cloud_settings import DynamoCloudSettingsStore
from tests.integration.arena import Arena
from tests.integration.dynamodb_requests import DynamoDBRequests
from tests.integration.test_run_creation import uploaded_configuration, with_region

PLAN = "arn:aws:iam::123456789012:role/plan"
APPLY = "arn:aws:iam::123456789012:role/apply"
SECRET = "ext-ab7d90e1c2"
CHANGE = CloudSettingsChange(
    aws_plan_role_arn=PLAN, aws_apply_role_arn=APPLY, aws_external_id=SECRET
)


def _trail(arena: Arena, ws_id: str) -> list[str]:
    return [e.type for e in audit.organization_trail(arena.org.id) if e.subject_id == ws_id]


def test_the_external_id_is_sealed_with_kms_and_each_change_is_audited_with_it(
    arena: Arena,
) -> None:
    # Given a workspace, and its settings set with an external ID, then cleared
    cloud = arena.stack.services.cloud_settings
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "sealed")
    stored = cloud.put(arena.admin, ws.id, CHANGE)
    assert stored is not None
    # Then the external ID is nowhere in the table in the clear, and opens with KMS
    assert SECRET not in json.dumps(arena.stack.scan(), default=str)
    assert stored.external_id is not None
    # And the change's audit event names what changed, not the value
    [event] = [e for e in audit.organization_trail(arena.org.id) if e.subject_id == ws.id]
    assert (event.type, event.actor, event.details["aws_external_id"]) == (
        SET_EVENT,
        arena.admin.ref,
        "set",
    )
    assert SECRET not in json.dumps(event.details)
    # When they are cleared
    cloud.clear(arena.admin, ws.id)
    # Then the item holds no settings and no sealed value, and the clear is audited
    read = DynamoCloudSettingsStore().get(ws.id)
    assert read is not None
    assert (read.version, read.settings.empty, read.external_id) == (2, True, None)
    assert _trail(arena, ws.id) == [SET_EVENT, CLEARED_EVENT]


def test_a_stale_change_writes_neither_the_settings_nor_its_audit_event(arena: Arena) -> None:
    # Given settings at version 1
    cloud = arena.stack.services.cloud_settings
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "stale")
    cloud.put(arena.admin, ws.id, CHANGE)
    before = arena.stack.scan()
    # When a change names version 0 (read before the first), and a write made at the
    # store's level races past the service's own check
    with pytest.raises(ConcurrentChange):
        cloud.put(arena.admin, ws.id, CloudSettingsChange(), expected_version=0)
    current = DynamoCloudSettingsStore().get(ws.id)
    assert current is not None
    with pytest.raises(ConcurrentChange):
        DynamoCloudSettingsStore().put(
            current,
            org_id=arena.org.id,
            previous_version=0,
            event=AuditEvent(
                "evt-race", arena.org.id, ws.id, SET_EVENT, "user:x", current.updated_at, {}
            ),
        )
    # Then the table is exactly as it was: no settings, no audit event
    assert arena.stack.scan() == before


def test_a_run_pins_the_settings_in_its_one_read_and_one_write_and_keeps_them(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace with settings and a configuration
    cloud = arena.stack.services.cloud_settings
    ws = arena.stack.tenancy.create_workspace(arena.org.id, "pinning")
    cloud.put(arena.admin, ws.id, CHANGE)
    cv_id = uploaded_configuration(arena, ws.id)
    # (the organization's name, which the process keeps once read, read already)
    arena.stack.services.workspaces.organization_name(arena.org.id)
    sent = DynamoDBRequests(monkeypatch)
    # When a run is created
    run = with_region(arena.runs, arena, ws.id, cv_id)
    operations = list(sent.operations)
    # Then it read the settings with its workspace in its one read, and wrote once
    assert operations == ["BatchGetItem", "TransactWriteItems"]
    # And it pinned them; a later change of the settings leaves the run's as they were
    cloud.put(arena.admin, ws.id, CloudSettingsChange(aws_plan_role_arn=APPLY))
    pinned = RunInput.from_body(run_parts.require(run.id, "input").body).credentials
    assert pinned.decisions.aws is not None
    assert (pinned.decisions.aws.plan_role_arn, pinned.decisions.aws.apply_role_arn) == (
        PLAN,
        APPLY,
    )
    assert arena.runs.review(arena.admin, run.id)["input"]["credentials"] == (
        pinned.decisions.to_body()
    )
    # And the external ID it pinned opens with KMS to the value set then
    assert cloud.external_id(ws.id, pinned) == SECRET
    assert SECRET not in json.dumps(arena.stack.scan(), default=str)
