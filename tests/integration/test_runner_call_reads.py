"""What a runner's calls and its start step read: a run and the parts a call needs come
back in one consistent request (they share the run's partition)."""

from __future__ import annotations

import pytest

from runplane.domain.plan_summary import PlanSummary
from runplane.domain.runner_reports import Failed, Planned
from runplane.store import run_parts
from runplane.store.request_reads import REQUEST
from tests.integration.arena import (
    Arena,
    applying,
    awaiting_approval,
    planned,
    planning,
    put_through,
    show_json,
    to_apply_sandbox,
)
from tests.integration.dynamodb_requests import DynamoDBRequests


def test_an_apply_sandbox_s_start_reads_the_run_once_and_writes_twice(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an approved run whose workflow is about to start its apply sandbox
    _, run_id = awaiting_approval(arena, "start-reads")
    arena.runs.decide(arena.admin, run_id, "approve", None)
    requests = DynamoDBRequests(monkeypatch)

    # When the start step runs, given the run's scope as its execution input names it
    started = arena.orchestration.start_runner(
        run_id, "apply", "token-apply", arena.scope_of(run_id)
    )
    sent = list(requests.operations)

    # Then it read the run, its attempt, input and plan, its workspace and its launch
    # controls in one request
    assert started["replayed"] is False
    assert run_parts.require(run_id, "attempt#apply").state == "started"
    assert [op for op in sent if op != "TransactWriteItems"] == ["BatchGetItem"]
    # And wrote twice: the attempt with the apply lock, its apply record, slots and
    # both capabilities; then the attempt's launch
    assert sent.count("TransactWriteItems") == 2


def test_a_start_step_without_its_run_s_scope_reads_one_item_after_another(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an approved run whose execution started before inputs named its scope
    _, run_id = awaiting_approval(arena, "start-reads-unscoped")
    arena.runs.decide(arena.admin, run_id, "approve", None)
    requests = DynamoDBRequests(monkeypatch)

    # When the start step runs with the run's ID alone
    started = arena.orchestration.start_runner(run_id, "apply", "token-apply")
    sent = list(requests.operations)

    # Then it still starts: the run with its parts, then the launch controls, then the
    # workspace, each read when asked
    assert started["replayed"] is False
    assert run_parts.require(run_id, "attempt#apply").state == "started"
    assert [op for op in sent if op != "TransactWriteItems"] == [
        "BatchGetItem",
        "BatchGetItem",
        "GetItem",
    ]


def test_an_apply_sandbox_s_session_start_is_one_read_and_one_write(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox redeeming its bootstrap handle
    _, run_id = applying(arena, "manifest-reads")
    requests = DynamoDBRequests(monkeypatch)

    # When it starts its session, naming the inputs its launch named
    token = arena.runner_token(run_id, "apply")

    # Then the handle, its attempt and the manifest's items (run, input, plan and the
    # inputs' records) were one request, and the session one write (after the test's
    # own read of the attempt, to find the handle)
    assert token.startswith("rps_")
    assert requests.operations == ["GetItem", "BatchGetItem", "TransactWriteItems"]


def test_a_session_start_naming_no_inputs_reads_its_manifest_after_its_write(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox whose runner names no inputs (an earlier release)
    _, run_id = applying(arena, "manifest-unnamed")
    attempt = run_parts.require(run_id, "attempt#apply").body
    request = arena.launcher.requests[attempt["sandbox_id"]]
    requests = DynamoDBRequests(monkeypatch)

    # When it starts its session
    started = arena.runner_api.start(
        request.bootstrap,
        run_id=run_id,
        attempt_id=attempt["attempt_id"],
        phase="apply",
        sandbox_id=attempt["sandbox_id"],
    )

    # Then its manifest and grants are the same, its inputs' records read after the write
    assert started["manifest"]["plan_artifact_id"] in request.inputs
    downloads = set(started["grants"]["downloads"])
    assert started["manifest"]["configuration_artifact_id"] in downloads
    assert downloads <= set(request.inputs)
    assert requests.operations == ["BatchGetItem", "TransactWriteItems", "BatchGetItem"]


def test_a_runner_s_lock_checks_its_run_and_attempt_in_one_read(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox
    ws_id, run_id = applying(arena, "lock-reads")
    runner = arena.runner(run_id, "apply")
    requests = DynamoDBRequests(monkeypatch)

    # When the engine locks the workspace
    locked = arena.stack.workspaces.lock(runner, ws_id, "Locked by Terraform")

    # Then the workspace, then the run with its apply attempt, were read: one request
    # each (the workflow took the lock for the attempt: this call only confirms it)
    assert locked.lock_run_id == run_id
    assert requests.operations == ["GetItem", "BatchGetItem"]


def test_an_apply_start_reads_its_run_plan_attempt_and_approval_in_one_request(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an approved run whose apply sandbox started its session
    _, run_id = awaiting_approval(arena, "apply-start-reads")
    attempt = to_apply_sandbox(arena, run_id)
    runner = arena.runner(run_id, "apply")
    handle = arena.launcher.requests[attempt["sandbox_id"]].apply_start
    assert handle is not None
    plan_sha256 = run_parts.require(run_id, "plan").body["plan_sha256"]
    requests = DynamoDBRequests(monkeypatch)

    # When it presents the approved plan to start applying
    started = arena.runner_api.apply_start(runner, handle, {"plan_sha256": plan_sha256})
    sent = list(requests.operations)

    # Then the run is applying under the attempt's fence, after one read of the run, its
    # plan, attempt and approval, and one write (the redemption with the move)
    assert started["fence"] == str(attempt["fence"])
    assert arena.runs.get(arena.admin, run_id).status.value == "applying"
    assert sent == ["BatchGetItem", "TransactWriteItems"]


def test_an_apply_start_is_served_its_plan_and_approval_by_its_authentication(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an approved run whose apply sandbox started its session and made a call
    _, run_id = awaiting_approval(arena, "apply-start-served")
    attempt = to_apply_sandbox(arena, run_id)
    authorization = f"Bearer {arena.runner_token(run_id, 'apply')}"
    arena.stack.identity.authenticate_request(authorization)
    handle = arena.launcher.requests[attempt["sandbox_id"]].apply_start
    assert handle is not None
    plan_sha256 = run_parts.require(run_id, "plan").body["plan_sha256"]
    requests = DynamoDBRequests(monkeypatch)

    # When it presents the approved plan, authenticated on the apply start's route
    principal, read = arena.stack.identity.authenticate_request(
        authorization, "POST /api/v1/runner/apply-start"
    )
    with REQUEST.opened(read):
        started = arena.runner_api.apply_start(principal, handle, {"plan_sha256": plan_sha256})

    # Then it is applying after the authentication's one read and the start's one write
    assert started["fence"] == str(attempt["fence"])
    assert arena.runs.get(arena.admin, run_id).status.value == "applying"
    assert requests.operations[:2] == ["BatchGetItem", "TransactWriteItems"]


def test_a_plan_result_reads_its_run_and_attempt_in_one_request(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a planning run whose sandbox has registered its plan, plan JSON and log
    _, run_id = planning(arena, "plan-result-reads")
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]
    report = planned(arena, run_id, PlanSummary(adds=1, has_changes=True))
    requests = DynamoDBRequests(monkeypatch)

    # When the runner reports the plan
    status = arena.orchestration.report_plan(run_id, attempt, report)
    sent = list(requests.operations)

    # Then the run moved with its plan evidence after one read (the run with its
    # attempt, which names the sessions to revoke, and the records of the artifacts the
    # report names, each checked as this attempt's), in one write
    assert status == "plan_complete"
    assert run_parts.require(run_id, "plan").state == "committed"
    assert sent == ["BatchGetItem", "TransactWriteItems"]


def test_a_plan_result_with_its_uploads_takes_them_in_its_one_write(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a planning run's sandbox that put its plan, plan JSON and log through the
    # upload grants its session start handed over, and has made a call before
    _, run_id = planning(arena, "plan-result-uploads")
    attempt = run_parts.require(run_id, "attempt#plan").body
    started = arena.runner_api.start(
        arena.launcher.requests[attempt["sandbox_id"]].bootstrap,
        run_id=run_id,
        attempt_id=attempt["attempt_id"],
        phase="plan",
        sandbox_id=attempt["sandbox_id"],
    )
    bodies = {"plan": b"plan", "plan_json": show_json(("one", ["create"])), "logs": b"log\n"}
    uploads = {
        kind: put_through(started["grants"]["uploads"][kind], bodies[kind]) for kind in bodies
    }
    authorization = f"Bearer {started['token']}"
    arena.stack.identity.authenticate_request(authorization)
    report = Planned(
        summary=PlanSummary(adds=1, has_changes=True),
        plan_artifact_id=uploads["plan"].artifact_id,
        plan_sha256=uploads["plan"].sha256,
        plan_json_artifact_id=uploads["plan_json"].artifact_id,
        plan_json_sha256=uploads["plan_json"].sha256,
        log_artifact_id=uploads["logs"].artifact_id,
    )
    requests = DynamoDBRequests(monkeypatch)

    # When it reports its plan with those uploads, authenticated as the run API does
    principal, read = arena.stack.identity.authenticate_request(authorization)
    with REQUEST.opened(read):
        status = arena.runner_api.report(principal, report, list(uploads.values()))
    sent = list(requests.operations)

    # Then the run moved with its plan, and every upload reads back
    assert status == {"status": "plan_complete"}
    for kind, upload in uploads.items():
        assert arena.stack.artifacts.read(arena.org.id, upload.artifact_id) == bodies[kind]
    # And the call read once (its authentication, which brought the run and its attempt)
    # and wrote once: the uploads' records with the plan and the run's move
    assert sent == ["BatchGetItem", "TransactWriteItems"]


def test_an_apply_result_is_served_its_run_attempt_and_record_by_its_authentication(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox that has made a call before
    _, run_id = applying(arena, "apply-result-reads")
    token = arena.runner_token(run_id, "apply")
    authorization = f"Bearer {token}"
    arena.stack.identity.authenticate_request(authorization)
    requests = DynamoDBRequests(monkeypatch)

    # When it reports that its engine failed, authenticated as the run API does
    principal, read = arena.stack.identity.authenticate_request(authorization)
    with REQUEST.opened(read):
        status = arena.runner_api.report(principal, Failed(reason="the engine failed"))
    sent = list(requests.operations)

    # Then the apply failed after one read, the authentication's (the run, its attempt,
    # its apply record and its workspace, which the release of its lock takes too), and
    # one write
    assert status == {"status": "apply_failed"}
    assert sent == ["BatchGetItem", "TransactWriteItems"]
