"""The run workflow (``statemachines/run.asl.json``) executed by moto's interpreter, its
Tasks routed to scripted stand-ins of the task Lambdas (their replies are the shapes
``functions/tasks/handlers.py`` answers; what the steps do is the service tier's and the
e2e tier's). These pin the paths between the policy step and the approval wait."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from functions.tasks.handlers import HANDLERS
from runplane.domain.errors import ConcurrentChange
from runplane.local.moto_stepfunctions import clear_lambda_routes, enable_step_functions

if TYPE_CHECKING:
    from moto.core.config import DefaultConfig

ASL = Path(__file__).resolve().parents[2] / "statemachines" / "run.asl.json"
REGION = "us-east-1"
RUN = {"run_id": "run-1", "organization_id": "org-1", "workspace_id": "ws-1"}

Reply = Callable[[dict[str, Any]], Any]


@dataclass
class Lambdas:
    """Stand-ins for the run workflow's task Lambdas: each answers what ``replies`` holds
    for it (a value, an exception to raise, or a function of the event), in turn; the
    last one stays. Every invocation is recorded, by handler name, with its event."""

    sfn: Any
    execution_arn: str = ""
    replies: dict[str, list[Any]] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def handler(self, name: str) -> Callable[[dict[str, Any], Any], Any]:
        def handle(event: dict[str, Any], context: Any) -> Any:
            self.calls.append((name, event))
            queued = self.replies.get(name)
            if not queued:
                raise AssertionError(f"the workflow invoked {name}, which it should not")
            reply = queued.pop(0) if len(queued) > 1 else queued[0]
            if isinstance(reply, Exception):
                raise reply
            return reply(event) if callable(reply) else reply

        return handle

    def resume(self, output: dict[str, Any]) -> Reply:
        """A callback step that stores its token and is resumed with ``output`` from
        another thread, as the control plane resumes a wait."""

        def send(token: str, before: int) -> None:
            deadline = time.monotonic() + 20
            while True:
                try:
                    self.sfn.send_task_success(taskToken=token, output=json.dumps(output))
                    break
                except ClientError:  # not known yet: the step's Lambda is still answering
                    assert time.monotonic() < deadline, "the wait never took its token"
                    time.sleep(0.05)
            # moto loses an outcome sent before a wait with heartbeats starts waiting (it
            # sets up the heartbeat after the Lambda's answer): heartbeats wake that wait
            # to read it, until the task has succeeded.
            while time.monotonic() < deadline:
                try:
                    if self.tasks_succeeded() != before:
                        return
                except ClientError:
                    return  # the execution is gone: its test is over
                with contextlib.suppress(ClientError):  # refused until the wait is set up
                    self.sfn.send_task_heartbeat(taskToken=token)
                time.sleep(0.05)

        def store(event: dict[str, Any]) -> dict[str, Any]:
            before = self.tasks_succeeded()
            threading.Thread(target=send, args=(event["token"], before), daemon=True).start()
            return {"waiting": True}

        return store

    def tasks_succeeded(self) -> int:
        history = self.sfn.get_execution_history(executionArn=self.execution_arn)["events"]
        return sum(1 for event in history if event["type"] == "TaskSucceeded")


def stored(event: dict[str, Any]) -> dict[str, Any]:
    """A callback step that stores its token and is never resumed."""
    return {"waiting": True}


@pytest.fixture
def workflow() -> Iterator[tuple[Any, str, Lambdas]]:
    config: DefaultConfig = {
        "stepfunctions": {"execute_state_machine": True},
        "lambda": {"use_docker": False},
    }
    with mock_aws(config=config):
        sfn = boto3.client("stepfunctions", region_name=REGION)
        text = ASL.read_text(encoding="utf-8")
        for name in HANDLERS:
            arn = f"arn:aws:lambda:{REGION}:123456789012:function:run-{name}"
            text = text.replace(f"${{{name}FunctionArn}}", arn)
        arn = sfn.create_state_machine(
            name="run", definition=text, roleArn="arn:aws:iam::123456789012:role/sfn"
        )["stateMachineArn"]
        lambdas = Lambdas(sfn)
        enable_step_functions({f"run-{name}": lambdas.handler(name) for name in HANDLERS})
        try:
            yield sfn, arn, lambdas
        finally:
            clear_lambda_routes()


def planned(lambdas: Lambdas) -> None:
    """The steps up to the plan's result: queued with the writer taken, planned."""
    lambdas.replies["QueueRun"] = [
        {"needs_writer": False, "runner_timeout_seconds": 60, "runner_heartbeat_seconds": 30}
    ]
    lambdas.replies["StartRunner"] = [
        lambdas.resume({"outcome": "plan_complete", "plan_json_artifact_id": "art-json"}),
        lambdas.resume({"outcome": "applied"}),
    ]


def run(sfn: Any, arn: str, lambdas: Lambdas, name: str) -> dict[str, Any]:
    lambdas.execution_arn = f"{arn.replace(':stateMachine:', ':execution:')}:{name}"
    started = sfn.start_execution(stateMachineArn=arn, name=name, input=json.dumps(RUN))
    assert started["executionArn"] == lambdas.execution_arn
    deadline = time.monotonic() + 60
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=started["executionArn"])
        if described["status"] != "RUNNING":
            return described
        assert time.monotonic() < deadline, "the execution did not end"
        time.sleep(0.2)


def test_a_passed_policy_goes_straight_to_the_approval_wait(
    workflow: tuple[Any, str, Lambdas],
) -> None:
    sfn, arn, lambdas = workflow
    # Given a run whose policy step passes and asks for approval itself, and a reviewer
    # who approves at once
    planned(lambdas)
    lambdas.replies["EvaluatePolicy"] = [{"next": "approval", "approval_timeout_seconds": 3601}]
    lambdas.replies["WaitForApproval"] = [lambdas.resume({"decision": "approve"})]

    # When the workflow runs
    described = run(sfn, arn, lambdas, "passed")

    # Then it waits for approval right after the policy step, no approval request between
    # them, and applies once approved
    assert described["status"] == "SUCCEEDED"
    assert lambdas.names() == [
        "QueueRun",
        "StartRunner",
        "EvaluatePolicy",
        "WaitForApproval",
        "StartRunner",
    ]
    # And the policy step was given the plan step's output, as before
    evaluate = dict(lambdas.calls)["EvaluatePolicy"]
    assert evaluate["plan"]["plan_json_artifact_id"] == "art-json"


def test_the_approval_wait_lasts_what_the_policy_step_answered(
    workflow: tuple[Any, str, Lambdas],
) -> None:
    sfn, arn, lambdas = workflow
    # Given a policy step that answers a one-second wait, and no decision
    planned(lambdas)
    lambdas.replies["EvaluatePolicy"] = [{"next": "approval", "approval_timeout_seconds": 1}]
    lambdas.replies["WaitForApproval"] = [stored]
    lambdas.replies["ArbitrateExpiry"] = [{"decision": "expired"}]

    # When the workflow runs
    described = run(sfn, arn, lambdas, "expires")

    # Then the wait timed out after that second and the database arbitrated the expiry
    assert described["status"] == "SUCCEEDED"
    assert lambdas.names()[-2:] == ["WaitForApproval", "ArbitrateExpiry"]


def test_a_retried_policy_step_converges_on_the_approval_wait(
    workflow: tuple[Any, str, Lambdas],
) -> None:
    sfn, arn, lambdas = workflow
    # Given a policy step whose first try fails after its writes (a retryable error), and
    # whose retry finds the approval asked and answers its wait
    planned(lambdas)
    lambdas.replies["EvaluatePolicy"] = [
        ConcurrentChange("the approval's write was refused"),
        {"next": "approval", "approval_timeout_seconds": 3601},
    ]
    lambdas.replies["WaitForApproval"] = [lambdas.resume({"decision": "reject"})]

    # When the workflow runs
    described = run(sfn, arn, lambdas, "retried")

    # Then the step ran twice, the wait once, and the rejection ended the workflow
    assert described["status"] == "SUCCEEDED"
    assert lambdas.names() == [
        "QueueRun",
        "StartRunner",
        "EvaluatePolicy",
        "EvaluatePolicy",
        "WaitForApproval",
    ]


def test_nothing_to_apply_finishes_the_plan_without_a_wait(
    workflow: tuple[Any, str, Lambdas],
) -> None:
    sfn, arn, lambdas = workflow
    # Given a policy step with nothing to apply (no approval, so no timeout)
    planned(lambdas)
    lambdas.replies["EvaluatePolicy"] = [{"next": "finish", "approval_timeout_seconds": None}]
    lambdas.replies["FinishPlan"] = [{"status": "succeeded"}]

    # When the workflow runs
    described = run(sfn, arn, lambdas, "finish")

    # Then the plan finishes: no approval is asked or waited for
    assert described["status"] == "SUCCEEDED"
    assert lambdas.names() == ["QueueRun", "StartRunner", "EvaluatePolicy", "FinishPlan"]
