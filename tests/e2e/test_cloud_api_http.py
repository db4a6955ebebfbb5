"""The TFE-compatible Cloud API over real HTTP, as a client with no SDK sees it.

Every call goes through the embedded stack's loopback gateway (authorizer
included) with ``requests``; each test works on fresh workspaces.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from runplane.domain.identity import Permission
from runplane.services import state as state_service
from tests.e2e.conftest import Local, unique

JSONAPI = "application/vnd.api+json"
API_VERSION = "2.5"
TIMEOUT = 30
LIMIT = 10_000_000  # the state size limit, in decoded bytes
GATEWAY_LIMIT = 10 * 1024 * 1024  # API Gateway's request body limit
HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello"

# Everything but force-unlock: what a developer's CI token typically holds.
DEVELOPER = (
    Permission.ORGANIZATION_READ,
    Permission.WORKSPACE_READ,
    Permission.WORKSPACE_CREATE,
    Permission.WORKSPACE_LOCK,
    Permission.STATE_READ,
    Permission.STATE_WRITE,
)

# -- helpers ----------------------------------------------------------------------------


def call(
    local: Local,
    method: str,
    path: str,
    *,
    token: str | None = None,
    auth: bool = True,
    **kwargs: Any,
) -> requests.Response:
    """One request to the stack; ``path`` may also be an absolute URL it handed out."""
    url = path if path.startswith("http") else f"{local.url}{path}"
    headers = dict(kwargs.pop("headers", None) or {})
    if auth:
        headers["Authorization"] = f"Bearer {token or local.admin_token}"
    return requests.request(method, url, headers=headers, timeout=TIMEOUT, **kwargs)


def raw_state(serial: int, lineage: str, outputs: dict[str, Any] | None = None) -> bytes:
    state = {
        "version": 4,
        "terraform_version": "1.0.3",
        "serial": serial,
        "lineage": lineage,
        "outputs": outputs or {},
        "resources": [],
    }
    # As Terraform writes it: UTF-8, non-ASCII characters unescaped.
    return json.dumps(state, indent=2, ensure_ascii=False).encode("utf-8")


def padded_state(serial: int, lineage: str, size: int) -> bytes:
    """A valid raw state of exactly ``size`` bytes (an output carries the padding)."""
    empty = raw_state(serial, lineage, {"pad": {"value": "", "type": "string"}})
    raw = raw_state(
        serial, lineage, {"pad": {"value": "x" * (size - len(empty)), "type": "string"}}
    )
    assert len(raw) == size
    return raw


def md5_of(raw: bytes) -> str:
    return hashlib.md5(raw, usedforsecurity=False).hexdigest()


def sv_body(
    serial: int,
    lineage: str,
    raw: bytes | None,
    *,
    md5: str | None = None,
    inline: bool = True,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "serial": serial,
        "md5": md5 or md5_of(raw or b""),
        "lineage": lineage,
    }
    if inline and raw is not None:
        attributes["state"] = base64.b64encode(raw).decode("ascii")
    return {"data": {"type": "state-versions", "attributes": attributes}}


def assert_api_version(response: requests.Response) -> None:
    assert response.headers.get("TFP-API-Version") == API_VERSION, response.headers


def assert_error(
    response: requests.Response,
    status: int,
    *,
    detail: str | None = None,
    pointer: str | None = None,
) -> dict[str, Any]:
    """A JSON:API error document with exactly one error, and the version header."""
    assert response.status_code == status, response.text
    assert_api_version(response)
    assert response.headers["Content-Type"].startswith(JSONAPI)
    errors = response.json()["errors"]
    assert len(errors) == 1
    (error,) = errors
    assert error["status"] == str(status)
    assert error["title"]
    assert error["detail"]
    if detail is not None:
        assert detail in error["detail"], error
    if pointer is not None:
        assert error["source"] == {"pointer": pointer}, error
    return dict(error)


def create_workspace(local: Local, prefix: str) -> str:
    body = {"data": {"type": "workspaces", "attributes": {"name": unique(prefix)}}}
    response = call(
        local, "POST", f"/api/v2/organizations/{local.organization}/workspaces", json=body
    )
    assert response.status_code == 201, response.text
    return str(response.json()["data"]["id"])


def lock(local: Local, ws_id: str, *, token: str | None = None) -> requests.Response:
    return call(
        local,
        "POST",
        f"/api/v2/workspaces/{ws_id}/actions/lock",
        token=token,
        json={"data": {"type": "", "attributes": {"reason": "Locked by tests"}}},
    )


def unlock(local: Local, ws_id: str, *, token: str | None = None) -> requests.Response:
    return call(local, "POST", f"/api/v2/workspaces/{ws_id}/actions/unlock", token=token)


def create_sv(
    local: Local, ws_id: str, body: dict[str, Any], *, token: str | None = None
) -> requests.Response:
    return call(local, "POST", f"/api/v2/workspaces/{ws_id}/state-versions", token=token, json=body)


def publish(local: Local, ws_id: str, serial: int, lineage: str, raw: bytes) -> dict[str, Any]:
    """Publish ``raw`` inline as the admin, who must hold the lock."""
    response = create_sv(local, ws_id, sv_body(serial, lineage, raw))
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


def current(local: Local, ws_id: str) -> requests.Response:
    return call(local, "GET", f"/api/v2/workspaces/{ws_id}/current-state-version")


def current_id(local: Local, ws_id: str) -> str | None:
    response = current(local, ws_id)
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    return str(response.json()["data"]["id"])


def history(local: Local, ws_id: str) -> list[dict[str, Any]]:
    response = call(local, "GET", f"/api/v2/workspaces/{ws_id}/state-versions")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def download(local: Local, version: dict[str, Any]) -> bytes:
    response = call(local, "GET", version["attributes"]["hosted-state-download-url"])
    assert response.status_code == 200, response.text
    return response.content


def workspace(local: Local, ws_id: str) -> dict[str, Any]:
    response = call(local, "GET", f"/api/v2/workspaces/{ws_id}")
    assert response.status_code == 200, response.text
    return dict(response.json()["data"])


# -- discovery, handshake, authentication -------------------------------------------------


def test_discovery_document_is_plain_json_naming_the_tfe_services(local: Local) -> None:
    # Given the stack, and no credentials
    # When a client fetches the service discovery document
    response = call(local, "GET", "/.well-known/terraform.json", auth=False)

    # Then it is application/json (not JSON:API) and names every TFE version at /api/v2/
    assert response.status_code == 200
    assert response.headers["Content-Type"].split(";")[0].strip() == "application/json"
    assert_api_version(response)
    services = response.json()
    for name in ("tfe.v2", "tfe.v2.1", "tfe.v2.2"):
        assert services[name] == "/api/v2/"


def test_ping_answers_204_with_the_api_version(local: Local) -> None:
    # Given no credentials
    # When a client pings the API
    response = call(local, "GET", "/api/v2/ping", auth=False)

    # Then it answers 204 with TFP-API-Version 2.5, which the cloud block requires
    assert response.status_code == 204
    assert_api_version(response)
    assert response.content == b""


def test_a_wrong_token_is_refused_with_401(local: Local) -> None:
    # Given a token the stack never issued
    # When it is used on a protected route
    response = call(
        local, "GET", f"/api/v2/organizations/{local.organization}", token="not-a-real-token"
    )

    # Then the gateway refuses it with 401, still carrying the API version
    assert_error(response, 401)


def test_a_missing_authorization_header_is_refused_with_401(local: Local) -> None:
    # Given a request without an Authorization header
    # When it asks for a protected route
    response = call(local, "GET", f"/api/v2/organizations/{local.organization}", auth=False)

    # Then it is refused with 401 and the API version header
    assert_error(response, 401)


def test_an_unknown_endpoint_is_a_jsonapi_404_with_the_api_version(local: Local) -> None:
    # Given an authenticated caller
    # When it asks for a route the API does not have
    response = call(local, "GET", "/api/v2/no-such-endpoint")

    # Then it gets a JSON:API 404, with the API version header
    assert_error(response, 404)


def test_the_organization_run_queue_is_empty_and_only_the_organizations_own(
    local: Local,
) -> None:
    # Given an organization, and another one
    other_org, _ = local.other_organization(unique("queue-org"))

    # When Terraform's remote backend reads the organization's run queue (it does while
    # a run is pending or confirmed)
    queue = call(local, "GET", f"/api/v2/organizations/{local.organization}/runs/queue")

    # Then it is an empty page: runs wait per workspace, and launches over the limits are
    # refused rather than queued
    assert queue.status_code == 200, queue.text
    body = queue.json()
    assert body["data"] == []
    assert body["meta"]["pagination"]["total-count"] == 0
    # And another organization's queue is not found
    assert_error(call(local, "GET", f"/api/v2/organizations/{other_org}/runs/queue"), 404)


# -- tenancy ----------------------------------------------------------------------------------


def test_another_organizations_workspace_looks_exactly_like_a_missing_one(local: Local) -> None:
    # Given a workspace of another organization
    other_org, other_token = local.other_organization(unique("other-org"))
    name = unique("http-foreign")
    created = call(
        local,
        "POST",
        f"/api/v2/organizations/{other_org}/workspaces",
        token=other_token,
        json={"data": {"type": "workspaces", "attributes": {"name": name}}},
    )
    assert created.status_code == 201, created.text
    foreign_id = created.json()["data"]["id"]
    missing_id = foreign_id[:-4] + "zzzz" if not foreign_id.endswith("zzzz") else "ws-missing"
    missing_org = unique("no-such-org")

    # When the default organization's admin asks for it by id and by name
    by_id = call(local, "GET", f"/api/v2/workspaces/{foreign_id}")
    by_name = call(local, "GET", f"/api/v2/organizations/{other_org}/workspaces/{name}")
    # ... and for a truly missing workspace and organization
    missing_by_id = call(local, "GET", f"/api/v2/workspaces/{missing_id}")
    missing_by_name = call(local, "GET", f"/api/v2/organizations/{missing_org}/workspaces/{name}")

    # Then both are 404 with the same document as the missing ones (but the identifier)
    foreign = assert_error(by_id, 404)
    missing = assert_error(missing_by_id, 404)
    assert json.dumps(foreign).replace(foreign_id, "ID") == json.dumps(missing).replace(
        missing_id, "ID"
    )
    foreign = assert_error(by_name, 404)
    missing = assert_error(missing_by_name, 404)
    assert json.dumps(foreign).replace(other_org, "ORG") == json.dumps(missing).replace(
        missing_org, "ORG"
    )

    # And neither its organization, its listing, its lock nor its state is reachable
    assert_error(call(local, "GET", f"/api/v2/organizations/{other_org}"), 404)
    assert_error(call(local, "GET", f"/api/v2/organizations/{other_org}/entitlement-set"), 404)
    assert_error(call(local, "GET", f"/api/v2/organizations/{other_org}/workspaces"), 404)
    assert_error(lock(local, foreign_id), 404)
    assert_error(current(local, foreign_id), 404)
    owner_view = call(local, "GET", f"/api/v2/workspaces/{foreign_id}", token=other_token)
    assert owner_view.status_code == 200
    assert owner_view.json()["data"]["attributes"]["locked"] is False


# -- locking ----------------------------------------------------------------------------------


def test_unlock_by_a_non_holder_is_409_naming_the_holder(local: Local) -> None:
    # Given a workspace locked by the admin
    ws_id = create_workspace(local, "http-unlock-other")
    assert lock(local, ws_id).status_code == 200
    other = local.token(DEVELOPER, unique("other"))

    # When another principal tries to unlock it
    response = unlock(local, ws_id, token=other)

    # Then it is 409 "is locked by ...", and the lock stays
    assert_error(response, 409, detail="is locked by")
    assert workspace(local, ws_id)["attributes"]["locked"] is True


def test_unlocking_an_unlocked_workspace_is_409_not_locked(local: Local) -> None:
    # Given a workspace nobody locked
    ws_id = create_workspace(local, "http-unlock-free")

    # When it is unlocked
    response = unlock(local, ws_id)

    # Then it is 409 "not locked"
    assert_error(response, 409, detail="not locked")


def test_a_plain_reason_body_locks_and_a_second_lock_is_409_whoever_asks(local: Local) -> None:
    # Given a fresh workspace
    ws_id = create_workspace(local, "http-lock-plain")

    # When it is locked with a bare {"reason": ...} body (as pytfe sends)
    first = call(local, "POST", f"/api/v2/workspaces/{ws_id}/actions/lock", json={"reason": "bare"})

    # Then it is locked
    assert first.status_code == 200, first.text
    assert_api_version(first)
    assert first.headers["Content-Type"].startswith(JSONAPI)
    assert first.json()["data"]["attributes"]["locked"] is True
    locked = workspace(local, ws_id)

    # When the same token locks it again (a second process sharing the token), and
    # then a second principal does
    again = lock(local, ws_id)
    other = local.token(DEVELOPER, unique("other"))
    theirs = lock(local, ws_id, token=other)

    # Then both are 409 "already locked", naming the holder and what to do, as TFE
    # answers (the CLI maps any 409 on lock to "workspace already locked")
    for refused in (again, theirs):
        error = assert_error(refused, 409, detail="is already locked by User")
        assert "force-unlock" in error["detail"]
    # And nothing changed: the first lock stands
    assert workspace(local, ws_id) == locked

    # And the holder still unlocks it, after which a lock succeeds again
    assert unlock(local, ws_id).status_code == 200
    assert workspace(local, ws_id)["attributes"]["locked"] is False
    assert lock(local, ws_id, token=other).status_code == 200


def test_a_workspace_held_by_a_run_shows_locked_by_that_run(local: Local) -> None:
    # Given a managed run waiting for approval: it holds the writer reservation, but
    # not yet the apply lock
    ws_id = str(local.client.create_workspace(unique("http-held"))["id"])
    run = local.client.create_run(ws_id, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    try:
        # When the workspace is read, and a native client tries to lock it
        held = workspace(local, ws_id)
        refused = lock(local, ws_id)

        # Then the workspace says it is locked, by that run
        assert held["attributes"]["locked"] is True
        assert held["relationships"]["locked-by"] == {"data": {"id": run["id"], "type": "runs"}}

        # And the 409 names the run and says what to do
        error = assert_error(refused, 409, detail=f"is held by run {run['id']}")
        assert "(status awaiting_approval)" in error["detail"]
        assert "wait for that run to finish, or cancel it" in error["detail"]
        assert f"runplane run show {run['id']}" in error["detail"]
    finally:
        local.client.decide(run["id"], "reject", "test over")
        local.client.watch(run["id"], timeout=60)

    # And once the run ended the workspace is free again
    free = workspace(local, ws_id)
    assert free["attributes"]["locked"] is False
    assert "locked-by" not in free["relationships"]


def test_force_unlock_needs_the_force_unlock_permission(local: Local) -> None:
    # Given a workspace locked by the admin, and a token without workspace:force-unlock
    ws_id = create_workspace(local, "http-force")
    assert lock(local, ws_id).status_code == 200
    developer = local.token(DEVELOPER, unique("developer"))

    # When that token force-unlocks it
    refused = call(
        local, "POST", f"/api/v2/workspaces/{ws_id}/actions/force-unlock", token=developer
    )

    # Then it is 403 and the workspace stays locked
    assert_error(refused, 403, detail=str(Permission.WORKSPACE_FORCE_UNLOCK))
    assert workspace(local, ws_id)["attributes"]["locked"] is True

    # When a token with the permission (the admin's) force-unlocks it
    forced = call(local, "POST", f"/api/v2/workspaces/{ws_id}/actions/force-unlock")

    # Then it succeeds and the workspace is unlocked
    assert forced.status_code == 200, forced.text
    assert forced.json()["data"]["attributes"]["locked"] is False
    assert workspace(local, ws_id)["attributes"]["locked"] is False


# -- state: authority -------------------------------------------------------------------------


def test_state_create_needs_the_state_write_permission(local: Local) -> None:
    # Given a token that may lock but not write state, holding the workspace lock
    ws_id = create_workspace(local, "http-no-write")
    no_write = local.token(
        (
            Permission.ORGANIZATION_READ,
            Permission.WORKSPACE_READ,
            Permission.WORKSPACE_LOCK,
            Permission.STATE_READ,
        ),
        unique("no-write"),
    )
    assert lock(local, ws_id, token=no_write).status_code == 200
    lineage = unique("lineage")

    # When it publishes a state version
    response = create_sv(local, ws_id, sv_body(1, lineage, raw_state(1, lineage)), token=no_write)

    # Then it is 403 and nothing was written
    assert_error(response, 403, detail=str(Permission.STATE_WRITE))
    assert current_id(local, ws_id) is None
    assert history(local, ws_id) == []


def test_state_upload_without_holding_the_lock_is_409(local: Local) -> None:
    # Given an unlocked workspace
    ws_id = create_workspace(local, "http-unlocked-write")
    lineage = unique("lineage")

    # When state is published without taking the lock
    response = create_sv(local, ws_id, sv_body(1, lineage, raw_state(1, lineage)))

    # Then it is refused with 409 and nothing was written
    assert_error(response, 409, detail="not locked")
    assert current_id(local, ws_id) is None


def test_state_upload_while_another_principal_holds_the_lock_is_409(local: Local) -> None:
    # Given a workspace locked by another principal
    ws_id = create_workspace(local, "http-other-holder")
    holder_name = unique("holder")
    holder = local.token(DEVELOPER, holder_name)
    assert lock(local, ws_id, token=holder).status_code == 200
    lineage = unique("lineage")

    # When the admin publishes state
    response = create_sv(local, ws_id, sv_body(1, lineage, raw_state(1, lineage)))

    # Then it is 409, telling who holds the lock, and nothing was written
    error = assert_error(response, 409, detail="will only accept state uploads from them")
    assert f"is locked by User {holder_name}" in error["detail"]
    assert current_id(local, ws_id) is None


# -- state: succession ------------------------------------------------------------------------


def test_a_lineage_mismatch_is_409(local: Local) -> None:
    # Given a workspace holding serial 1 of lineage A
    ws_id = create_workspace(local, "http-lineage")
    assert lock(local, ws_id).status_code == 200
    lineage, other_lineage = unique("lineage-a"), unique("lineage-b")
    first = publish(local, ws_id, 1, lineage, raw_state(1, lineage))

    # When serial 2 of lineage B is published
    response = create_sv(local, ws_id, sv_body(2, other_lineage, raw_state(2, other_lineage)))

    # Then it is 409 and the current state does not move
    assert_error(response, 409, detail="lineage mismatch")
    assert current_id(local, ws_id) == first["id"]
    assert len(history(local, ws_id)) == 1


@pytest.mark.parametrize(
    ("serial", "case"), [(5, "the same serial with another md5"), (4, "a lower serial")]
)
def test_a_serial_that_does_not_go_forward_is_409(local: Local, serial: int, case: str) -> None:
    # Given a workspace holding serial 5
    ws_id = create_workspace(local, "http-serial")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    first = publish(local, ws_id, 5, lineage, raw_state(5, lineage))

    # When a different state with the same serial, or a lower one, is published
    raw = raw_state(serial, lineage, {"changed": {"value": case, "type": "string"}})
    assert md5_of(raw) != first["attributes"]["md5"]
    response = create_sv(local, ws_id, sv_body(serial, lineage, raw))

    # Then it is 409 (state never goes backwards) and the current state does not move
    assert_error(response, 409, detail="state never goes backwards")
    assert current_id(local, ws_id) == first["id"]
    assert len(history(local, ws_id)) == 1


def test_a_retried_create_returns_the_same_version_and_writes_nothing(local: Local) -> None:
    # Given a workspace with a published serial 1
    ws_id = create_workspace(local, "http-retry")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    raw = raw_state(1, lineage)
    first = publish(local, ws_id, 1, lineage, raw)
    before = history(local, ws_id)

    # When the client retries the same create (same serial and md5)
    retried = create_sv(local, ws_id, sv_body(1, lineage, raw))

    # Then it succeeds with the same state version, and nothing new was written
    assert retried.status_code in (200, 201), retried.text
    assert retried.json()["data"]["id"] == first["id"]
    assert history(local, ws_id) == before
    assert current_id(local, ws_id) == first["id"]


# -- state: content ---------------------------------------------------------------------------


def test_an_md5_mismatch_is_422(local: Local) -> None:
    # Given a locked workspace
    ws_id = create_workspace(local, "http-md5")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    raw = raw_state(1, lineage)

    # When the declared md5 is not the state's
    response = create_sv(local, ws_id, sv_body(1, lineage, raw, md5=md5_of(raw + b"\n")))

    # Then it is 422 and nothing was written
    assert_error(response, 422, detail="MD5")
    assert current_id(local, ws_id) is None
    assert history(local, ws_id) == []


@pytest.mark.parametrize("differs", ["serial", "lineage"])
def test_state_content_that_contradicts_its_declaration_is_422(local: Local, differs: str) -> None:
    # Given a locked workspace
    ws_id = create_workspace(local, "http-content")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")

    # When the raw state's own serial or lineage differs from the declared one
    raw = raw_state(2, lineage) if differs == "serial" else raw_state(1, unique("other"))
    response = create_sv(local, ws_id, sv_body(1, lineage, raw))

    # Then it is 422 and nothing was written
    assert_error(response, 422, detail=differs)
    assert current_id(local, ws_id) is None


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        (
            {"data": {"type": "state-versions", "attributes": {"serial": "abc"}}},
            "/data/attributes/serial",
        ),
        (
            {"data": {"type": "state-versions", "attributes": {"serial": 1, "lineage": "l"}}},
            "/data/attributes/md5",
        ),
        ({"data": {"type": "state-versions"}}, "/data/attributes"),
        ({"attributes": {"serial": 1}}, "/data"),
    ],
    # A body that is not JSON at all is a 400 (tests/e2e/test_bad_bodies.py).
    ids=["serial-not-an-integer", "md5-missing", "attributes-missing", "data-missing"],
)
def test_a_malformed_state_version_body_is_422_pointing_at_the_bad_field(
    local: Local, body: Any, pointer: str
) -> None:
    # Given a locked workspace
    ws_id = create_workspace(local, "http-malformed")
    assert lock(local, ws_id).status_code == 200

    # When a malformed state version create arrives
    path = f"/api/v2/workspaces/{ws_id}/state-versions"
    if isinstance(body, bytes):
        response = call(local, "POST", path, data=body, headers={"Content-Type": JSONAPI})
    else:
        response = call(local, "POST", path, json=body)

    # Then it is 422 whose source.pointer names the bad field, and nothing was written
    assert_error(response, 422, pointer=pointer)
    assert history(local, ws_id) == []


# -- state: input validation ------------------------------------------------------------------

LINEAGE = "9d0c3a4e-5b1f-4c2d-8e3a-0123456789ab"


@pytest.mark.parametrize(
    ("attributes", "pointer"),
    [
        ({"serial": 2**63}, "/data/attributes/serial"),
        ({"serial": 10**40}, "/data/attributes/serial"),
        ({"serial": 1.0}, "/data/attributes/serial"),
        ({"serial": 1.5}, "/data/attributes/serial"),
        ({"serial": True}, "/data/attributes/serial"),
        ({"serial": "1"}, "/data/attributes/serial"),
        ({"serial": -1}, "/data/attributes/serial"),
        ({"lineage": LINEAGE + "\n"}, "/data/attributes/lineage"),
        ({"lineage": "has space"}, "/data/attributes/lineage"),
        ({"lineage": "x" * 65}, "/data/attributes/lineage"),
        ({"lineage": 7}, "/data/attributes/lineage"),
        ({"md5": "A" * 32}, "/data/attributes/md5"),
        ({"force": "yes"}, "/data/attributes/force"),
    ],
    ids=[
        "serial-2^63",
        "serial-10^40",
        "serial-float-1.0",
        "serial-float-1.5",
        "serial-bool",
        "serial-string",
        "serial-negative",
        "lineage-trailing-newline",
        "lineage-space",
        "lineage-too-long",
        "lineage-not-a-string",
        "md5-uppercase",
        "force-not-a-bool",
    ],
)
def test_a_bad_state_declaration_is_422_and_writes_nothing(
    local: Local, attributes: dict[str, Any], pointer: str
) -> None:
    # Given a locked workspace
    ws_id = create_workspace(local, "http-declared")
    assert lock(local, ws_id).status_code == 200
    before = workspace(local, ws_id)

    # When a state version declares a malformed serial, lineage, md5 or force
    body = sv_body(1, LINEAGE, raw_state(1, LINEAGE))
    body["data"]["attributes"].update(attributes)
    response = create_sv(local, ws_id, body)

    # Then it is 422 naming the field, and nothing was written
    assert_error(response, 422, pointer=pointer)
    assert workspace(local, ws_id) == before
    assert history(local, ws_id) == []

    # And the workspace still takes the next good state (a refused 10^40 bricks nothing)
    publish(local, ws_id, 1, LINEAGE, raw_state(1, LINEAGE))
    assert current_id(local, ws_id) is not None


def state_document(**changes: Any) -> bytes:
    state: dict[str, Any] = {
        "version": 4,
        "terraform_version": "1.0.3",
        "serial": 1,
        "lineage": LINEAGE,
        "outputs": {},
        "resources": [],
    }
    state.update(changes)
    return json.dumps(state).encode("utf-8")


BAD_STATES = [
    (state_document(version=3), "/version"),
    (state_document(version="4"), "/version"),
    (state_document(version=None), "/version"),
    (state_document(serial=1.0), "/serial"),
    (state_document(serial=True), "/serial"),
    (state_document(serial=10**40), "/serial"),
    (state_document(lineage=None), "/lineage"),
    (b"[1, 2, 3]", "/"),
    (b'{"version": 4, "serial": NaN}', "/"),
]
BAD_STATE_IDS = [
    "version-3",
    "version-string",
    "version-missing",
    "serial-float",
    "serial-bool",
    "serial-huge",
    "lineage-missing",
    "not-an-object",
    "nan",
]


@pytest.mark.parametrize(("raw", "where"), BAD_STATES, ids=BAD_STATE_IDS)
def test_an_inline_state_that_is_not_a_version_4_state_is_422(
    local: Local, raw: bytes, where: str
) -> None:
    # Given a locked workspace
    ws_id = create_workspace(local, "http-bad-state")
    assert lock(local, ws_id).status_code == 200

    # When the inline state (with its true md5) is not a version 4 state of serial 1
    response = create_sv(local, ws_id, sv_body(1, LINEAGE, raw))

    # Then it is 422 pointing at the state field, and nothing was written
    assert_error(response, 422, pointer="/data/attributes/state")
    assert history(local, ws_id) == []
    assert current_id(local, ws_id) is None


@pytest.mark.parametrize(("raw", "where"), BAD_STATES, ids=BAD_STATE_IDS)
def test_a_state_put_to_its_upload_url_that_is_not_a_version_4_state_is_422(
    local: Local, raw: bytes, where: str
) -> None:
    # Given a pending version at its upload URL
    ws_id = create_workspace(local, "http-bad-upload")
    assert lock(local, ws_id).status_code == 200
    pending = open_upload(local, ws_id, 1, LINEAGE, raw)

    # When the bad state (with its true md5) is PUT there
    response = put(pending["attributes"]["hosted-state-upload-url"], raw)

    # Then it is 422 pointing into the document, and nothing became current
    assert_error(response, 422, pointer=where)
    assert current_id(local, ws_id) is None


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b"[]", "/"),
        (b'"a string"', "/"),
        (b'{"anything": "at all"}', "/format_version"),
        (b'{"format_version": 1.0}', "/format_version"),
        (b"not json", "/"),
    ],
    ids=["array", "string", "no-format-version", "numeric-format-version", "not-json"],
)
def test_a_json_state_upload_that_is_not_show_json_output_is_422(
    local: Local, raw: bytes, where: str
) -> None:
    # Given a version published through its upload URL
    ws_id = create_workspace(local, "http-json-state")
    assert lock(local, ws_id).status_code == 200
    state = raw_state(1, LINEAGE)
    pending = open_upload(local, ws_id, 1, LINEAGE, state)
    assert put(pending["attributes"]["hosted-state-upload-url"], state).status_code == 200

    # When arbitrary JSON is PUT to its JSON-state upload URL
    response = put(pending["attributes"]["hosted-json-state-upload-url"], raw)

    # Then it is 422 and the version has no JSON state
    assert_error(response, 422, pointer=where)
    version = call(local, "GET", f"/api/v2/state-versions/{pending['id']}").json()["data"]
    assert "hosted-json-state-download-url" not in version["attributes"]

    # While a `show -json` document is accepted there, once
    good = put(pending["attributes"]["hosted-json-state-upload-url"], b'{"format_version":"1.0"}')
    assert good.status_code == 200, good.text


@pytest.mark.parametrize(
    ("attributes", "pointer"),
    [
        ({"name": "network\n"}, "/data/attributes/name"),
        ({"name": "net work"}, "/data/attributes/name"),
        ({"name": "x" * 91}, "/data/attributes/name"),
        ({"tag-names": ["Prod"]}, "/data/attributes/tag-names/0"),
        ({"tag-names": ["ok", "has space"]}, "/data/attributes/tag-names/1"),
        ({"tag-names": ["env\n"]}, "/data/attributes/tag-names/0"),
        ({"tag-names": ["x" * 256]}, "/data/attributes/tag-names/0"),
        ({"tag-names": [""]}, "/data/attributes/tag-names/0"),
    ],
    ids=[
        "name-trailing-newline",
        "name-space",
        "name-too-long",
        "tag-uppercase",
        "tag-space",
        "tag-trailing-newline",
        "tag-too-long",
        "tag-empty",
    ],
)
def test_a_bad_workspace_name_or_tag_is_422_and_creates_nothing(
    local: Local, attributes: dict[str, Any], pointer: str
) -> None:
    # Given a workspace attributes document with a bad name or tag
    body: dict[str, Any] = {
        "data": {"type": "workspaces", "attributes": {"name": unique("http-names")}}
    }
    body["data"]["attributes"].update(attributes)
    name = body["data"]["attributes"]["name"]
    path = f"/api/v2/organizations/{local.organization}/workspaces"

    # When a workspace is created with it
    response = call(local, "POST", path, json=body)

    # Then it is 422 naming the field, and no workspace of that name exists
    assert_error(response, 422, pointer=pointer)
    listed = call(local, "GET", path, params={"search[name]": name.strip(), "page[size]": 100})
    assert [w["attributes"]["name"] for w in listed.json()["data"]] == []


def test_tags_follow_tfe_rules_on_update_too(local: Local) -> None:
    # Given a workspace created with valid TFE tags
    body = {
        "data": {
            "type": "workspaces",
            "attributes": {"name": unique("http-tags"), "tag-names": ["env:prod", "team_a-1"]},
        }
    }
    created = call(
        local, "POST", f"/api/v2/organizations/{local.organization}/workspaces", json=body
    )
    assert created.status_code == 201, created.text
    ws_id = created.json()["data"]["id"]
    assert created.json()["data"]["attributes"]["tag-names"] == ["env:prod", "team_a-1"]

    # When an update sets an invalid tag
    patch = {"data": {"type": "workspaces", "attributes": {"tag-names": ["env:prod", "Bad"]}}}
    response = call(local, "PATCH", f"/api/v2/workspaces/{ws_id}", json=patch)

    # Then it is 422 naming the tag, and the tags did not change
    assert_error(response, 422, pointer="/data/attributes/tag-names/1")
    assert workspace(local, ws_id)["attributes"]["tag-names"] == ["env:prod", "team_a-1"]


# -- listings -----------------------------------------------------------------------------------


def test_listings_are_paginated_and_state_versions_need_both_filters(local: Local) -> None:
    # Given a workspace holding two versions
    ws_id = create_workspace(local, "http-listing")
    name = workspace(local, ws_id)["attributes"]["name"]
    assert lock(local, ws_id).status_code == 200
    for serial in (1, 2):
        publish(local, ws_id, serial, LINEAGE, raw_state(serial, LINEAGE))

    # When organizations and the versions (by names, one per page) are listed
    orgs = call(local, "GET", "/api/v2/organizations")
    filters = {"filter[organization][name]": local.organization, "filter[workspace][name]": name}
    second = call(
        local,
        "GET",
        "/api/v2/state-versions",
        params={**filters, "page[size]": 1, "page[number]": 2},
    )

    # Then both carry TFE's meta.pagination, and page 2 holds the older version
    assert orgs.status_code == 200, orgs.text
    assert [o["id"] for o in orgs.json()["data"]] == [local.organization]
    assert orgs.json()["meta"]["pagination"]["total-count"] == 1
    assert second.status_code == 200, second.text
    assert [v["attributes"]["serial"] for v in second.json()["data"]] == [1]
    assert second.json()["meta"]["pagination"] == {
        "current-page": 2,
        "page-size": 1,
        "prev-page": 1,
        "next-page": None,
        "total-pages": 2,
        "total-count": 2,
    }

    # And a listing without both filters, or with a page over 100, is 422
    only_org = {"filter[organization][name]": local.organization}
    assert_error(call(local, "GET", "/api/v2/state-versions", params=only_org), 422)
    too_big = {**filters, "page[size]": 101}
    assert_error(call(local, "GET", "/api/v2/state-versions", params=too_big), 422)


# -- state: upload URLs -----------------------------------------------------------------------


def open_upload(local: Local, ws_id: str, serial: int, lineage: str, raw: bytes) -> dict[str, Any]:
    """Create a state version without inline state: it waits at its upload URL."""
    response = create_sv(local, ws_id, sv_body(serial, lineage, raw, inline=False))
    assert response.status_code == 201, response.text
    data = dict(response.json()["data"])
    assert data["attributes"]["hosted-state-upload-url"]
    assert data["attributes"]["hosted-json-state-upload-url"]
    return data


def put(url: str, raw: bytes) -> requests.Response:
    """PUT raw bytes to an upload URL, as clients do: with NO Authorization header."""
    return requests.put(
        url, data=raw, headers={"Content-Type": "application/octet-stream"}, timeout=TIMEOUT
    )


def test_the_upload_url_flow_publishes_and_the_url_works_once(local: Local) -> None:
    # Given a workspace holding serial 1, and a pending serial 2 at an upload URL
    ws_id = create_workspace(local, "http-upload")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    first = publish(local, ws_id, 1, lineage, raw_state(1, lineage))
    raw = raw_state(2, lineage, {"greeting": {"value": "héllo ✓", "type": "string"}})
    pending = open_upload(local, ws_id, 2, lineage, raw)
    url = pending["attributes"]["hosted-state-upload-url"]
    assert pending["attributes"]["status"] == "pending"
    assert current_id(local, ws_id) == first["id"]

    # When the raw bytes are PUT there without credentials
    uploaded = put(url, raw)

    # Then the workspace's current state version is the uploaded one, with those exact bytes
    assert uploaded.status_code == 200, uploaded.text
    assert_api_version(uploaded)
    now = current(local, ws_id)
    assert now.status_code == 200
    assert now.json()["data"]["id"] == pending["id"]
    assert now.json()["data"]["attributes"]["serial"] == 2
    assert now.json()["data"]["attributes"]["status"] == "finalized"
    assert download(local, now.json()["data"]) == raw
    outputs = call(local, "GET", f"/api/v2/workspaces/{ws_id}/current-state-version-outputs")
    assert outputs.status_code == 200
    assert [
        (o["attributes"]["name"], o["attributes"]["value"]) for o in outputs.json()["data"]
    ] == [("greeting", "héllo ✓")]
    before = history(local, ws_id)

    # When the same URL is used again, with the same bytes or others
    again = put(url, raw)
    other = put(url, raw_state(2, lineage, {"greeting": {"value": "evil", "type": "string"}}))

    # Then both are refused with 409 and nothing changes
    assert_error(again, 409, detail="already used")
    assert_error(other, 409, detail="already used")
    assert history(local, ws_id) == before
    assert current_id(local, ws_id) == pending["id"]
    assert download(local, now.json()["data"]) == raw


def test_an_unknown_upload_url_is_404(local: Local) -> None:
    # Given an upload URL the stack never handed out
    # When bytes are PUT there
    response = put(f"{local.url}/_archivist/rpu_{'x' * 43}", b"{}")

    # Then it is 404
    assert_error(response, 404)


def test_an_expired_upload_url_is_refused(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a workspace holding serial 1, and a pending serial 2 whose URL is born expired
    ws_id = create_workspace(local, "http-expired")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    first = publish(local, ws_id, 1, lineage, raw_state(1, lineage))
    monkeypatch.setattr(state_service, "UPLOAD_URL_LIFETIME", timedelta(seconds=-1))
    raw = raw_state(2, lineage)
    pending = open_upload(local, ws_id, 2, lineage, raw)
    monkeypatch.undo()

    # When the bytes are PUT there
    response = put(pending["attributes"]["hosted-state-upload-url"], raw)

    # Then it is refused (410 Gone) and the current state does not move
    assert_error(response, 410, detail="expired")
    assert current_id(local, ws_id) == first["id"]
    finalized = [v for v in history(local, ws_id) if v["attributes"]["status"] == "finalized"]
    assert [v["id"] for v in finalized] == [first["id"]]


# -- size limits ------------------------------------------------------------------------------


def test_the_gateway_refuses_a_body_over_10_mib_with_413(local: Local) -> None:
    # Given a locked workspace, and a create whose body exceeds API Gateway's 10 MiB
    ws_id = create_workspace(local, "http-gateway-413")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    raw = padded_state(1, lineage, (GATEWAY_LIMIT * 3) // 4 + 1024)
    body = json.dumps(sv_body(1, lineage, raw)).encode("utf-8")
    assert len(body) > GATEWAY_LIMIT

    # When it is sent
    response = call(
        local,
        "POST",
        f"/api/v2/workspaces/{ws_id}/state-versions",
        data=body,
        headers={"Content-Type": JSONAPI},
    )

    # Then the gateway answers 413 (with the API version) and nothing was written
    assert_error(response, 413)
    assert current_id(local, ws_id) is None
    assert history(local, ws_id) == []


def test_a_state_over_the_limit_is_refused_at_its_upload_url_with_413(local: Local) -> None:
    # Given a workspace holding serial 1, and a pending serial 2 of 10,000,001 bytes
    ws_id = create_workspace(local, "http-state-413")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    first = publish(local, ws_id, 1, lineage, raw_state(1, lineage))
    raw = padded_state(2, lineage, LIMIT + 1)
    assert len(raw) < GATEWAY_LIMIT
    pending = open_upload(local, ws_id, 2, lineage, raw)

    # When the bytes are PUT there
    response = put(pending["attributes"]["hosted-state-upload-url"], raw)

    # Then the service refuses them with 413 and the current state does not move
    assert_error(response, 413, detail="10,000,000")
    assert current_id(local, ws_id) == first["id"]


def test_a_state_of_exactly_the_limit_is_accepted_at_its_upload_url(local: Local) -> None:
    # Given a pending state version of exactly 10,000,000 bytes
    ws_id = create_workspace(local, "http-state-limit")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    raw = padded_state(1, lineage, LIMIT)
    pending = open_upload(local, ws_id, 1, lineage, raw)

    # When the bytes are PUT there
    response = put(pending["attributes"]["hosted-state-upload-url"], raw)

    # Then it is published, and downloads byte for byte
    assert response.status_code == 200, response.text
    now = current(local, ws_id)
    assert now.status_code == 200
    assert now.json()["data"]["id"] == pending["id"]
    assert now.json()["data"]["attributes"]["size"] == LIMIT
    assert download(local, now.json()["data"]) == raw


# -- more state rules -------------------------------------------------------------------------


def test_force_overrides_a_lineage_mismatch_but_never_a_serial_regression(local: Local) -> None:
    # Given a workspace holding serial 3 of lineage A
    ws_id = create_workspace(local, "http-force-lineage")
    assert lock(local, ws_id).status_code == 200
    lineage, other_lineage = unique("lineage-a"), unique("lineage-b")
    first = publish(local, ws_id, 3, lineage, raw_state(3, lineage))

    # When lineage B is forced with a lower serial
    lower = sv_body(2, other_lineage, raw_state(2, other_lineage))
    lower["data"]["attributes"]["force"] = True
    refused = create_sv(local, ws_id, lower)

    # Then it is still 409: a serial never goes backwards
    assert_error(refused, 409, detail="state never goes backwards")
    assert current_id(local, ws_id) == first["id"]

    # When lineage B is forced with a higher serial
    raw = raw_state(4, other_lineage)
    higher = sv_body(4, other_lineage, raw)
    higher["data"]["attributes"]["force"] = True
    forced = create_sv(local, ws_id, higher)

    # Then it becomes current
    assert forced.status_code == 201, forced.text
    now = current(local, ws_id).json()["data"]
    assert now["id"] == forced.json()["data"]["id"]
    assert now["attributes"]["lineage"] == other_lineage
    assert download(local, now) == raw


def test_state_versions_are_listed_newest_first(local: Local) -> None:
    # Given three published state versions
    ws_id = create_workspace(local, "http-history")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    published = [publish(local, ws_id, s, lineage, raw_state(s, lineage))["id"] for s in (1, 2, 3)]

    # When the workspace's state versions are listed
    listed = history(local, ws_id)

    # Then they are the finalized versions, newest first
    assert [v["id"] for v in listed] == list(reversed(published))
    assert [v["attributes"]["serial"] for v in listed] == [3, 2, 1]


def test_another_organization_cannot_read_or_download_a_state_version(local: Local) -> None:
    # Given a published state version of the default organization
    ws_id = create_workspace(local, "http-sv-tenancy")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    version = publish(local, ws_id, 1, lineage, raw_state(1, lineage))
    _, other_token = local.other_organization(unique("other-org"))

    # When another organization's admin reads it, downloads it, or its workspace's outputs
    paths = (
        f"/api/v2/state-versions/{version['id']}",
        f"/api/v2/state-versions/{version['id']}/download",
        f"/api/v2/workspaces/{ws_id}/current-state-version",
        f"/api/v2/workspaces/{ws_id}/current-state-version-outputs",
        f"/api/v2/workspaces/{ws_id}/state-versions",
    )
    responses = [call(local, "GET", path, token=other_token) for path in paths]

    # Then every answer is 404
    for response in responses:
        assert_error(response, 404)


def test_unlock_is_not_refused_while_a_state_version_is_pending(local: Local) -> None:
    # Given a locked workspace with a state version waiting at its upload URL
    ws_id = create_workspace(local, "http-unlock-pending")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    open_upload(local, ws_id, 1, lineage, raw_state(1, lineage))

    # When the holder unlocks it (clients never retry a refused unlock)
    response = unlock(local, ws_id)

    # Then it is unlocked, and the pending version never became current
    assert response.status_code == 200, response.text
    assert response.json()["data"]["attributes"]["locked"] is False
    assert current_id(local, ws_id) is None


@pytest.mark.parametrize("relocker", ["another principal", "the same holder"])
def test_an_upload_url_is_refused_once_its_lock_was_released(local: Local, relocker: str) -> None:
    # Given a workspace holding serial 1, and a pending serial 2 created under the admin's lock
    ws_id = create_workspace(local, "http-upload-lock")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    first = publish(local, ws_id, 1, lineage, raw_state(1, lineage))
    raw = raw_state(2, lineage)
    pending = open_upload(local, ws_id, 2, lineage, raw)

    # ... whose lock was then released and taken again
    assert unlock(local, ws_id).status_code == 200
    token = local.token(DEVELOPER, unique("other")) if relocker == "another principal" else None
    assert lock(local, ws_id, token=token).status_code == 200

    # When the bytes are PUT to the old URL
    response = put(pending["attributes"]["hosted-state-upload-url"], raw)

    # Then they are refused with 409 (the exact lock it was created under is gone)
    assert_error(response, 409, detail="no longer locked by this writer")
    assert current_id(local, ws_id) == first["id"]
    assert [v["id"] for v in history(local, ws_id)] == [first["id"]]
    assert workspace(local, ws_id)["attributes"]["locked"] is True


def test_an_upload_url_is_refused_once_the_state_moved_on(local: Local) -> None:
    # Given a pending serial 2 at an upload URL, and serial 3 published inline meanwhile
    ws_id = create_workspace(local, "http-upload-moved")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    publish(local, ws_id, 1, lineage, raw_state(1, lineage))
    raw = raw_state(2, lineage)
    pending = open_upload(local, ws_id, 2, lineage, raw)
    third = publish(local, ws_id, 3, lineage, raw_state(3, lineage))

    # When serial 2's bytes are PUT to its URL
    response = put(pending["attributes"]["hosted-state-upload-url"], raw)

    # Then they are refused with 409 and serial 3 stays current
    assert_error(response, 409, detail="changed meanwhile")
    assert current_id(local, ws_id) == third["id"]
    assert [v["attributes"]["serial"] for v in history(local, ws_id)] == [3, 1]


def test_bytes_that_contradict_the_declared_md5_are_refused_at_the_upload_url(
    local: Local,
) -> None:
    # Given a pending state version declared with one MD5
    ws_id = create_workspace(local, "http-upload-md5")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    pending = open_upload(local, ws_id, 1, lineage, raw_state(1, lineage))

    # When other bytes are PUT to its URL
    response = put(
        pending["attributes"]["hosted-state-upload-url"],
        raw_state(1, lineage, {"x": {"value": 1, "type": "number"}}),
    )

    # Then it is 422 and nothing was published
    assert_error(response, 422, detail="MD5")
    assert current_id(local, ws_id) is None


def test_the_json_state_upload_url_works_once(local: Local) -> None:
    # Given a published state version whose JSON state upload URL is unused
    ws_id = create_workspace(local, "http-json-upload")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    raw = raw_state(1, lineage)
    pending = open_upload(local, ws_id, 1, lineage, raw)
    assert put(pending["attributes"]["hosted-state-upload-url"], raw).status_code == 200
    json_url = pending["attributes"]["hosted-json-state-upload-url"]

    # When the JSON state is PUT there twice
    first = put(json_url, b'{"format_version":"1.0"}')
    second = put(json_url, b'{"format_version":"1.0"}')

    # Then the first is accepted and the second refused with 409
    assert first.status_code == 200, first.text
    assert_error(second, 409, detail="already used")
    assert current_id(local, ws_id) == pending["id"]


def test_the_advertised_json_state_download_url_serves_the_json_state(local: Local) -> None:
    # Given a published state version with its JSON state uploaded
    ws_id = create_workspace(local, "http-json-download")
    assert lock(local, ws_id).status_code == 200
    lineage = unique("lineage")
    raw = raw_state(1, lineage)
    pending = open_upload(local, ws_id, 1, lineage, raw)
    assert put(pending["attributes"]["hosted-state-upload-url"], raw).status_code == 200
    json_state = b'{"format_version":"1.0","terraform_version":"1.0.3"}'
    assert put(pending["attributes"]["hosted-json-state-upload-url"], json_state).status_code == 200
    version = current(local, ws_id).json()["data"]
    url = version["attributes"]["hosted-json-state-download-url"]

    # When a client follows the URL the API handed out
    response = call(local, "GET", url)

    # Then it gets the JSON state it uploaded
    assert response.status_code == 200, response.text
    assert response.content == json_state


def test_sensitive_output_values_are_withheld_from_the_outputs_endpoint(local: Local) -> None:
    # Given a state with a sensitive and a plain output
    ws_id = create_workspace(local, "outputs")
    assert lock(local, ws_id).status_code == 200
    raw = raw_state(
        1,
        "lineage-outputs",
        {
            "password": {"value": "hunter2", "type": "string", "sensitive": True},
            "region": {"value": "eu-west-1", "type": "string"},
        },
    )
    publish(local, ws_id, 1, "lineage-outputs", raw)

    # When the outputs are read
    outputs = call(local, "GET", f"/api/v2/workspaces/{ws_id}/current-state-version-outputs")

    # Then the sensitive value is withheld and the plain one is shown
    assert outputs.status_code == 200
    values = {
        o["attributes"]["name"]: (o["attributes"]["value"], o["attributes"]["sensitive"])
        for o in outputs.json()["data"]
    }
    assert values == {"password": (None, True), "region": ("eu-west-1", False)}
    assert "hunter2" not in outputs.text


# -- media types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None]
)
def test_a_body_that_is_not_labelled_json_is_415_and_changes_nothing(
    local: Local, content_type: str | None
) -> None:
    # Given a fresh workspace
    ws_id = create_workspace(local, "http-media")
    body = json.dumps({"data": {"type": "", "attributes": {"reason": "plain"}}}).encode()
    headers = {"Content-Type": content_type} if content_type else {}

    # When it is locked with a body labelled as something other than JSON
    refused = call(
        local, "POST", f"/api/v2/workspaces/{ws_id}/actions/lock", data=body, headers=headers
    )

    # Then it is a JSON:API 415 naming the media types taken, and the lock was not taken
    error = assert_error(refused, 415, detail=JSONAPI)
    assert error["title"] == "unsupported media type"
    assert "application/json" in error["detail"]
    assert workspace(local, ws_id)["attributes"]["locked"] is False


@pytest.mark.parametrize(
    "content_type",
    [JSONAPI, "application/json", f"{JSONAPI}; charset=utf-8", "Application/JSON;charset=UTF-8"],
)
def test_json_bodies_are_taken_with_either_media_type_and_parameters(
    local: Local, content_type: str
) -> None:
    ws_id = create_workspace(local, "http-media-ok")
    body = json.dumps({"data": {"type": "", "attributes": {"reason": "json"}}}).encode()

    taken = call(
        local,
        "POST",
        f"/api/v2/workspaces/{ws_id}/actions/lock",
        data=body,
        headers={"Content-Type": content_type},
    )

    assert taken.status_code == 200, taken.text
    assert workspace(local, ws_id)["attributes"]["locked"] is True
