"""The security audit trail over real HTTP: each listed event writes exactly one typed
record (actor, source address, organization, object, outcome), nothing secret, and one
organization never reads another's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from runplane.client import ApiError, Client, Connection
from runplane.domain.audit import DEPLOYMENT_TRAIL, AuditQuery
from runplane.domain.identity import ROLES, Permission
from runplane.store.security_records import trail_page
from tests.e2e.conftest import Local, unique

SECRET_VALUE = "hunter2-never-in-the-trail"


def _records(client: Client, **query: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = client.audit(cursor=cursor, size=2, **query)
        records.extend(page["records"])
        cursor = page["next_cursor"]
        if not cursor:
            return records


def test_each_listed_event_writes_exactly_one_record_and_nothing_secret(local: Local) -> None:
    # Given an admin of a fresh organization (so its trail holds only this test's records)
    name, admin_token = local.other_organization(unique("audited"))
    admin = Client(Connection(local.url, admin_token, name))
    started = datetime.now(UTC) - timedelta(seconds=1)
    workspace = admin.create_workspace(unique("ws"))

    # When each listed event happens once over the API
    token = admin.create_token(unique("ci"), "developer")
    admin.revoke_token(token["id"])
    admin.set_variable(workspace["id"], "db_password", SECRET_VALUE, sensitive=True)
    admin.delete_variable(workspace["id"], "db_password")
    created_set = admin.create_variable_set(unique("set"))
    admin.delete_variable_set(created_set["id"])

    # Then each wrote exactly one record, in order, with its actor, address and object
    records = _records(admin, since=started.isoformat())
    assert [r["action"] for r in records] == [
        "token.created",
        "token.revoked",
        "variable.set",
        "variable.deleted",
        "variable_set.changed",
        "variable_set.deleted",
    ]
    org_ids = {r["organization_id"] for r in records}
    assert len(org_ids) == 1
    assert DEPLOYMENT_TRAIL not in org_ids
    assert all(r["outcome"] == "succeeded" for r in records)
    assert all(r["source_address"] == "127.0.0.1" for r in records)
    assert all(r["actor"].startswith("token:") for r in records)
    assert records[0]["object"] == {"kind": "token", "id": token["id"]}
    assert records[2]["object"] == {"kind": "workspace", "id": workspace["id"]}
    assert records[2]["details"]["key"] == "db_password"
    assert records[4]["object"] == {"kind": "variable_set", "id": created_set["id"]}
    # And no record holds a secret: the token's, or the variable's value
    text = json.dumps(records)
    assert token["token"] not in text
    assert SECRET_VALUE not in text


def test_a_refused_webhook_writes_one_refused_record_and_nothing_else(local: Local) -> None:
    # Given a GitHub delivery with a signature that does not verify
    delivery = "11111111-2222-3333-4444-" + unique("d")[-12:].rjust(12, "0")
    body = json.dumps({"secret_payload": SECRET_VALUE}).encode()
    before = datetime.now(UTC) - timedelta(seconds=1)

    # When it is posted
    answer = requests.post(
        f"{local.url}/webhooks/github",
        data=body,
        headers={
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": "sha256=" + "0" * 64,
            "Content-Type": "application/json",
        },
        timeout=30,
    )

    # Then it is refused and the deployment's trail holds one refused record of it
    assert answer.status_code == 401
    page = trail_page(DEPLOYMENT_TRAIL, AuditQuery(since=before, size=100))
    mine = [r for r in page.records if r.details.get("delivery_id") == delivery]
    assert len(mine) == 1
    record = mine[0]
    assert record.action == "webhook.refused"
    assert record.outcome == "refused"
    assert record.source_address == "127.0.0.1"
    assert SECRET_VALUE not in json.dumps(record.to_dict())


def test_one_organization_never_reads_anothers_trail_and_only_admins_read_it(
    local: Local,
) -> None:
    # Given two organizations, each with a token created
    first_name, first_token = local.other_organization(unique("first"))
    second_name, second_token = local.other_organization(unique("second"))
    first = Client(Connection(local.url, first_token, first_name))
    second = Client(Connection(local.url, second_token, second_name))
    made = first.create_token(unique("first-ci"), "reader")

    # When the second reads its trail / Then the first's record is not in it
    assert made["id"] not in json.dumps(_records(second))
    assert any(r["object"]["id"] == made["id"] for r in _records(first))

    # And an operator (not an admin) is refused
    operator = local.token(ROLES["operator"], name="operator")
    with pytest.raises(ApiError) as refused:
        Client(Connection(local.url, operator, local.organization)).audit()
    assert refused.value.status == 403
    assert Permission.AUDIT_READ in ROLES["admin"]


def test_the_trail_pages_by_time_range(local: Local) -> None:
    # Given three token records
    name, admin_token = local.other_organization(unique("paged"))
    admin = Client(Connection(local.url, admin_token, name))
    for _ in range(3):
        admin.create_token(unique("t"), "reader")
    everything = _records(admin)
    assert len(everything) == 3

    # When the range starts at the second record / Then the first is left out
    later = _records(admin, since=everything[1]["at"])
    assert [r["id"] for r in later] == [r["id"] for r in everything[1:]]
    # And the range ending there holds only the first (until is exclusive)
    earlier = _records(admin, until=everything[1]["at"])
    assert [r["id"] for r in earlier] == [everything[0]["id"]]


def test_a_settings_change_is_recorded_and_every_record_is_exported_once(local: Local) -> None:
    # Given two organizations, each changing something recorded
    first_name, first_token = local.other_organization(unique("export-a"))
    second_name, second_token = local.other_organization(unique("export-b"))
    first = Client(Connection(local.url, first_token, first_name))
    second = Client(Connection(local.url, second_token, second_name))
    workspace = first.create_workspace(unique("ws"))
    first.update_workspace(
        workspace["id"],
        second_approval={"destroy_runs": True, "separation_of_duties": True},
    )
    made = second.create_token(unique("ci"), "reader")

    # Then the settings change wrote one record naming what changed
    (changed,) = _records(first, action="workspace.settings_changed")
    assert changed["object"] == {"kind": "workspace", "id": workspace["id"]}
    assert changed["details"]["changed"] == "second_approval"
    assert changed["details"]["separation_of_duties"] == "true"
    assert changed["source_address"] == "127.0.0.1"

    # When the export runs with everything written so far settled
    assert local.stack.services is not None
    exporter = local.stack.services.audit_export
    settled = datetime.now(UTC) + timedelta(seconds=1)
    while exporter.export(settled_before=settled).records:
        pass

    # Then each organization's records are in its own files, each line once
    root = local.stack.data_dir / "audit"
    for org_records in (_records(first), _records(second)):
        org_id = org_records[0]["organization_id"]
        lines = [
            json.loads(line)
            for path in sorted((root / org_id).rglob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]
        assert [line["id"] for line in lines] == [r["id"] for r in org_records]
        assert all(line["organization_id"] == org_id for line in lines)
    # And no token is in any file
    everything = "".join(p.read_text() for p in root.rglob("*.jsonl"))
    assert made["token"] not in everything
