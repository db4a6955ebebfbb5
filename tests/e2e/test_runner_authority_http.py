"""A runner session over real HTTP: confined to what its run needs, dead once its attempt ends.

The session is obtained as a sandbox obtains it: a bootstrap handle bound to an
open attempt of the run, redeemed at ``POST /api/v1/runner/sessions``. Every
call then goes through the gateway and its authorizer.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import requests

from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.ids import IdKind
from runplane.store import run_parts
from tests.e2e.conftest import Local
from tests.e2e.test_cloud_api_http import call, raw_state
from tests.e2e.test_managed_runs import HELLO, new_workspace


def open_apply_attempt(
    local: Local, run_id: str, inputs: Sequence[str] = ()
) -> tuple[Binding, str]:
    """An apply attempt recorded open on the run (its sandbox not started) and the
    bootstrap handle for it, naming ``inputs``, as the workflow mints it."""
    services = local.stack.services
    assert services is not None
    run = services.lifecycle.runs.get(run_id)
    binding = Binding(
        run_id, services.ids.new(IdKind.ATTEMPT), Phase.APPLY, services.ids.new(IdKind.SANDBOX)
    )
    run_parts.put(
        run_id,
        "attempt#apply",
        state="started",
        body={"attempt_id": binding.attempt_id, "sandbox_id": binding.sandbox_id},
        now=datetime.now(UTC),
    ).commit()
    minted = services.capabilities.mint(
        CapabilityKind.BOOTSTRAP,
        binding,
        lifetime=timedelta(minutes=5),
        organization_id=run.organization_id,
        inputs=list(inputs),
    )
    return binding, minted.handle


def apply_session(local: Local, run_id: str) -> str:
    """A session of an apply attempt recorded open on the run (its sandbox not started)."""
    binding, handle = open_apply_attempt(local, run_id)
    started = call(
        local,
        "POST",
        "/api/v1/runner/sessions",
        auth=False,
        json={
            "bootstrap": handle,
            "run_id": run_id,
            "attempt_id": binding.attempt_id,
            "phase": "apply",
            "sandbox_id": binding.sandbox_id,
        },
    )
    assert started.status_code == 201, started.text
    return str(started.json()["token"])


def publish_body(serial: int) -> dict[str, object]:
    raw = raw_state(serial, "5e1f0000-0000-4000-8000-000000000001")
    return {
        "data": {
            "type": "state-versions",
            "attributes": {
                "serial": serial,
                "md5": hashlib.md5(raw, usedforsecurity=False).hexdigest(),
                "lineage": "5e1f0000-0000-4000-8000-000000000001",
                "state": base64.b64encode(raw).decode(),
            },
        }
    }


def code_of(response: requests.Response) -> str:
    body = response.json()
    if "errors" in body:
        return str(body["errors"][0]["title"])
    return str(body["code"])


def test_a_runner_session_is_confined_and_dies_with_its_attempt(local: Local) -> None:
    # Given a run awaiting approval, a policy set in the organization, another workspace,
    # and a session of an apply attempt of that run
    ws = new_workspace(local, "confined")
    other = new_workspace(local, "confined-other")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    token = apply_session(local, run["id"])
    org = local.organization

    # Then organization-level reads are forbidden to it (403)
    for path in (
        "/api/v1/policy-sets",
        "/api/v1/policy-sets/any",
        f"/api/v2/organizations/{org}",
        "/api/v1/launch-controls/organization",
        f"/api/v1/runs/{run['id']}",
    ):
        refused = call(local, "GET", path, token=token)
        assert refused.status_code == 403, (path, refused.text)
    # And another workspace does not exist for it (404)
    assert call(local, "GET", f"/api/v2/workspaces/{other}", token=token).status_code == 404
    # And its own workspace is readable, but it may not publish: its run is not applying
    assert call(local, "GET", f"/api/v2/workspaces/{ws}", token=token).status_code == 200
    early = call(
        local, "POST", f"/api/v2/workspaces/{ws}/state-versions", token=token, json=publish_body(1)
    )
    assert early.status_code == 409, early.text
    assert code_of(early) == "run not applying"

    # When the run is canceled, closing the attempt
    local.client.cancel(run["id"])

    # Then every call with the session is refused as unauthenticated (401)
    for method, path, body in (
        ("GET", f"/api/v2/workspaces/{ws}", None),
        ("POST", f"/api/v2/workspaces/{ws}/state-versions", publish_body(1)),
        ("POST", f"/api/v2/workspaces/{ws}/actions/lock", {}),
        ("POST", "/api/v1/runner/heartbeat", None),
        ("GET", "/api/v1/runner/state-check", None),
    ):
        dead = call(local, method, path, token=token, json=body)
        assert dead.status_code == 401, (path, dead.text)
    # And nothing was published
    current = call(local, "GET", f"/api/v2/workspaces/{ws}/current-state-version")
    assert current.status_code == 404
