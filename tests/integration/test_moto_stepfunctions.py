"""Contract tests: the moto Step Functions behaviour the embedded stack depends on.

Each test runs real ASL in moto (``execute_state_machine``) with Lambda Tasks routed to
in-process Python handlers by ``runplane.local.moto_stepfunctions``. If a moto upgrade
changes any of this, these tests say what broke.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.config import DefaultConfig
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.core.utils import get_service_model

from runplane.local.moto_stepfunctions import (
    LambdaContext,
    check_moto_version,
    clear_lambda_routes,
    enable_step_functions,
    fix_task_token_race,
    function_name_of,
    route_lambda_invocations,
)

REGION = "us-east-1"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/runplane-test-sfn"
CONFIG: DefaultConfig = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}
TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}
POLL_SECONDS = 0.2  # faster polling starves the execution threads on small machines


class PlanFailed(Exception):
    pass


class Rejected(Exception):
    pass


@dataclass
class Sfn:
    """A Step Functions client plus the executions a test started, for cleanup."""

    client: Any
    started: list[str] = field(default_factory=list)

    def machine(self, name: str, states: dict[str, Any], start_at: str) -> str:
        definition = json.dumps({"StartAt": start_at, "States": states})
        created = self.client.create_state_machine(name=name, definition=definition, roleArn=ROLE)
        return str(created["stateMachineArn"])

    def start(self, machine_arn: str, name: str, payload: dict[str, Any]) -> str:
        started = self.client.start_execution(
            stateMachineArn=machine_arn, name=name, input=json.dumps(payload)
        )
        self.started.append(started["executionArn"])
        return str(started["executionArn"])

    def wait(self, execution_arn: str, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            described: dict[str, Any] = self.client.describe_execution(executionArn=execution_arn)
            if described["status"] in TERMINAL:
                return described
            if time.monotonic() > deadline:
                raise AssertionError(f"{execution_arn} still {described['status']}")
            time.sleep(POLL_SECONDS)

    def run(self, machine_arn: str, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.wait(self.start(machine_arn, name, payload))

    def abort_running(self) -> None:
        """Leave no execution thread waiting forever when a test failed midway."""
        for execution_arn in self.started:
            if self.client.describe_execution(executionArn=execution_arn)["status"] == "RUNNING":
                self.client.stop_execution(executionArn=execution_arn)


def output(described: dict[str, Any]) -> Any:
    return json.loads(described["output"])


def lambda_task(function: str, *, next_state: str | None = None, **extra: Any) -> dict[str, Any]:
    """``arn:aws:states:::lambda:invoke`` passing the state input, result = handler's return."""
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": function, "Payload.$": "$"},
        "OutputPath": "$.Payload",
        **extra,
    }
    state.update({"Next": next_state} if next_state else {"End": True})
    return state


def token_task(function: str, *, next_state: str | None = None, **extra: Any) -> dict[str, Any]:
    """``.waitForTaskToken``: the handler receives the token; the result is what is sent."""
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {
            "FunctionName": function,
            "Payload": {"token.$": "$$.Task.Token", "execution.$": "$$.Execution.Name"},
        },
        **extra,
    }
    state.update({"Next": next_state} if next_state else {"End": True})
    return state


def catch(error: str, next_state: str) -> list[dict[str, Any]]:
    return [{"ErrorEquals": [error], "ResultPath": "$.error", "Next": next_state}]


HANDLED = {"Type": "Pass", "End": True}


def tokens_into(inbox: queue.Queue[tuple[str, str]]) -> Callable[[dict[str, Any], Any], Any]:
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        inbox.put((event["execution"], event["token"]))
        return {"waiting": True}

    return handler


def _warm_up() -> None:
    # Cold, every execution thread loads botocore's service models at once (tens of s).
    for service in ("lambda", "stepfunctions"):
        get_service_model(service)
        boto3.client(service, region_name=REGION)


@pytest.fixture
def sfn() -> Iterator[Sfn]:
    enable_step_functions({})
    with mock_aws(config=CONFIG):
        _warm_up()
        harness = Sfn(boto3.client("stepfunctions", region_name=REGION))
        try:
            yield harness
        finally:
            harness.abort_running()
            clear_lambda_routes()


def test_the_pinned_moto_minor_is_installed() -> None:
    # Given / When: the installed moto
    version = check_moto_version()

    # Then: it is the minor the patches were verified against
    assert version.startswith("5.2.")


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("plan", "plan"),
        ("plan:live", "plan"),
        ("arn:aws:lambda:us-east-1:123456789012:function:plan", "plan"),
        ("arn:aws:lambda:us-east-1:123456789012:function:plan:$LATEST", "plan"),
        ("123456789012:function:plan", "plan"),
    ],
)
def test_function_names_and_arns_resolve_to_the_bare_name(given: str, name: str) -> None:
    # Given / When / Then: every form Lambda accepts names the same function
    assert function_name_of(given) == name


def test_a_direct_invoke_reaches_the_routed_handler_and_routes_are_replaced(sfn: Sfn) -> None:
    # Given: a handler that reports what it received
    def describe(event: dict[str, Any], context: Any) -> dict[str, Any]:
        assert isinstance(context, LambdaContext)
        return {
            "event": event,
            "function": context.function_name,
            "request_id": bool(context.aws_request_id),
            "time_left": context.get_remaining_time_in_millis() > 0,
        }

    route_lambda_invocations({"describe": describe})
    client = boto3.client("lambda", region_name=REGION)
    arn = f"arn:aws:lambda:{REGION}:{DEFAULT_ACCOUNT_ID}:function:describe:$LATEST"

    # When: it is invoked by ARN
    invoked = client.invoke(FunctionName=arn, Payload=json.dumps({"a": 1}))

    # Then: the handler ran in-process with the decoded payload and a context
    assert "FunctionError" not in invoked
    assert json.loads(invoked["Payload"].read()) == {
        "event": {"a": 1},
        "function": "describe",
        "request_id": True,
        "time_left": True,
    }

    # When: the routing table is replaced
    route_lambda_invocations({"other": lambda event, context: None})

    # Then: the old function is unknown, loudly
    with pytest.raises(ClientError) as refused:
        client.invoke(FunctionName="describe", Payload=b"{}")
    assert refused.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "describe" in refused.value.response["Error"]["Message"]


def test_a_lambda_task_returns_the_handler_result(sfn: Sfn) -> None:
    # Given: a state machine whose Lambda Task calls our Python handler
    route_lambda_invocations({"plan": lambda event, context: {"planned": event["run"]}})
    machine = sfn.machine("plan", {"Plan": lambda_task("plan")}, "Plan")

    # When: it runs
    described = sfn.run(machine, "run-1", {"run": "r-1"})

    # Then: the execution output is the handler's return value
    assert described["status"] == "SUCCEEDED"
    assert output(described) == {"planned": "r-1"}


def test_a_handler_exception_is_caught_by_its_class_name(sfn: Sfn) -> None:
    # Given: a handler that raises PlanFailed, caught by name; and one raising something else
    def fail(event: dict[str, Any], context: Any) -> Any:
        raise PlanFailed("no plan for " + event["run"])

    def crash(event: dict[str, Any], context: Any) -> Any:
        raise KeyError("boom")

    route_lambda_invocations({"plan": fail, "crash": crash})
    caught = sfn.machine(
        "caught",
        {"Plan": lambda_task("plan", Catch=catch("PlanFailed", "Handled")), "Handled": HANDLED},
        "Plan",
    )
    uncaught = sfn.machine(
        "uncaught",
        {"Plan": lambda_task("crash", Catch=catch("PlanFailed", "Handled")), "Handled": HANDLED},
        "Plan",
    )

    # When: both run
    handled = sfn.run(caught, "caught-1", {"run": "r-1"})
    failed = sfn.run(uncaught, "uncaught-1", {"run": "r-1"})

    # Then: the Catch on "PlanFailed" matched and saw the message
    assert handled["status"] == "SUCCEEDED"
    error = output(handled)["error"]
    assert error["Error"] == "PlanFailed"
    assert json.loads(error["Cause"]) == {
        "errorType": "PlanFailed",
        "errorMessage": "no plan for r-1",
    }

    # Then: an exception no Catch names fails the execution with its class name
    assert failed["status"] == "FAILED"
    assert failed["error"] == "KeyError"


def test_a_retry_on_the_class_name_retries_the_handler(sfn: Sfn) -> None:
    # Given: a handler that fails twice then succeeds, retried twice on PlanFailed
    calls: list[dict[str, Any]] = []

    def flaky(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append(event)
        if len(calls) <= 2:
            raise PlanFailed(f"attempt {len(calls)}")
        return {"attempts": len(calls)}

    route_lambda_invocations({"flaky": flaky})
    retry = [{"ErrorEquals": ["PlanFailed"], "IntervalSeconds": 1, "MaxAttempts": 2}]
    machine = sfn.machine("retry", {"Plan": lambda_task("flaky", Retry=retry)}, "Plan")

    # When: it runs
    described = sfn.run(machine, "retry-1", {"run": "r-1"})

    # Then: the handler ran three times and the third result is the output
    assert described["status"] == "SUCCEEDED"
    assert output(described) == {"attempts": 3}
    assert calls == [{"run": "r-1"}] * 3


def test_executions_of_one_definition_at_once_keep_their_own_retry_counts(sfn: Sfn) -> None:
    # Given: a handler whose first call in each execution fails, both first calls held
    # until the other has started, and one retry allowed (the program is built once
    # per definition and shared by its executions)
    both_started = threading.Barrier(2, timeout=10)
    calls: dict[str, int] = {}
    guard = threading.Lock()

    def flaky_once(event: dict[str, Any], context: Any) -> dict[str, Any]:
        with guard:
            calls[event["run"]] = calls.get(event["run"], 0) + 1
            attempt = calls[event["run"]]
        if attempt == 1:
            both_started.wait()
            raise PlanFailed(f"first attempt of {event['run']}")
        return {"attempts": attempt}

    route_lambda_invocations({"flaky": flaky_once})
    retry = [{"ErrorEquals": ["PlanFailed"], "IntervalSeconds": 1, "MaxAttempts": 1}]
    machine = sfn.machine("retry-each", {"Plan": lambda_task("flaky", Retry=retry)}, "Plan")

    # When: two executions run at once
    first = sfn.start(machine, "each-1", {"run": "r-1"})
    second = sfn.start(machine, "each-2", {"run": "r-2"})
    described = [sfn.wait(first), sfn.wait(second)]

    # Then: each retried its own failure once, and succeeded
    assert [d["status"] for d in described] == ["SUCCEEDED", "SUCCEEDED"]
    assert [output(d) for d in described] == [{"attempts": 2}, {"attempts": 2}]
    assert calls == {"r-1": 2, "r-2": 2}


def test_a_task_token_sent_from_another_thread_resumes_the_execution(sfn: Sfn) -> None:
    # Given: an execution waiting on a task token its handler handed out
    inbox: queue.Queue[tuple[str, str]] = queue.Queue()
    route_lambda_invocations({"approve": tokens_into(inbox)})
    machine = sfn.machine("approve", {"Approve": token_task("approve")}, "Approve")
    execution = sfn.start(machine, "approve-1", {})
    _, token = inbox.get(timeout=10)
    assert sfn.client.describe_execution(executionArn=execution)["status"] == "RUNNING"

    # When: another thread sends task success
    sender = threading.Thread(
        target=sfn.client.send_task_success,
        kwargs={"taskToken": token, "output": json.dumps({"approved": True})},
    )
    sender.start()
    sender.join(timeout=10)

    # Then: the execution succeeds with the sent output
    described = sfn.wait(execution)
    assert described["status"] == "SUCCEEDED"
    assert output(described) == {"approved": True}


def test_a_task_failure_is_caught_by_its_error_name(sfn: Sfn) -> None:
    # Given: an execution waiting on a token, with a Catch on "Rejected"
    inbox: queue.Queue[tuple[str, str]] = queue.Queue()
    route_lambda_invocations({"approve": tokens_into(inbox)})
    machine = sfn.machine(
        "reject",
        {"Approve": token_task("approve", Catch=catch("Rejected", "Handled")), "Handled": HANDLED},
        "Approve",
    )
    execution = sfn.start(machine, "reject-1", {"run": "r-1"})
    _, token = inbox.get(timeout=10)

    # When: the task fails with error "Rejected"
    sfn.client.send_task_failure(taskToken=token, error="Rejected", cause="not today")

    # Then: the Catch handled it (moto 5.2 drops the cause; AWS would pass it on)
    described = sfn.wait(execution)
    assert described["status"] == "SUCCEEDED"
    assert output(described) == {"run": "r-1", "error": {"Error": "Rejected", "Cause": None}}


def test_timeout_seconds_path_raises_states_timeout(sfn: Sfn) -> None:
    # Given: a token wait whose timeout comes from the input, caught on States.Timeout
    inbox: queue.Queue[tuple[str, str]] = queue.Queue()
    route_lambda_invocations({"approve": tokens_into(inbox)})
    wait = token_task(
        "approve", TimeoutSecondsPath="$.timeout", Catch=catch("States.Timeout", "Handled")
    )
    machine = sfn.machine("timeout", {"Approve": wait, "Handled": HANDLED}, "Approve")

    # When: no token is ever sent
    described = sfn.run(machine, "timeout-1", {"timeout": 1})

    # Then: the wait timed out after about a second and the Catch took over
    assert described["status"] == "SUCCEEDED"
    assert output(described)["error"]["Error"] == "States.Timeout"
    elapsed = (described["stopDate"] - described["startDate"]).total_seconds()
    assert 1 <= elapsed < 10
    assert not inbox.empty()


def test_an_unknown_function_fails_the_execution(sfn: Sfn) -> None:
    # Given: a Lambda Task naming a function no handler is routed for
    route_lambda_invocations({"plan": lambda event, context: event})
    machine = sfn.machine("unknown", {"Plan": lambda_task("no-such-function")}, "Plan")

    # When: it runs
    described = sfn.run(machine, "unknown-1", {})

    # Then: it fails, naming the missing function, instead of echoing its input
    assert described["status"] == "FAILED"
    assert "ResourceNotFound" in described["error"]
    assert "no-such-function" in described["cause"]


def test_tokens_sent_while_other_executions_start_all_resume(sfn: Sfn) -> None:
    """Without ``fix_task_token_race`` moto crashes in SendTaskSuccess here, often.

    moto scans state machines in creation order, then their executions in start order,
    and dereferences ``exec_worker.env`` of each until it finds the token's owner. So
    the crash needs an execution still parsing its definition *ahead* of the owner:
    executions alternate between two machines, and Pass states lengthen the parse.
    """
    # Given: two machines whose executions each wait for a token, and four senders
    inbox: queue.Queue[tuple[str, str]] = queue.Queue()
    route_lambda_invocations({"approve": tokens_into(inbox)})
    states: dict[str, Any] = {
        f"Step{i}": {"Type": "Pass", "Next": f"Step{i + 1}" if i < 5 else "Approve"}
        for i in range(6)
    }
    states["Approve"] = token_task("approve")
    machines = [sfn.machine(f"race-{i}", states, "Step0") for i in range(2)]
    errors: list[str] = []
    stop = threading.Event()

    def send() -> None:
        while not stop.is_set():
            try:
                name, token = inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                sfn.client.send_task_success(taskToken=token, output=json.dumps({"approved": name}))
            except Exception as exc:
                errors.append(f"{name}: {exc!r}")

    senders = [threading.Thread(target=send, daemon=True) for _ in range(4)]
    for sender in senders:
        sender.start()

    # When: 20 executions start while tokens of the waiting ones are being sent
    try:
        names = [f"race-{i}" for i in range(20)]
        executions = {name: sfn.start(machines[i % 2], name, {}) for i, name in enumerate(names)}
        deadline = time.monotonic() + 20
        finished: dict[str, dict[str, Any]] = {}
        while len(finished) < len(executions) and time.monotonic() < deadline:
            for name, execution in executions.items():
                if name not in finished:
                    described = sfn.client.describe_execution(executionArn=execution)
                    if described["status"] in TERMINAL:
                        finished[name] = described
            time.sleep(POLL_SECONDS)
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=5)

    # Then: every token was accepted and every execution succeeded with its own output
    assert errors == []
    assert sorted(finished) == sorted(names)
    assert {name: d["status"] for name, d in finished.items()} == dict.fromkeys(names, "SUCCEEDED")
    assert {name: output(d) for name, d in finished.items()} == {
        name: {"approved": name} for name in names
    }


def _not_started() -> Any:
    # Appended by start_execution, before Execution.start set exec_worker and exec_status.
    class NotStarted:
        exec_worker = None

        @property
        def status(self) -> str:
            raise AttributeError("'NoneType' object has no attribute 'value'")

    return NotStarted()


def _not_parsed() -> Any:
    # Started, but its thread has not parsed the definition yet: env is still None.
    return SimpleNamespace(exec_worker=SimpleNamespace(env=None), status="RUNNING")


@pytest.mark.parametrize("not_ready", [_not_started, _not_parsed])
@pytest.mark.parametrize("send", ["success", "failure"])
def test_a_starting_execution_ahead_of_the_token_owner_is_skipped(
    sfn: Sfn, not_ready: Callable[[], Any], send: str
) -> None:
    # Given: a waiting execution on a machine created after one holding a starting execution
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    fix_task_token_race()
    inbox: queue.Queue[tuple[str, str]] = queue.Queue()
    route_lambda_invocations({"approve": tokens_into(inbox)})
    first = sfn.machine("first", {"Approve": token_task("approve")}, "Approve")
    second = sfn.machine(
        "second",
        {"Approve": token_task("approve", Catch=catch("Rejected", "Handled")), "Handled": HANDLED},
        "Approve",
    )
    execution = sfn.start(second, "owner-1", {})
    _, token = inbox.get(timeout=10)
    backend = stepfunctions_parser_backends[DEFAULT_ACCOUNT_ID][REGION]
    starting = backend.describe_state_machine(first).executions
    starting.append(not_ready())

    # When: the token is sent
    try:
        if send == "success":
            sfn.client.send_task_success(taskToken=token, output=json.dumps({"ok": True}))
        else:
            sfn.client.send_task_failure(taskToken=token, error="Rejected", cause="no")
    finally:
        starting.clear()

    # Then: the scan skipped the starting execution and resumed the owner
    described = sfn.wait(execution)
    assert described["status"] == "SUCCEEDED"
    assert output(described) == (
        {"ok": True} if send == "success" else {"error": {"Error": "Rejected", "Cause": None}}
    )
