"""A sandbox that stops before its runner's result ends its run at once, as a heartbeat
timeout would, and a notice for anything else writes nothing: the service on moto, and
the Lambda that ECS's "Task State Change" events reach.

The arena drives real services step by step with fake workflow and launcher edges; its
fake workflow records which waits were failed.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from functions.sandboxes import handler as sandbox_lambda
from runplane import wiring
from runplane.adapters.launchers import LaunchRequest
from runplane.domain.capabilities import Phase
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import Failed
from runplane.domain.sandbox_exits import SandboxExit
from runplane.services.sandbox_exits import SandboxExits
from runplane.store import run_parts, sandbox_slots
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from runplane.store.sandbox_refs import sandbox_ref_key
from runplane.wiring import Services
from tests.integration.arena import Arena, applying, awaiting_approval, planning, to_apply_sandbox

S = RunStatus
REGION, ACCOUNT = "us-east-1", "123456789012"
CLUSTER = f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/runplane-test-sandboxes"
TASK_DEFINITIONS = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition"
OTHER_CLUSTER = f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/someone-elses"
KILLED = "the runner process was killed by signal 9 (SIGKILL)"
# A handle as the task's overrides carry it (the runner's environment).
HANDLE = "rpb_handle-in-the-overrides"


def exits(arena: Arena) -> SandboxExits:
    return arena.stack.services.sandbox_exits


def notice_of(arena: Arena, run_id: str, phase: Phase, **changed: str) -> SandboxExit:
    """The notice the launcher gives when the run's ``phase`` sandbox ends: named by what
    its launch recorded (``changed`` overrides a field, as a stale notice would)."""
    attempt = run_parts.require(run_id, f"attempt#{phase.value}").body
    fields: dict[str, Any] = {
        "run_id": run_id,
        "phase": phase,
        "attempt_id": attempt["attempt_id"],
        "sandbox_id": attempt["sandbox_id"],
        "reference": attempt["sandbox_ref"],
        "detail": KILLED,
        **changed,
    }
    return SandboxExit(**fields)


def slots(arena: Arena) -> int:
    return sandbox_slots.active(arena.org.id)


# -- the run ends as a heartbeat timeout would end it, at once --------------------------


def test_a_plan_sandbox_that_stopped_fails_the_plan_and_frees_the_workspace(arena: Arena) -> None:
    # Given a planning run whose plan sandbox holds the workspace and a slot
    ws, run_id = planning(arena, "stopped-plan")
    assert slots(arena) == 1

    # When its sandbox is seen to stop before the plan's result
    noticed = exits(arena).stopped(notice_of(arena, run_id, Phase.PLAN))

    # Then the plan failed, saying its sandbox stopped and how
    assert noticed.as_dict() == {"outcome": "ended", "run_id": run_id, "status": "plan_failed"}
    run = arena.stack.lifecycle.runs.get(run_id)
    assert run.status is S.PLAN_FAILED
    assert run.status_reason == f"plan: SandboxStopped ({KILLED})"
    # And the attempt is lost (noting how), its slot returned, the workspace free
    attempt = run_parts.require(run_id, "attempt#plan")
    assert (attempt.state, attempt.body["reason"], attempt.token) == ("lost", KILLED, None)
    assert slots(arena) == 0
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id is None
    # And the workflow's plan wait is failed, to take its failure path at once
    assert arena.workflow.failed == ["token-plan"]


def test_an_apply_sandbox_that_stopped_mid_apply_needs_recovery_holding_the_workspace(
    arena: Arena,
) -> None:
    # Given an applying run (its start proven) holding the workspace and its apply lock
    ws, run_id = applying(arena, "stopped-apply")

    # When its sandbox is seen to stop
    noticed = exits(arena).stopped(notice_of(arena, run_id, Phase.APPLY))

    # Then the outcome is unknown: needs_recovery, never success or failure
    assert noticed.status == "needs_recovery"
    run = arena.stack.lifecycle.runs.get(run_id)
    assert (run.status, run.status_reason) == (
        S.NEEDS_RECOVERY,
        f"apply: SandboxStopped ({KILLED})",
    )
    assert run_parts.require(run_id, "apply").state == "uncertain"
    assert run_parts.require(run_id, "attempt#apply").state == "lost"
    # And the run keeps the workspace's writer authority and its lock for recovery
    workspace = workspace_store.get_workspace(ws, reads=IdentityMap())
    assert (workspace.writer_run_id, workspace.lock_run_id) == (run_id, run_id)
    assert arena.workflow.failed == ["token-apply"]


def test_an_apply_sandbox_that_stopped_before_proving_its_start_leaves_it_uncertain(
    arena: Arena,
) -> None:
    # Given an approved run whose apply sandbox started but never proved its start
    ws, run_id = awaiting_approval(arena, "stopped-start")
    to_apply_sandbox(arena, run_id)

    # When its sandbox is seen to stop
    noticed = exits(arena).stopped(notice_of(arena, run_id, Phase.APPLY))

    # Then, as after a heartbeat timeout, the start is uncertain and the workspace kept
    assert noticed.status == "apply_start_uncertain"
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id == run_id


def test_a_notice_that_races_the_apply_start_ends_the_run_as_the_start_left_it(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an approved run whose apply sandbox started, read by the notice before the
    # sandbox's apply start committed
    _, run_id = awaiting_approval(arena, "stopped-racing")
    to_apply_sandbox(arena, run_id)
    runs = arena.stack.lifecycle.runs
    before_start = runs.get(run_id)
    arena.apply_start(run_id)
    read = runs.get
    stale_first = itertools.chain([before_start], iter(lambda: read(run_id), None))
    monkeypatch.setattr(runs, "get", lambda _run_id: next(stale_first))

    # When the notice is handled
    noticed = exits(arena).stopped(notice_of(arena, run_id, Phase.APPLY))

    # Then its first move was refused, and it read the run again: the apply had started
    assert noticed.status == "needs_recovery"
    monkeypatch.undo()
    assert runs.get(run_id).status is S.NEEDS_RECOVERY


# -- a notice for anything the run no longer waits on writes nothing ------------------


def _stale_cases() -> list[str]:
    return ["reported", "canceled", "other-attempt", "other-sandbox", "timed-out", "no-run"]


@pytest.mark.parametrize("case", _stale_cases())
def test_a_stale_notice_is_acknowledged_and_writes_nothing(arena: Arena, case: str) -> None:
    # Given a run whose apply sandbox's notice comes too late, or names something else
    _, run_id = applying(arena, f"stale-{case}")
    notice = notice_of(arena, run_id, Phase.APPLY)
    attempt = run_parts.require(run_id, "attempt#apply").body
    if case == "reported":  # the runner reported, then exited normally
        arena.orchestration.report_apply(run_id, attempt["attempt_id"], Failed(reason="boom"))
    elif case == "canceled":  # a cancellation stopped the sandbox
        arena.runs.cancel(arena.admin, run_id, arena.launcher)
    elif case == "timed-out":  # the heartbeat window ran out first
        arena.orchestration.fail(run_id, "apply", "States.HeartbeatTimeout")
    elif case == "other-attempt":
        notice = notice_of(arena, run_id, Phase.APPLY, attempt_id="att-someone-else")
    elif case == "other-sandbox":  # another process that had the same run in its name
        notice = notice_of(arena, run_id, Phase.APPLY, reference="pid:1")
    elif case == "no-run":
        notice = replace(notice, run_id="run-unknown")
    before, failed = arena.stack.scan(), list(arena.workflow.failed)
    status = arena.stack.lifecycle.runs.get(run_id).status

    # When the notice is handled
    noticed = exits(arena).stopped(notice)

    # Then it is acknowledged, says why it changed nothing, and nothing was written
    assert noticed.outcome == "ignored"
    assert noticed.why
    assert arena.stack.scan() == before
    assert arena.workflow.failed == failed
    assert arena.stack.lifecycle.runs.get(run_id).status is status


# -- ECS: the Lambda that task state change events reach -------------------------------


class TaskLauncher:
    """Launches as ECS would: each sandbox a task of the sandbox cluster, by ARN (the
    arena's launcher still records the request, as its runner would be handed it)."""

    def __init__(self, recording: Callable[[LaunchRequest], str]) -> None:
        self._recording = recording
        self._numbers = itertools.count(1)

    def launch(self, request: LaunchRequest) -> str:
        self._recording(request)
        task_id = f"{next(self._numbers):032x}"
        return f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/runplane-test-sandboxes/{task_id}"


@pytest.fixture
def on_ecs(arena: Arena, monkeypatch: pytest.MonkeyPatch) -> Iterator[Services]:
    """Sandboxes launched as ECS tasks, and the Lambda's process knowing the cluster."""
    monkeypatch.setattr(arena.launcher, "launch", TaskLauncher(arena.launcher.launch).launch)
    lambda_services = arena.stack.rewired(ecs_cluster=CLUSTER)
    wiring.install(lambda_services)
    yield lambda_services
    wiring._installed.clear()


def task_state_change(task_arn: str, *, cluster: str = CLUSTER, secret: str = "") -> dict[str, Any]:
    """ECS's "Task State Change" event for a stopped task, as EventBridge delivers it
    (the documented shape, overrides included)."""
    return {
        "version": "0",
        "id": "9bcdac79-b31f-4d3d-9410-fbd727c29fab",
        "detail-type": "ECS Task State Change",
        "source": "aws.ecs",
        "account": ACCOUNT,
        "time": "2026-01-01T12:00:00Z",
        "region": REGION,
        "resources": [task_arn],
        "detail": {
            "clusterArn": cluster,
            "taskArn": task_arn,
            "taskDefinitionArn": f"{TASK_DEFINITIONS}/runplane-test-runner:3",
            "lastStatus": "STOPPED",
            "desiredStatus": "STOPPED",
            "launchType": "FARGATE",
            "stopCode": "EssentialContainerExited",
            "stoppedReason": "Essential container in task exited",
            "stoppingAt": "2026-01-01T11:59:58.000Z",
            "stoppedAt": "2026-01-01T12:00:00.000Z",
            "containers": [
                {
                    "containerArn": f"arn:aws:ecs:{REGION}:{ACCOUNT}:container/abc",
                    "name": "runner",
                    "lastStatus": "STOPPED",
                    "exitCode": 137,
                    "taskArn": task_arn,
                }
            ],
            "overrides": {
                "containerOverrides": [
                    {
                        "name": "runner",
                        "environment": [{"name": "RUNPLANE_BOOTSTRAP", "value": secret}],
                    }
                ]
            },
            "startedBy": "sbx-0123",
            "version": 4,
        },
    }


def test_a_stopped_apply_task_makes_its_run_need_recovery(
    arena: Arena, on_ecs: Services, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an applying run whose sandbox runs as an ECS task
    ws, run_id = applying(arena, "ecs-apply")
    task_arn = run_parts.require(run_id, "attempt#apply").body["sandbox_ref"]
    caplog.set_level(logging.DEBUG)

    # When ECS reports the task stopped (its container killed)
    answer = sandbox_lambda.stopped(task_state_change(task_arn, secret=HANDLE), None)

    # Then the run needs recovery at once, saying ECS stopped its sandbox and how
    assert answer == {"outcome": "ended", "run_id": run_id, "status": "needs_recovery"}
    run = arena.stack.lifecycle.runs.get(run_id)
    assert run.status is S.NEEDS_RECOVERY
    assert run.status_reason is not None
    assert run.status_reason.startswith("apply: SandboxStopped (the ECS task stopped: ")
    assert "runner exit code 137" in run.status_reason
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id == run_id
    assert arena.workflow.failed == ["token-apply"]
    # And nothing of the event's overrides was logged
    assert caplog.records
    assert HANDLE not in caplog.text


def test_a_stopped_plan_task_fails_its_plan(arena: Arena, on_ecs: Services) -> None:
    ws, run_id = planning(arena, "ecs-plan")
    task_arn = run_parts.require(run_id, "attempt#plan").body["sandbox_ref"]

    answer = sandbox_lambda.stopped(task_state_change(task_arn), None)

    assert answer["status"] == "plan_failed"
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id is None


def test_the_launch_records_which_attempt_each_task_runs(arena: Arena, on_ecs: Services) -> None:
    # Given a plan sandbox launched as a task
    _, run_id = planning(arena, "ecs-recorded")
    attempt = run_parts.require(run_id, "attempt#plan").body
    # Then the task's ARN leads to the attempt, recorded with the launch
    item = next(
        i
        for i in arena.stack.scan()
        if (i["PK"]["S"], i["SK"]["S"]) == sandbox_ref_key(attempt["sandbox_ref"])
    )
    assert {k: item[k]["S"] for k in ("run_id", "phase", "attempt_id", "sandbox_id")} == {
        "run_id": run_id,
        "phase": "plan",
        "attempt_id": attempt["attempt_id"],
        "sandbox_id": attempt["sandbox_id"],
    }
    assert "expires_at" in item


@pytest.mark.parametrize("case", ["unknown-task", "other-cluster", "reported", "not-stopped"])
def test_events_the_run_does_not_wait_on_are_acknowledged_and_write_nothing(
    arena: Arena, on_ecs: Services, case: str
) -> None:
    # Given an applying run whose sandbox is an ECS task
    _, run_id = applying(arena, f"ecs-{case}")
    attempt = run_parts.require(run_id, "attempt#apply").body
    event = task_state_change(attempt["sandbox_ref"])
    if case == "unknown-task":
        event = task_state_change(attempt["sandbox_ref"][:-4] + "ffff")
    elif case == "other-cluster":
        event = task_state_change(attempt["sandbox_ref"], cluster=OTHER_CLUSTER)
    elif case == "reported":  # the runner reported its result, then its task stopped
        arena.orchestration.report_apply(run_id, attempt["attempt_id"], Failed(reason="boom"))
    elif case == "not-stopped":
        event["detail"]["lastStatus"] = "RUNNING"
    before, failed = arena.stack.scan(), list(arena.workflow.failed)

    # When the Lambda gets the event
    answer = sandbox_lambda.stopped(event, None)

    # Then it is acknowledged (no error, so no redelivery), and nothing changed
    assert answer["outcome"] == "ignored"
    assert arena.stack.scan() == before
    assert arena.workflow.failed == failed
