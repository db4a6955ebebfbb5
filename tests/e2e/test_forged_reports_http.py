"""A sandbox that lies about its phase, over real HTTP: a plan result naming artifacts
its attempt did not upload, or digests they do not have, is a 422 that ends the run
``plan_failed``; an apply start presenting another plan is refused and ends the run
``apply_failed`` at once, instead of leaving it waiting for a heartbeat timeout.

The sandbox is not the real runner: its launch is captured, and the test redeems the
bootstrap handle and makes the runner's calls itself."""

from __future__ import annotations

import base64
import time
from typing import Any

import boto3
import pytest
import requests

from runplane.adapters.envelope import Encryption
from runplane.adapters.launchers import LaunchRequest
from runplane.store import artifacts as artifact_store
from runplane.store import run_parts
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local
from tests.e2e.test_cloud_api_http import call
from tests.e2e.test_managed_runs import HELLO, events, new_workspace, writer_of

# Well within the stack's heartbeat window (20 s): the run must end on the refusal.
ENDS_WITHIN_SECONDS = 10


class Captured:
    """Launches taken instead of started: each sandbox's request, handles included."""

    def __init__(self) -> None:
        self.requests: list[LaunchRequest] = []

    def launch(self, request: LaunchRequest) -> str:
        self.requests.append(request)
        return "pid:999999999"

    def next(self, phase: str, run_id: str, timeout: float = 60) -> LaunchRequest:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for request in self.requests:
                if (request.run_id, request.phase) == (run_id, phase):
                    return request
            time.sleep(0.1)
        raise AssertionError(f"no {phase} sandbox of {run_id} was launched")


@pytest.fixture
def captured(local: Local, monkeypatch: pytest.MonkeyPatch) -> Captured:
    launcher = local.stack.launcher
    assert launcher is not None
    taken = Captured()
    monkeypatch.setattr(launcher, "launch", taken.launch)
    return taken


def session_start(local: Local, request: LaunchRequest) -> dict[str, Any]:
    """What the sandbox gets by redeeming its bootstrap handle: its token and grants."""
    started = call(
        local,
        "POST",
        "/api/v1/runner/sessions",
        auth=False,
        json={
            "bootstrap": request.bootstrap,
            "run_id": request.run_id,
            "attempt_id": request.attempt_id,
            "phase": request.phase,
            "sandbox_id": request.sandbox_id,
            "inputs": list(request.inputs),
        },
    )
    assert started.status_code == 201, started.text
    return dict(started.json())


def put_through(grant: dict[str, Any], plaintext: bytes) -> dict[str, Any]:
    """Encrypt under an upload grant and put to its URL, as the runner does: the upload
    as the result's ``uploads`` names it."""
    encryption = Encryption(
        base64.b64decode(grant["data_key"]), grant["artifact_id"], limit=grant["max_size"]
    )
    body = b"".join(encryption.stream([plaintext]))
    requests.put(grant["url"], data=body, timeout=30).raise_for_status()
    return {
        "artifact_id": grant["artifact_id"],
        "ticket": grant["ticket"],
        "size": encryption.size,
        "sha256": encryption.sha256,
    }


def execution_status(local: Local, run_id: str, timeout: float = ENDS_WITHIN_SECONDS) -> str:
    """The run's workflow execution's status once it is no longer running (or still
    ``RUNNING`` after ``timeout``)."""
    assert local.stack.services is not None
    settings = local.stack.services.settings
    sfn = boto3.client(
        "stepfunctions", region_name="us-east-1", endpoint_url=settings.aws_endpoint_url
    )
    arn = settings.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{run_id}"
    deadline = time.monotonic() + timeout
    while True:
        status = str(sfn.describe_execution(executionArn=arn)["status"])
        if status != "RUNNING" or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


SUMMARY = {
    "adds": 1,
    "changes": 0,
    "destroys": 0,
    "replaces": 0,
    "output_changes": {},
    "has_changes": True,
}


def test_a_forged_plan_result_is_a_422_and_fails_the_run(local: Local, captured: Captured) -> None:
    # Given a run whose plan sandbox was launched but is played by this test
    ws = new_workspace(local, "forged-plan")
    run = local.client.create_run(ws, HELLO)
    launch = captured.next("plan", run["id"])
    started = session_start(local, launch)
    token = started["token"]
    # And it uploaded a plan JSON and a log with its grants
    grants = started["grants"]["uploads"]
    plan_json = put_through(grants["plan_json"], b'{"resource_changes": []}')
    log = put_through(grants["logs"], b"the plan's log\n")
    # And it names as its plan an artifact uploaded for something else (the run's
    # configuration), with digests that are not the uploads'
    configuration = run_parts.require(run["id"], "input").body["configuration_artifact_id"]
    forged = {
        "outcome": "planned",
        "has_changes": True,
        "summary": SUMMARY,
        "plan_artifact_id": configuration,
        "plan_sha256": "a" * 64,
        "plan_json_artifact_id": plan_json["artifact_id"],
        "plan_json_sha256": "b" * 64,
        "log_artifact_id": log["artifact_id"],
        "uploads": [plan_json, log],
    }

    # When it posts that result
    reply = call(local, "POST", "/api/v1/runner/result", token=token, json=forged)

    # Then it is refused as a typed 422 that names the artifact and says the run ended
    assert reply.status_code == 422, reply.text
    body = reply.json()
    reason = (
        f"the plan report was refused: artifact {configuration} was not uploaded by this attempt"
    )
    assert body == {
        "code": "REPORT_REFUSED",
        "message": reason,
        "run_id": run["id"],
        "status": "plan_failed",
    }
    # And the run ended plan_failed with that reason, within seconds, never reaching
    # awaiting_approval, with no plan and its workspace free
    review = local.client.watch(run["id"], timeout=ENDS_WITHIN_SECONDS)
    assert (review["status"], review["status_reason"]) == ("plan_failed", reason)
    assert "run.approval_requested" not in events(local, run["id"])
    assert run_parts.get(run["id"], "plan", reads=IdentityMap()) is None
    assert run_parts.get(run["id"], "approval", reads=IdentityMap()) is None
    assert writer_of(ws) == (None, None)
    # And the uploads sent with it were not registered
    for upload in (plan_json, log):
        assert not artifact_store.exists(upload["artifact_id"])
    # And its workflow execution has finished
    assert execution_status(local, run["id"]) != "RUNNING"
    # And the sandbox's session is dead: sending the result again is unauthenticated
    again = call(local, "POST", "/api/v1/runner/result", token=token, json=forged)
    assert again.status_code == 401


def test_an_apply_start_with_another_plan_ends_the_run_within_seconds(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run planned by the real runner and awaiting approval
    ws = new_workspace(local, "forged-start")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    # And, once approved, an apply sandbox that is played by this test
    launcher = local.stack.launcher
    assert launcher is not None
    taken = Captured()
    monkeypatch.setattr(launcher, "launch", taken.launch)
    local.client.decide(run["id"], "approve")
    launch = taken.next("apply", run["id"])
    token = session_start(local, launch)["token"]
    assert writer_of(ws)[0] == run["id"]

    # When it asks to start the apply presenting a plan that is not the approved one
    start = {"handle": launch.apply_start, "request": {"plan_sha256": "0" * 64}}
    began = time.monotonic()
    reply = call(local, "POST", "/api/v1/runner/apply-start", token=token, json=start)

    # Then the start is refused, saying why
    assert reply.status_code == 409, reply.text
    body = reply.json()
    assert (body["code"], body["status"]) == ("APPLY_START_REFUSED", "apply_failed")
    assert (
        "the runner's plan (sha256 000000000000...) is not the approved plan" in (body["message"])
    )
    # And the run ended apply_failed with that reason within seconds, not a heartbeat
    # window later
    review = local.client.watch(run["id"], timeout=ENDS_WITHIN_SECONDS)
    assert time.monotonic() - began < ENDS_WITHIN_SECONDS
    assert (review["status"], review["status_reason"]) == ("apply_failed", body["message"])
    assert review["apply"]["status"] == "failed"
    # And the workspace's writer reservation and lock are released
    assert writer_of(ws) == (None, None)
    # And its workflow execution has finished
    assert execution_status(local, run["id"]) == "SUCCEEDED"
    # And the same start sent again is refused (its session died with its attempt)
    again = call(local, "POST", "/api/v1/runner/apply-start", token=token, json=start)
    assert again.status_code == 401
    assert local.client.review(run["id"])["status"] == "apply_failed"
