"""When a stopped sandbox's notice is for the attempt its run still waits on, and what
an ECS task state change event says (``domain.sandbox_exits``)."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.domain.capabilities import Phase
from runplane.domain.parts import AttemptBody, AttemptState
from runplane.domain.run import RunStatus
from runplane.domain.sandbox_exits import (
    SandboxExit,
    is_task_reference,
    process_exit,
    process_reported,
    stale,
    stopped_task,
)

S = RunStatus
ECS = "arn:aws:ecs:eu-west-1:111122223333"
TASK = f"{ECS}:task/runplane-prod-sandboxes/0123456789abcdef0123456789abcdef"
CLUSTER = f"{ECS}:cluster/runplane-prod-sandboxes"


def notice(phase: Phase = Phase.APPLY, reference: str = "pid:42") -> SandboxExit:
    return SandboxExit("run-1", phase, "att-1", "sbx-1", reference, "the runner was killed")


def attempt(sandbox_ref: str | None = "pid:42", **ids: str) -> AttemptBody:
    return AttemptBody(
        attempt_id=ids.get("attempt_id", "att-1"),
        sandbox_id=ids.get("sandbox_id", "sbx-1"),
        phase="apply",
        launched_at="2026-01-01T00:00:00+00:00",
        sandbox_ref=sandbox_ref,
    )


@pytest.mark.parametrize(
    ("phase", "status", "state"),
    [
        (Phase.PLAN, S.PLANNING, AttemptState.STARTED),
        (Phase.APPLY, S.APPLYING, AttemptState.STARTED),
        (Phase.APPLY, S.AWAITING_APPROVAL, AttemptState.STARTED),
        # Its launch not recorded yet: named by attempt and sandbox alone
        (Phase.PLAN, S.PLANNING, AttemptState.LAUNCHING),
    ],
)
def test_a_notice_for_the_open_attempt_the_run_waits_on_is_taken(
    phase: Phase, status: RunStatus, state: AttemptState
) -> None:
    # Given the run's open attempt, launched for the notice's sandbox
    recorded = attempt(None if state is AttemptState.LAUNCHING else "pid:42")
    # When / Then nothing makes the notice stale
    assert stale(notice(phase), status, state, recorded) is None


@pytest.mark.parametrize(
    ("status", "state", "recorded", "why"),
    [
        # The runner reported, then exited normally
        (S.SUCCEEDED, AttemptState.SUCCEEDED, attempt(), "already closed (succeeded)"),
        (S.APPLY_FAILED, AttemptState.FAILED, attempt(), "already closed (failed)"),
        # A cancellation, a timeout, a recovery closed it first
        (S.APPLY_INTERRUPTED, AttemptState.STOPPED, attempt(), "already closed (stopped)"),
        (S.NEEDS_RECOVERY, AttemptState.LOST, attempt(), "already closed (lost)"),
        # Another attempt, another sandbox, another process
        (S.APPLYING, AttemptState.STARTED, attempt(attempt_id="att-2"), "is not the run's"),
        (S.APPLYING, AttemptState.STARTED, attempt(sandbox_id="sbx-2"), "is not the run's"),
        (S.APPLYING, AttemptState.STARTED, attempt("pid:43"), "runs in another sandbox"),
        # No such attempt at all
        (S.APPLYING, None, None, "has no apply attempt"),
        # An open attempt with the run somewhere its phase is not waited on
        (S.PLAN_COMPLETE, AttemptState.STARTED, attempt(), "is plan_complete"),
    ],
)
def test_a_notice_its_run_no_longer_waits_on_is_stale(
    status: RunStatus, state: AttemptState | None, recorded: AttemptBody | None, why: str
) -> None:
    # Given an apply sandbox's notice / When checked against the run and attempt read
    found = stale(notice(Phase.APPLY), status, state, recorded)
    # Then it is stale, and says why
    assert found is not None
    assert why in found


def test_a_notice_names_its_phase_and_how_the_sandbox_stopped_in_the_reason() -> None:
    # Given a plan sandbox whose runner was killed
    stopped = SandboxExit("run-1", Phase.PLAN, "att-1", "sbx-1", "pid:1", process_exit(-9))
    # Then the run's reason names the phase, the error the workflow is sent and the signal
    assert stopped.reason == (
        "plan: SandboxStopped (the runner process was killed by signal 9 (SIGKILL))"
    )
    assert len(SandboxExit("r", Phase.APPLY, "a", "s", "p", "x" * 500).reason) == 200


def test_a_process_that_exited_by_itself_says_its_code() -> None:
    assert process_exit(3) == "the runner process exited with code 3"
    assert process_exit(-200).endswith("(unknown signal)")


def test_only_ecs_task_arns_are_indexed_references() -> None:
    assert is_task_reference(TASK)
    # (the old ARN format has no cluster)
    assert is_task_reference("arn:aws:ecs:us-east-1:111122223333:task/0123abcd")
    for other in ("pid:123", "fake:sbx-1", f"{TASK}/more", CLUSTER, ""):
        assert not is_task_reference(other), other


def ecs_event(**detail: Any) -> dict[str, Any]:
    """An "ECS Task State Change" event as EventBridge delivers it (documented shape)."""
    return {
        "version": "0",
        "id": "3317b2af-7005-947d-b652-f55e762e571a",
        "detail-type": "ECS Task State Change",
        "source": "aws.ecs",
        "account": "111122223333",
        "time": "2026-01-01T00:00:00Z",
        "region": "eu-west-1",
        "resources": [TASK],
        "detail": {
            "clusterArn": CLUSTER,
            "taskArn": TASK,
            "taskDefinitionArn": f"{ECS}:task-definition/runplane-prod-runner:7",
            "lastStatus": "STOPPED",
            "desiredStatus": "STOPPED",
            "stopCode": "EssentialContainerExited",
            "stoppedReason": "Essential container in task exited",
            "containers": [{"name": "runner", "exitCode": 137, "lastStatus": "STOPPED"}],
            "overrides": {
                "containerOverrides": [
                    {
                        "name": "runner",
                        "environment": [{"name": "RUNPLANE_BOOTSTRAP", "value": "rpb_secret"}],
                    }
                ]
            },
            **detail,
        },
    }


def test_a_stopped_task_event_names_the_task_and_how_it_stopped_but_no_override() -> None:
    # Given ECS's event for a sandbox task that stopped
    # When it is read
    task = stopped_task(ecs_event())
    # Then it names the task, its cluster, and why it stopped
    assert task is not None
    assert (task.task_arn, task.cluster_arn) == (TASK, CLUSTER)
    assert task.detail == (
        "the ECS task stopped: EssentialContainerExited; Essential container in task "
        "exited; runner exit code 137"
    )
    # And nothing of the task's overrides (the runner's handles) is kept
    assert "rpb_secret" not in repr(task)


@pytest.mark.parametrize(
    "event",
    [
        ecs_event(lastStatus="RUNNING"),
        {**ecs_event(), "source": "aws.ec2"},
        {**ecs_event(), "detail-type": "ECS Container Instance State Change"},
        {**ecs_event(), "detail": "STOPPED"},
        ecs_event(taskArn=None),
        {},
    ],
)
def test_anything_but_a_stopped_task_is_no_stopped_task(event: dict[str, Any]) -> None:
    assert stopped_task(event) is None


def test_a_task_that_says_nothing_of_its_stop_still_is_one() -> None:
    # Given a stopped task's event without a code, a reason or an exit code
    task = stopped_task(ecs_event(stopCode=None, stoppedReason="", containers=[{"name": "x"}]))
    # Then it is noticed all the same
    assert task is not None
    assert task.detail == "the ECS task stopped: no reason given"


@pytest.mark.parametrize(
    ("containers", "reported"),
    [
        ([{"name": "runner", "exitCode": 0}], True),
        ([{"name": "runner", "exitCode": 1}], True),
        ([{"name": "runner", "exitCode": 2}], False),
        ([{"name": "runner", "exitCode": 143}], False),
        ([{"name": "runner"}], False),
        ([{"name": "runner", "exitCode": True}], False),
        ([{"name": "runner", "exitCode": 0}, {"name": "other", "exitCode": 0}], False),
        ("0", False),
    ],
)
def test_a_task_is_reported_only_when_its_one_runner_exited_after_its_report(
    containers: Any, reported: bool
) -> None:
    # Given a stopped task whose containers exited so
    task = stopped_task(ecs_event(containers=containers))
    # Then it counts as reported only for the runner's statuses after an accepted report
    assert task is not None
    assert task.reported is reported


def test_a_process_is_reported_only_for_the_runners_statuses_after_its_report() -> None:
    assert [process_reported(code) for code in (0, 1, 2, -9, 137)] == [
        True,
        True,
        False,
        False,
        False,
    ]
