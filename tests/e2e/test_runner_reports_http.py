"""A runner's report over real HTTP: one that breaks the contract is a 422 naming the
field at fault, and nothing about the run changes."""

from __future__ import annotations

from typing import Any

from runplane.store import run_parts
from tests.e2e.conftest import Local
from tests.e2e.test_cloud_api_http import call
from tests.e2e.test_managed_runs import HELLO, new_workspace
from tests.e2e.test_runner_authority_http import apply_session

SUMMARY = {
    "adds": 1,
    "changes": 0,
    "destroys": 0,
    "replaces": 0,
    "output_changes": {},
    "has_changes": True,
}
PLANNED = {
    "outcome": "planned",
    "has_changes": True,
    "summary": SUMMARY,
    "plan_artifact_id": "art-plan",
    "plan_sha256": "a" * 64,
    "plan_json_artifact_id": "art-json",
    "plan_json_sha256": "b" * 64,
    "log_artifact_id": "art-log",
}
# (body, the pointer its 422 names)
MALFORMED: list[tuple[Any, str]] = [
    ({"outcome": "errored", "reason": "x"}, "/outcome"),
    ({"reason": "x"}, "/outcome"),
    ({"outcome": "failed"}, "/reason"),
    ({"outcome": "failed", "reason": 7}, "/reason"),
    ({"outcome": "applied"}, "/log_artifact_id"),
    ({"outcome": "applied", "log_artifact_id": "l", "engine_seconds": "2"}, "/engine_seconds"),
    ({"outcome": "applied", "log_artifact_id": "l", "state_published": True}, "/state_published"),
    ({**PLANNED, "summary": {**SUMMARY, "adds": "1"}}, "/summary/adds"),
    ({**PLANNED, "has_changes": False}, "/has_changes"),
    # Well formed, but an apply session cannot report a plan.
    (PLANNED, "/outcome"),
]


def observed(local: Local, run_id: str) -> tuple[object, ...]:
    services = local.stack.services
    assert services is not None
    runs = services.lifecycle.runs
    return runs.get(run_id), run_parts.all_of(run_id), runs.audit_trail(run_id)


def test_a_malformed_report_is_a_422_with_a_pointer_and_writes_nothing(local: Local) -> None:
    # Given a run awaiting approval and a session of an apply attempt of it
    run = local.client.create_run(new_workspace(local, "reports"), HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    token = apply_session(local, run["id"])
    before = observed(local, run["id"])

    for body, pointer in MALFORMED:
        # When the session posts a report that breaks the contract
        reply = call(local, "POST", "/api/v1/runner/result", token=token, json=body)

        # Then it is refused as invalid input naming the field at fault
        assert reply.status_code == 422, (body, reply.text)
        refused = reply.json()
        assert (refused["code"], refused["pointer"]) == ("INVALID_INPUT", pointer), body
        assert refused["message"]

    # And nothing about the run changed: its status, its parts, its audit trail
    assert observed(local, run["id"]) == before
    # And the session still works (its attempt was not closed)
    assert call(local, "POST", "/api/v1/runner/heartbeat", token=token).status_code == 200
