"""Bodies that cannot be read, or that would not fit, are 4xx with a code, on both APIs,
and write nothing: no item, no orphaned artifact."""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import requests

from runplane.client import Client, Connection
from runplane.services.artifacts import object_key
from runplane.store import workspaces as workspace_store
from runplane.store.models import ArtifactItem
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO

NON_UTF8 = b'{"name": "\xff\xfe"}'
NOT_JSON = b'{"name": '
DEEP = b"[" * 100_000 + b"]" * 100_000
# Parses, but nests deeper than any of our documents (and DynamoDB's 32 levels).
NESTED = json.dumps({"name": json.loads("[" * 60 + "]" * 60)}).encode()
UNREADABLE = {"non-utf-8": NON_UTF8, "not json": NOT_JSON, "deep": DEEP, "nested": NESTED}
NINE_KB = "v" * 9 * 1024


@dataclass
class Tenant:
    """An organization of its own, so counting its artifacts sees only this test's."""

    url: str
    organization: str
    org_id: str
    token: str

    def send(self, method: str, path: str, body: bytes | Any) -> requests.Response:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return requests.request(
            method,
            f"{self.url}{path}",
            data=data,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            timeout=60,
        )

    @property
    def client(self) -> Client:
        return Client(Connection(self.url, self.token, self.organization))

    def artifacts(self) -> tuple[list[str], list[str]]:
        """This organization's artifact records and stored objects."""
        mine = (ArtifactItem.org_id == self.org_id) & ArtifactItem.object_key.exists()
        records = sorted(a.artifact_id for a in ArtifactItem.scan(mine))
        settings = _settings()
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=settings.aws_endpoint_url)
        listed = s3.list_objects_v2(
            Bucket=settings.artifact_bucket, Prefix=object_key(self.org_id, "")
        )
        return records, sorted(o["Key"] for o in listed.get("Contents", []))


_local: list[Local] = []


def _settings() -> Any:
    services = _local[0].stack.services
    assert services is not None
    return services.settings


@pytest.fixture
def tenant(local: Local) -> Tenant:
    _local[:] = [local]
    name, token = local.other_organization(unique("bodies"))
    services = local.stack.services
    assert services is not None
    return Tenant(local.url, name, services.workspaces.organization_id_of(name), token)


def _run_api_error(response: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert body["message"]
    return body


def _cloud_api_error(response: requests.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["errors"][0]
    assert error["status"] == str(status)
    assert error["title"]
    assert error["detail"]
    return error


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
def test_an_unreadable_body_is_400_on_the_run_api(tenant: Tenant, kind: str) -> None:
    # Given a workspace of the organization
    ws = tenant.client.create_workspace(unique("unreadable"))
    # When bodies that are not UTF-8, not JSON, or nested too deeply are sent
    created = tenant.send("POST", "/api/v1/workspaces", UNREADABLE[kind])
    patched = tenant.send("PATCH", f"/api/v1/workspaces/{ws['id']}", UNREADABLE[kind])
    # Then each is 400 INVALID_BODY and nothing changed
    _run_api_error(created, 400, "INVALID_BODY")
    _run_api_error(patched, 400, "INVALID_BODY")
    assert (
        workspace_store.get_workspace(ws["id"], reads=IdentityMap()).approval_window_seconds is None
    )


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
def test_an_unreadable_body_is_400_on_the_cloud_api(tenant: Tenant, kind: str) -> None:
    # Given a workspace of the organization
    ws = tenant.client.create_workspace(unique("unreadable"))
    org = tenant.organization
    # When bodies that are not UTF-8, not JSON, or nested too deeply are sent
    created = tenant.send("POST", f"/api/v2/organizations/{org}/workspaces", UNREADABLE[kind])
    patched = tenant.send("PATCH", f"/api/v2/workspaces/{ws['id']}", UNREADABLE[kind])
    locked = tenant.send("POST", f"/api/v2/workspaces/{ws['id']}/actions/lock", UNREADABLE[kind])
    # (a state version is created under the caller's lock)
    assert tenant.send("POST", f"/api/v2/workspaces/{ws['id']}/actions/lock", b"").ok
    state = tenant.send("POST", f"/api/v2/workspaces/{ws['id']}/state-versions", UNREADABLE[kind])
    # Then each is a JSON:API 400 and the workspace is unchanged, with no state version
    for response in (created, patched, locked, state):
        assert _cloud_api_error(response, 400)["title"] == "invalid body"
    stored = workspace_store.get_workspace(ws["id"], reads=IdentityMap())
    assert stored.description is None
    assert stored.lock_reason is None
    assert stored.current_state_version_id is None
    versions = tenant.send("GET", f"/api/v2/workspaces/{ws['id']}/state-versions", b"")
    assert versions.json()["data"] == []


def test_workspace_tags_that_would_not_fit_are_refused(tenant: Tenant) -> None:
    # Given a workspace with one tag
    org = tenant.organization
    created = tenant.send(
        "POST",
        f"/api/v2/organizations/{org}/workspaces",
        {
            "data": {
                "type": "workspaces",
                "attributes": {"name": unique("tags"), "tag-names": ["a"]},
            }
        },
    )
    assert created.status_code == 201, created.text
    ws_id = created.json()["data"]["id"]
    # When 50 tags of 9 KB each (an item over DynamoDB's 400 KB) are set, or created with
    big: dict[str, Any] = {
        "data": {"type": "workspaces", "attributes": {"tag-names": [NINE_KB] * 50}}
    }
    patched = tenant.send("PATCH", f"/api/v2/workspaces/{ws_id}", big)
    big_name = unique("big-tags")
    big["data"]["attributes"]["name"] = big_name
    posted = tenant.send("POST", f"/api/v2/organizations/{org}/workspaces", big)
    # Then both are 422 naming the field, and nothing was written
    for response in (patched, posted):
        error = _cloud_api_error(response, 422)
        assert error["source"]["pointer"].startswith("/data/attributes/tag-names")
    assert workspace_store.get_workspace(ws_id, reads=IdentityMap()).tag_names == ("a",)
    found = tenant.send(
        "GET", f"/api/v2/organizations/{org}/workspaces/{big['data']['attributes']['name']}", b""
    )
    assert found.status_code == 404


def test_run_variables_that_would_not_fit_are_refused_before_anything_is_stored(
    tenant: Tenant,
) -> None:
    # Given an uploaded configuration in a workspace
    ws = tenant.client.create_workspace(unique("vars"))
    configuration = tenant.client.upload_configuration(ws["id"], HELLO)
    before = tenant.artifacts()
    attempts = {
        "60 values of 9 KB": {f"v{i}": NINE_KB for i in range(60)},
        "one value of 100 KB": {"big": "v" * 100 * 1024},
        "too many": {f"v{i}": "x" for i in range(101)},
        "a long name": {"n" * 200: "x"},
    }
    for label, variables in attempts.items():
        # When a run is created with them
        response = tenant.send(
            "POST",
            f"/api/v1/workspaces/{ws['id']}/runs",
            {
                "kind": "plan_only",
                "configuration_version_id": configuration["id"],
                "variables": variables,
            },
        )
        # Then it is refused with a code, naming the variables
        assert response.status_code in {413, 422}, (label, response.text)
        body = response.json()
        assert body["code"] in {"VARIABLES_TOO_LARGE", "INVALID_INPUT"}, (label, body)
        assert body["pointer"].startswith("/variables"), (label, body)
    # And no run, no artifact record and no stored object was left behind
    assert tenant.client._call("GET", f"/api/v1/workspaces/{ws['id']}/runs")["runs"] == []
    assert tenant.artifacts() == before


def test_a_lone_surrogate_escape_is_400_and_writes_nothing(tenant: Tenant) -> None:
    # Given an uploaded configuration in a workspace
    ws = tenant.client.create_workspace(unique("surrogate"))
    configuration = tenant.client.upload_configuration(ws["id"], HELLO)
    before = tenant.artifacts()
    # When a run is created with a variable whose value is a lone surrogate escape
    # (valid JSON syntax, but no Unicode text), and a workspace is renamed to one
    request = {"kind": "plan_only", "configuration_version_id": configuration["id"]}
    body = json.dumps({**request, "variables": {"v": "\ud800"}}).encode()
    run = tenant.send("POST", f"/api/v1/workspaces/{ws['id']}/runs", body)
    renamed = tenant.send(
        "PATCH",
        f"/api/v2/workspaces/{ws['id']}",
        b'{"data": {"type": "workspaces", "attributes": {"description": "\\udc80"}}}',
    )
    # Then both are 400 INVALID_BODY, never a server error
    _run_api_error(run, 400, "INVALID_BODY")
    _cloud_api_error(renamed, 400)
    # And no run, no artifact and no change was written
    assert tenant.client._call("GET", f"/api/v1/workspaces/{ws['id']}/runs")["runs"] == []
    assert tenant.artifacts() == before
    assert workspace_store.get_workspace(ws["id"], reads=IdentityMap()).description in (None, "")


def test_launch_controls_that_would_not_fit_are_refused(tenant: Tenant) -> None:
    # When an organization's launch controls name 50 regions of 9 KB
    response = tenant.send(
        "PUT", "/api/v1/launch-controls/organization", {"allowed_regions": [NINE_KB] * 50}
    )
    # Then it is 422 naming the field, and the controls are unchanged
    body = _run_api_error(response, 422, "INVALID_INPUT")
    assert body["pointer"].startswith("/allowed_regions")
    assert tenant.client.launch_controls("organization")["allowed_regions"] == []


def test_concurrent_finalizes_keep_one_configuration_artifact(tenant: Tenant) -> None:
    # Given a configuration uploaded to its inbox URL
    ws = tenant.client.create_workspace(unique("finalize"))
    created = tenant.send("POST", f"/api/v1/workspaces/{ws['id']}/configuration-versions", b"")
    assert created.status_code == 201, created.text
    upload = created.json()
    requests.put(upload["upload_url"], data=b"x" * 300_000, timeout=60).raise_for_status()
    before = tenant.artifacts()

    # When several finalizes of it race
    path = f"/api/v1/configuration-versions/{upload['id']}/actions/finalize"
    with ThreadPoolExecutor(max_workers=4) as pool:
        responses = list(pool.map(lambda _: tenant.send("POST", path, b""), range(4)))

    # Then one wins, the others are refused with a code, and exactly one artifact remains
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(200) == 1, [r.text for r in responses]
    assert all(s in {200, 404, 409} for s in statuses), statuses
    winner = next(r.json() for r in responses if r.status_code == 200)
    records, objects = tenant.artifacts()
    assert records == sorted([*before[0], winner["artifact_id"]])
    assert objects == sorted([*before[1], object_key(tenant.org_id, winner["artifact_id"])])


def test_a_malformed_content_length_is_400_from_the_gateway(local: Local) -> None:
    # Given a request whose Content-Length is not a number
    host, port = local.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(
            b"POST /api/v1/workspaces HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {local.admin_token}\r\n".encode()
            + b"Content-Length: abc\r\n\r\n{}"
        )
        # When the gateway reads it / Then it answers 400 rather than dropping the connection
        reply = connection.makefile("rb").readline()
    assert reply.startswith(b"HTTP/1.1 400 "), reply
