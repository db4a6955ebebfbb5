"""pytfe, the official Python TFE SDK, as an independent client of the Cloud API.

It speaks to the embedded stack over real HTTP with nothing Runplane-specific:
if pytfe can read, list, lock and fetch state here, so can other TFE clients.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from pytfe import TFEClient, TFEConfig
from pytfe.errors import AuthError, NotFound, TFEError
from pytfe.models import (
    StateVersionCreateOptions,
    StateVersionListOptions,
    WorkspaceCreateOptions,
    WorkspaceListOptions,
    WorkspaceLockOptions,
    WorkspaceUpdateOptions,
)

from runplane.domain.identity import Permission
from tests.e2e.conftest import Local, unique

TIMEOUT = 30

# A developer's CI token: everything but force-unlock.
DEVELOPER = (
    Permission.ORGANIZATION_READ,
    Permission.WORKSPACE_READ,
    Permission.WORKSPACE_CREATE,
    Permission.WORKSPACE_LOCK,
    Permission.STATE_READ,
    Permission.STATE_WRITE,
)


def client_for(local: Local, token: str | None = None) -> TFEClient:
    # No retries: a refused call must surface at once, not after back-off.
    config = TFEConfig(
        address=local.url,
        token=token or local.admin_token,
        timeout=TIMEOUT,
        max_retries=0,
        ca_bundle=None,  # plain HTTP on loopback: ignore any SSL_CERT_FILE
    )
    return TFEClient(config)


@pytest.fixture
def tfe(local: Local) -> Iterator[TFEClient]:
    client = client_for(local)
    try:
        yield client
    finally:
        client.close()


def raw_state(serial: int, lineage: str, outputs: dict[str, Any] | None = None) -> bytes:
    state = {
        "version": 4,
        "terraform_version": "1.0.3",
        "serial": serial,
        "lineage": lineage,
        "outputs": outputs or {},
        "resources": [],
    }
    return json.dumps(state, indent=2).encode("utf-8")


def md5_of(raw: bytes) -> str:
    return hashlib.md5(raw, usedforsecurity=False).hexdigest()


def publish_inline(local: Local, ws_id: str, serial: int, lineage: str, raw: bytes) -> str:
    """Publish ``raw`` over plain HTTP as the admin (who holds the lock); its version id."""
    body: dict[str, Any] = {
        "data": {
            "type": "state-versions",
            "attributes": {
                "serial": serial,
                "md5": md5_of(raw),
                "lineage": lineage,
                "state": base64.b64encode(raw).decode("ascii"),
            },
        }
    }
    response = requests.post(
        f"{local.url}/api/v2/workspaces/{ws_id}/state-versions",
        json=body,
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["data"]["id"])


# -- organizations and workspaces ---------------------------------------------------------


def test_reads_its_own_organization_and_not_another(local: Local, tfe: TFEClient) -> None:
    # Given the default organization, and another one
    other_org, _ = local.other_organization(unique("pytfe-other"))

    # When pytfe reads both
    org = tfe.organizations.read(local.organization)

    # Then its own organization is found, and the other one is not
    assert org.name == local.organization
    assert org.id == local.organization
    with pytest.raises(NotFound):
        tfe.organizations.read(other_org)


def test_creates_and_reads_a_workspace_by_name_and_by_id(local: Local, tfe: TFEClient) -> None:
    # Given a workspace created through pytfe
    name = unique("pytfe-read")
    created = tfe.workspaces.create(local.organization, WorkspaceCreateOptions(name=name))

    # When it is read by name and by id
    by_name = tfe.workspaces.read(name, organization=local.organization)
    by_id = tfe.workspaces.read_by_id(created.id)

    # Then both are the same unlocked workspace, in local execution mode
    assert created.name == name
    assert by_name.id == by_id.id == created.id
    assert by_name.name == by_id.name == name
    assert by_id.locked is False
    assert by_id.execution_mode == "local"


def test_a_missing_workspace_is_not_found(local: Local, tfe: TFEClient) -> None:
    # Given a name no workspace has
    name = unique("pytfe-missing")

    # When pytfe reads it by name, and a made-up id
    # Then both are NotFound
    with pytest.raises(NotFound):
        tfe.workspaces.read(name, organization=local.organization)
    with pytest.raises(NotFound):
        tfe.workspaces.read_by_id("ws-doesnotexist0000000000000")


def test_a_wrong_token_is_an_auth_error(local: Local) -> None:
    # Given a client with a token the stack never issued
    client = client_for(local, token="not-a-real-token")

    # When it reads the organization
    # Then pytfe raises its authentication error for the 401
    with client, pytest.raises(AuthError) as refused:
        client.organizations.read(local.organization)
    assert refused.value.status == 401


def test_lists_and_searches_workspaces_across_pages(
    local: Local, tfe: TFEClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three workspaces sharing a unique prefix
    prefix = unique("pytfe-list")
    names = sorted(f"{prefix}-{suffix}" for suffix in ("a", "b", "c"))
    for name in names:
        tfe.workspaces.create(local.organization, WorkspaceCreateOptions(name=name))
    pages: list[Any] = []
    transport = tfe._transport
    original = transport.request

    def recording(method: str, path: str, **kwargs: Any) -> Any:
        if method == "GET" and path.endswith("/workspaces"):
            pages.append((kwargs.get("params") or {}).get("page[number]"))
        return original(method, path, **kwargs)

    monkeypatch.setattr(transport, "request", recording)

    # When pytfe searches for the prefix one workspace per page
    found = list(
        tfe.workspaces.list(
            local.organization, WorkspaceListOptions(search=f"{prefix}-", page_size=1)
        )
    )

    # Then it follows the pagination through three pages and finds exactly those three
    assert sorted(str(w.name) for w in found) == names
    assert pages == [1, 2, 3]

    # And an unfiltered listing includes them, while a search for another name has none
    everything = {w.name for w in tfe.workspaces.list(local.organization)}
    assert set(names) <= everything
    assert (
        list(
            tfe.workspaces.list(
                local.organization, WorkspaceListOptions(search=f"{prefix}-nothing-matches")
            )
        )
        == []
    )


# -- locking ----------------------------------------------------------------------------------


def test_locks_and_unlocks_and_another_principal_cannot_take_the_lock(
    local: Local, tfe: TFEClient
) -> None:
    # Given a workspace, and a second principal with lock rights
    ws = tfe.workspaces.create(
        local.organization, WorkspaceCreateOptions(name=unique("pytfe-lock"))
    )
    other = client_for(local, local.token(DEVELOPER, unique("pytfe-other")))

    with other:
        # When the admin locks it through pytfe (bare {"reason": ...} body)
        locked = tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="pytfe test"))

        # Then it is locked, and locking again, even as the same holder, is a 409
        assert locked.locked is True
        assert tfe.workspaces.read_by_id(ws.id).locked is True
        with pytest.raises(TFEError) as relocked:
            tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="retry"))
        assert relocked.value.status == 409
        assert "already locked" in str(relocked.value)

        # And the second principal can neither lock nor unlock it
        with pytest.raises(TFEError) as refused_lock:
            other.workspaces.lock(ws.id, WorkspaceLockOptions(reason="mine"))
        assert refused_lock.value.status == 409
        with pytest.raises(TFEError) as refused_unlock:
            other.workspaces.unlock(ws.id)
        assert refused_unlock.value.status == 409
        assert "is locked by" in str(refused_unlock.value)
        assert tfe.workspaces.read_by_id(ws.id).locked is True

        # When the holder unlocks it
        unlocked = tfe.workspaces.unlock(ws.id)

        # Then it is unlocked, and the second principal may now lock it
        assert unlocked.locked is False
        assert other.workspaces.lock(ws.id, WorkspaceLockOptions(reason="mine")).locked is True
        with pytest.raises(TFEError) as refused:
            tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="back"))
        assert refused.value.status == 409

        # And an admin's force-unlock releases anyone's lock
        assert tfe.workspaces.force_unlock(ws.id).locked is False


# -- state ------------------------------------------------------------------------------------


def test_reads_and_downloads_the_current_state_version(local: Local, tfe: TFEClient) -> None:
    # Given a workspace with no state yet
    ws = tfe.workspaces.create(
        local.organization, WorkspaceCreateOptions(name=unique("pytfe-state"))
    )
    with pytest.raises(NotFound):
        tfe.state_versions.read_current(ws.id)

    # ... then serial 1 and serial 2 published over HTTP under the admin's lock
    tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="publish"))
    lineage = unique("lineage")
    first = raw_state(1, lineage)
    publish_inline(local, ws.id, 1, lineage, first)
    raw = raw_state(2, lineage, {"endpoint": {"value": "https://example.test", "type": "string"}})
    sv_id = publish_inline(local, ws.id, 2, lineage, raw)
    tfe.workspaces.unlock(ws.id)

    # When pytfe reads the current state version and downloads it
    sv = tfe.state_versions.read_current(ws.id)
    downloaded = tfe.state_versions.download_current(ws.id)
    by_id = tfe.state_versions.download(sv_id)

    # Then it is serial 2, finalized, and its bytes are exactly what was published
    assert sv.id == sv_id
    assert sv.serial == 2
    assert sv.status == "finalized"
    assert sv.hosted_state_download_url
    assert downloaded == raw
    assert by_id == raw
    assert tfe.workspaces.read_by_id(ws.id).locked is False

    # And its outputs are readable through pytfe too
    outputs = list(tfe.state_version_outputs.read_current(ws.id))
    assert [(o.name, o.value, o.sensitive) for o in outputs] == [
        ("endpoint", "https://example.test", False)
    ]


def test_publishes_inline_state_through_pytfe_and_a_retry_is_idempotent(
    local: Local, tfe: TFEClient
) -> None:
    # Given a workspace locked by the admin
    ws = tfe.workspaces.create(
        local.organization, WorkspaceCreateOptions(name=unique("pytfe-inline"))
    )
    tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="publish"))
    lineage = unique("lineage")
    raw = raw_state(1, lineage)
    options = StateVersionCreateOptions(
        serial=1,
        md5=md5_of(raw),
        lineage=lineage,
        state=base64.b64encode(raw).decode("ascii"),
    )

    # When pytfe creates the state version inline, then retries the same create
    created = tfe.state_versions.create(ws.id, options)
    retried = tfe.state_versions.create(ws.id, options)

    # Then both name the same version, which is current and downloads byte for byte
    assert retried.id == created.id
    assert tfe.state_versions.read_current(ws.id).id == created.id
    assert tfe.state_versions.download(created.id) == raw


def test_publishes_through_pytfe_upload_urls(local: Local, tfe: TFEClient) -> None:
    # Given a workspace locked by the admin, by name
    name = unique("pytfe-upload")
    ws = tfe.workspaces.create(local.organization, WorkspaceCreateOptions(name=name))
    tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="publish"))
    lineage = unique("lineage")
    raw = raw_state(1, lineage, {"count": {"value": 3, "type": "number"}})

    # When pytfe uploads it the modern way (create without state, PUT to the upload URL)
    sv = tfe.state_versions.upload(
        name,
        raw_state=raw,
        raw_json_state=b'{"format_version":"1.0"}',
        options=StateVersionCreateOptions(serial=1, md5=md5_of(raw), lineage=lineage),
        organization=local.organization,
    )

    # Then the version is finalized and current, and downloads byte for byte
    assert sv.status == "finalized"
    assert tfe.state_versions.read_current(ws.id).id == sv.id
    assert tfe.state_versions.download_current(ws.id) == raw


def test_another_principal_cannot_publish_while_the_admin_holds_the_lock(
    local: Local, tfe: TFEClient
) -> None:
    # Given a workspace locked by the admin, and a developer's client
    ws = tfe.workspaces.create(
        local.organization, WorkspaceCreateOptions(name=unique("pytfe-contend"))
    )
    tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="mine"))
    lineage = unique("lineage")
    raw = raw_state(1, lineage)

    developer = client_for(local, local.token(DEVELOPER, unique("pytfe-dev")))
    options = StateVersionCreateOptions(
        serial=1, md5=md5_of(raw), lineage=lineage, state=base64.b64encode(raw).decode("ascii")
    )

    # When the developer publishes state through pytfe
    with developer, pytest.raises(TFEError) as refused:
        developer.state_versions.create(ws.id, options)

    # Then it is refused with 409, and the workspace still has no state
    assert refused.value.status == 409
    assert "will only accept state uploads from them" in str(refused.value)
    with pytest.raises(NotFound):
        tfe.state_versions.read_current(ws.id)


# -- listings: organizations, state versions, outputs -----------------------------------------


def test_lists_only_its_own_organization(local: Local, tfe: TFEClient) -> None:
    # Given the default organization, and another one with its own admin
    other_org, other_token = local.other_organization(unique("pytfe-orgs"))

    # When each admin lists organizations through pytfe
    mine = [org.name for org in tfe.organizations.list()]
    with client_for(local, other_token) as other:
        theirs = [org.name for org in other.organizations.list()]

    # Then each sees exactly its own
    assert mine == [local.organization]
    assert theirs == [other_org]


def published_workspace(local: Local, tfe: TFEClient, prefix: str) -> tuple[Any, list[str]]:
    """A workspace holding serials 1 to 3 (3 with a plain and a sensitive output)."""
    ws = tfe.workspaces.create(local.organization, WorkspaceCreateOptions(name=unique(prefix)))
    tfe.workspaces.lock(ws.id, WorkspaceLockOptions(reason="publish"))
    lineage = unique("lineage")
    ids = [publish_inline(local, ws.id, n, lineage, raw_state(n, lineage)) for n in (1, 2)]
    outputs = {
        "endpoint": {"value": "https://example.test", "type": "string"},
        "password": {"value": "hunter2", "type": "string", "sensitive": True},
        "zones": {"value": ["a", "b"], "type": ["list", "string"]},
    }
    ids.append(publish_inline(local, ws.id, 3, lineage, raw_state(3, lineage, outputs)))
    tfe.workspaces.unlock(ws.id)
    return ws, ids


def test_lists_state_versions_by_organization_and_workspace_name(
    local: Local, tfe: TFEClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace holding three state versions
    ws, ids = published_workspace(local, tfe, "pytfe-svlist")
    pages: list[Any] = []
    transport = tfe._transport
    original = transport.request

    def recording(method: str, path: str, **kwargs: Any) -> Any:
        if method == "GET" and "/state-versions" in path:
            pages.append((kwargs.get("params") or {}).get("page[number]"))
        return original(method, path, **kwargs)

    monkeypatch.setattr(transport, "request", recording)

    # When pytfe lists them by names, one per page
    options = StateVersionListOptions(organization=local.organization, workspace=ws.name)
    listed = list(tfe.state_versions.list(options))
    paged = list(
        tfe.state_versions.list(
            StateVersionListOptions(organization=local.organization, workspace=ws.name, page_size=1)
        )
    )

    # Then it gets all three, newest first, finalized, on one page or across three
    assert [sv.id for sv in listed] == list(reversed(ids))
    assert [sv.serial for sv in listed] == [3, 2, 1]
    assert {sv.status for sv in listed} == {"finalized"}
    assert [sv.id for sv in paged] == list(reversed(ids))
    assert pages == [1, 1, 2, 3]


def test_state_versions_of_another_organization_are_not_found(local: Local, tfe: TFEClient) -> None:
    # Given a workspace with state in the default organization, and another org's admin
    ws, ids = published_workspace(local, tfe, "pytfe-svforeign")
    other_org, other_token = local.other_organization(unique("pytfe-svother"))

    with client_for(local, other_token) as other:
        # When the other admin lists them under either organization's name, or reads
        # the versions' outputs
        # Then each is NotFound
        for org in (local.organization, other_org):
            with pytest.raises(NotFound):
                list(
                    other.state_versions.list(
                        StateVersionListOptions(organization=org, workspace=ws.name)
                    )
                )
        with pytest.raises(NotFound):
            list(other.state_versions.list_outputs(ids[-1]))
        output_ids = [o.id for o in tfe.state_versions.list_outputs(ids[-1])]
        for output_id in output_ids:
            with pytest.raises(NotFound):
                other.state_version_outputs.read(output_id)


def test_lists_a_versions_outputs_and_reads_each_by_id(local: Local, tfe: TFEClient) -> None:
    # Given a state version with a plain, a sensitive and a list output, and an older one
    _, ids = published_workspace(local, tfe, "pytfe-outputs")

    # When pytfe lists the outputs of the newest and of the first version
    outputs = list(tfe.state_versions.list_outputs(ids[-1]))
    first = list(tfe.state_versions.list_outputs(ids[0]))

    # Then the listing has each output with TFE's types, and hides the sensitive value
    assert [(o.name, o.type, o.sensitive, o.value) for o in outputs] == [
        ("endpoint", "string", False, "https://example.test"),
        ("password", "string", True, None),
        ("zones", "array", False, ["a", "b"]),
    ]
    assert outputs[2].detailed_type == ["list", "string"]
    assert first == []

    # When each output is read by its ID
    read = {o.name: tfe.state_version_outputs.read(o.id) for o in outputs}

    # Then each is the same output, and a state reader sees the sensitive value there
    # (as TFE: the whole state is downloadable by the same reader anyway)
    assert {name: o.value for name, o in read.items()} == {
        "endpoint": "https://example.test",
        "password": "hunter2",
        "zones": ["a", "b"],
    }
    assert {o.id for o in read.values()} == {o.id for o in outputs}

    # And an ID naming no output of that version is NotFound
    with pytest.raises(NotFound):
        tfe.state_version_outputs.read(outputs[0].id + "-missing")


def test_sets_and_reads_an_ephemeral_workspaces_auto_destroy(local: Local, tfe: TFEClient) -> None:
    # Given a workspace created through pytfe
    name = unique("pytfe-ephemeral")
    created = tfe.workspaces.create(local.organization, WorkspaceCreateOptions(name=name))
    at = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)

    # When its auto-destroy time is set as go-tfe sends it (pytfe cannot encode its own
    # datetime), and its inactivity through pytfe
    patched = requests.patch(
        f"{local.url}/api/v2/workspaces/{created.id}",
        json={"data": {"type": "workspaces", "attributes": {"auto-destroy-at": at.isoformat()}}},
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )
    assert patched.status_code == 200, patched.text
    updated = tfe.workspaces.update(
        name,
        WorkspaceUpdateOptions(auto_destroy_activity_duration="14d"),
        organization=local.organization,
    )

    # Then pytfe reads both back, and Runplane's own API shows them armed
    assert (updated.auto_destroy_at, updated.auto_destroy_activity_duration) == (at, "14d")
    read = tfe.workspaces.read(name, organization=local.organization)
    assert (read.auto_destroy_at, read.auto_destroy_activity_duration) == (at, "14d")
    armed = local.client.auto_destroy(read.id)
    assert (armed["armed"], armed["destroy_at"], armed["auto_apply"]) == (
        True,
        at.isoformat(),
        False,
    )

    # When an impossible length is sent with another change, then it is refused naming
    # the attribute, and nothing changed
    with pytest.raises(TFEError) as refused:
        tfe.workspaces.update(
            name,
            WorkspaceUpdateOptions(auto_destroy_activity_duration="2w", description="x"),
            organization=local.organization,
        )
    assert "duration" in str(refused.value)
    unchanged = tfe.workspaces.read(name, organization=local.organization)
    assert (unchanged.description, unchanged.auto_destroy_activity_duration) == ("", "14d")

    # When both are sent null, then the auto-destroy is cleared
    cleared = requests.patch(
        f"{local.url}/api/v2/workspaces/{created.id}",
        json={
            "data": {
                "type": "workspaces",
                "attributes": {"auto-destroy-at": None, "auto-destroy-activity-duration": None},
            }
        },
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["data"]["attributes"]["auto-destroy-at"] is None
    assert local.client.auto_destroy(read.id) == {"workspace_id": read.id, "armed": False}
