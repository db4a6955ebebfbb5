"""Static checks of the run workflow (``statemachines/run.asl.json``).

Pure JSON inspection: no AWS, no moto. These pin the shape the rest of the system
relies on (ARCHITECTURE.md sections 5 and 10): every Task has explicit Retry and
Catch, every callback wait has a timeout, runner phases stay inside the runner
authority window, only public IDs and the execution's own task token travel, and
the names the ASL uses match the Python contract in ``functions.tasks``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from functions.tasks.errors import ENDING, FAIL_STATES, RETRYABLE, SENT_TO_WAITS
from functions.tasks.handlers import HANDLERS, RETIRED
from runplane.settings import Settings

ASL_PATH = Path(__file__).resolve().parents[2] / "statemachines" / "run.asl.json"

LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
LAMBDA_CALLBACK = "arn:aws:states:::lambda:invoke.waitForTaskToken"
PLACEHOLDER = re.compile(r"^\$\{(?P<name>[A-Za-z][A-Za-z0-9]*)FunctionArn\}$")
TERMINAL_TYPES = {"Succeed", "Fail"}
PARAMETER_KEYS = {"FunctionName", "Payload"}
PAYLOAD_KEYS = {
    "run_id",
    "run_id.$",
    "organization_id.$",
    "workspace_id.$",
    "phase",
    "token.$",
    "error.$",
    # The plan step's output, as the plan's result resumed it: its outcome and the plan
    # JSON's artifact ID, both public (services/runner_reports.py; its service test).
    "plan.$",
}
RUNNER_HANDLER = "StartRunner"
RUNNER_AUTHORITY_SECONDS = 4 * 60 * 60
MAX_RETRY_ATTEMPTS = 5
DEFAULT_RETRY_ATTEMPTS = 3  # what Step Functions uses when MaxAttempts is absent
APPROVAL_WAIT = "WaitForApproval"
EXPIRY_ARBITRATION = "ArbitrateExpiry"


# -- helpers -----------------------------------------------------------------


@cache
def _raw() -> str:
    return ASL_PATH.read_text(encoding="utf-8")


def _machine() -> dict[str, Any]:
    # A fresh copy per call, so no test can disturb another through shared state.
    loaded: dict[str, Any] = json.loads(_raw())
    return loaded


def _scopes(machine: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The machine and every nested state machine (Parallel branches, Map processors)."""
    yield machine
    for state in machine["States"].values():
        for branch in state.get("Branches", []):
            yield from _scopes(branch)
        for key in ("Iterator", "ItemProcessor"):
            if key in state:
                yield from _scopes(state[key])


def _states(machine: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for scope in _scopes(machine):
        yield from scope["States"].items()


def _tasks(machine: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in _states(machine):
        if state["Type"] == "Task":
            yield name, state


def _callbacks(machine: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in _tasks(machine):
        if state["Resource"].endswith(".waitForTaskToken"):
            yield name, state


def _handler_of(task: dict[str, Any]) -> str:
    match = PLACEHOLDER.match(task["Parameters"]["FunctionName"])
    assert match, f"FunctionName is not a ${{<Name>FunctionArn}} placeholder: {task}"
    return match["name"]


def _runner_waits(machine: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(n, s) for n, s in _callbacks(machine) if _handler_of(s) == RUNNER_HANDLER]


def _successors(state: dict[str, Any]) -> list[str]:
    targets = [state["Next"]] if "Next" in state else []
    targets += [choice["Next"] for choice in state.get("Choices", [])]
    targets += [state["Default"]] if "Default" in state else []
    targets += [catcher["Next"] for catcher in state.get("Catch", [])]
    return targets


_DECODER = json.JSONDecoder()


def _placeholders_outside_strings(text: str) -> list[int]:
    """Offsets of every ``${`` that is not inside a JSON string token."""
    outside: list[int] = []
    index = 0
    while index < len(text):
        if text[index] == '"':
            _, index = _DECODER.raw_decode(text, index)  # moves past the closing quote
            continue
        if text.startswith("${", index):
            outside.append(index)
        index += 1
    return outside


def _strings(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _error_names(machine: dict[str, Any]) -> set[str]:
    return {
        name
        for _, state in _states(machine)
        for clause in (*state.get("Retry", []), *state.get("Catch", []))
        for name in clause["ErrorEquals"]
    }


def _fail_errors(machine: dict[str, Any]) -> dict[str, str]:
    return {name: state["Error"] for name, state in _states(machine) if state["Type"] == "Fail"}


# -- the checkers themselves -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": "${XFunctionArn}"}', []),
        ('{"a": "\\"${X}\\""}', []),
        ('{"a": ${X}}', [6]),
        ('{"a": "b", "c": ${X}}', [16]),
    ],
)
def test_the_placeholder_scanner_finds_only_placeholders_outside_strings(
    text: str, expected: list[int]
) -> None:
    # Given a small JSON-like text / When it is scanned
    found = _placeholders_outside_strings(text)
    # Then exactly the bare placeholders are reported
    assert found == expected


# -- 1. well-formed JSON, placeholders only inside strings ---------------------


def test_the_definition_is_valid_json_with_the_asl_top_level_shape() -> None:
    # Given the definition file / When it is parsed
    machine = json.loads(_raw())
    # Then it is a state machine with a start state and named states
    assert isinstance(machine, dict)
    assert isinstance(machine["StartAt"], str)
    assert isinstance(machine["States"], dict)
    assert machine["States"]


def test_placeholders_appear_only_inside_json_strings() -> None:
    # Given the raw text of the definition
    raw = _raw()
    # When every string token is skipped
    outside = _placeholders_outside_strings(raw)
    # Then no ${ is left, and every ${ in the text is accounted for by a decoded string
    assert outside == []
    in_strings = sum(s.count("${") for s in _strings(json.loads(raw)))
    assert in_strings == raw.count("${")
    assert in_strings > 0


# -- 2. graph: targets exist, all reachable, a way out everywhere ----------------


def test_every_transition_target_exists() -> None:
    # Given every scope of the machine
    for scope in _scopes(_machine()):
        states = scope["States"]
        # When collecting StartAt, Next, Default, Choices[*].Next and Catch[*].Next
        targets = {scope["StartAt"]}
        for state in states.values():
            targets.update(_successors(state))
        # Then each names a state of the same scope
        assert targets <= states.keys(), sorted(targets - states.keys())


def test_every_state_is_reachable_from_start_at() -> None:
    # Given every scope of the machine
    for scope in _scopes(_machine()):
        states = scope["States"]
        # When walking every transition from StartAt
        seen: set[str] = set()
        pending = [scope["StartAt"]]
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            pending.extend(_successors(states[name]))
        # Then no state is left behind
        assert seen == states.keys(), sorted(states.keys() - seen)


def test_every_non_terminal_state_has_a_way_out() -> None:
    # Given every state that is not Succeed, Fail or End: true
    for name, state in _states(_machine()):
        if state["Type"] in TERMINAL_TYPES:
            assert "Next" not in state, name
            assert not state.get("End"), name
            continue
        if state.get("End") is True:
            assert "Next" not in state, name
            continue
        # When looking at where it goes next / Then there is somewhere to go
        if state["Type"] == "Choice":
            assert state.get("Choices"), name
        else:
            assert isinstance(state.get("Next"), str), name


def test_every_choice_state_has_a_default() -> None:
    # Given every Choice state
    choices = [(n, s) for n, s in _states(_machine()) if s["Type"] == "Choice"]
    assert choices
    # When / Then each has a Default, so no input leaves it with States.NoChoiceMatched
    for name, state in choices:
        assert isinstance(state.get("Default"), str), name


# -- 3. Retry and Catch on every Task ------------------------------------------------


def test_every_task_retries_and_catches_everything_last() -> None:
    # Given every Task state
    tasks = list(_tasks(_machine()))
    assert tasks
    for name, task in tasks:
        # When reading its error handling
        retry, catch = task.get("Retry"), task.get("Catch")
        # Then Retry is non-empty and the last catcher catches States.ALL (alone)
        assert retry, f"{name} has no Retry"
        assert catch, f"{name} has no Catch"
        assert catch[-1]["ErrorEquals"] == ["States.ALL"], name
        earlier = [e for c in catch[:-1] for e in c["ErrorEquals"]]
        assert "States.ALL" not in earlier, name


def test_every_task_invokes_a_lambda() -> None:
    # Given every Task state / When reading its resource
    resources = {name: task["Resource"] for name, task in _tasks(_machine())}
    # Then it is a Lambda invocation, plain or callback
    assert set(resources.values()) <= {LAMBDA_INVOKE, LAMBDA_CALLBACK}, resources


# -- 4. callbacks: timeouts, the task token, runner heartbeats ------------------------


def test_every_callback_has_a_timeout() -> None:
    # Given every .waitForTaskToken Task
    callbacks = list(_callbacks(_machine()))
    assert callbacks
    for name, task in callbacks:
        # When reading its timeout / Then exactly one of the two forms is set
        has_fixed, has_path = "TimeoutSeconds" in task, "TimeoutSecondsPath" in task
        assert has_fixed != has_path, name
        if has_fixed:
            assert isinstance(task["TimeoutSeconds"], int), name
            assert task["TimeoutSeconds"] > 0, name


def test_every_callback_passes_its_own_task_token() -> None:
    # Given every .waitForTaskToken Task / When reading its Payload
    for name, task in _callbacks(_machine()):
        payload = task["Parameters"]["Payload"]
        # Then the token travels under token.$ from the context object
        assert payload.get("token.$") == "$$.Task.Token", name


def test_runner_phase_waits_take_their_windows_from_the_queue_step() -> None:
    # Given the runner-phase waits (StartRunner) and the Queue step
    machine = _machine()
    runner_waits = _runner_waits(machine)
    assert {s["Parameters"]["Payload"]["phase"] for _, s in runner_waits} == {"plan", "apply"}
    selected = machine["States"]["Queue"]["ResultSelector"]
    assert machine["States"]["Queue"]["ResultPath"] == "$.queue"
    for name, task in runner_waits:
        # When reading their timeout and heartbeat
        # Then both come from what the Queue step selected from the platform settings
        assert task["TimeoutSecondsPath"] == "$.queue.runner_timeout_seconds", name
        assert task["HeartbeatSecondsPath"] == "$.queue.runner_heartbeat_seconds", name
    assert selected["runner_timeout_seconds.$"] == "$.Payload.runner_timeout_seconds"
    assert selected["runner_heartbeat_seconds.$"] == "$.Payload.runner_heartbeat_seconds"


def test_a_stopped_sandbox_is_caught_where_a_heartbeat_timeout_is() -> None:
    # Given the runner-phase waits
    for name, task in _runner_waits(_machine()):
        # When finding the catcher of a heartbeat timeout
        (timeout,) = [c for c in task["Catch"] if "States.HeartbeatTimeout" in c["ErrorEquals"]]
        # Then the same catcher takes the wait a stopped sandbox fails, to the same step
        assert "SandboxStopped" in timeout["ErrorEquals"], name
        assert timeout["Next"] == f"{task['Parameters']['Payload']['phase'].title()}Failed"


# -- 5. placeholders and HANDLERS ------------------------------------------------------


def test_every_function_placeholder_names_a_handler() -> None:
    # Given every string in the definition that is a placeholder
    machine = _machine()
    placeholders = [s for s in _strings(machine) if "${" in s]
    # When parsing the handler names out of them
    names = set()
    for placeholder in placeholders:
        match = PLACEHOLDER.match(placeholder)
        assert match, f"not a ${{<Name>FunctionArn}} placeholder: {placeholder!r}"
        names.add(match["name"])
    # Then each is a key of HANDLERS, and every Task names its function that way
    assert names <= HANDLERS.keys(), sorted(names - HANDLERS.keys())
    for _, task in _tasks(machine):
        assert _handler_of(task) in HANDLERS


def test_every_handler_is_used_by_the_definition_but_the_retired() -> None:
    # Given the handlers the task Lambdas expose
    # When collecting the handlers the Tasks invoke
    used = {_handler_of(task) for _, task in _tasks(_machine())}
    # Then none is unused but those kept for executions started under an earlier
    # definition, which no state invokes any more
    assert HANDLERS.keys() - RETIRED <= used, sorted(HANDLERS.keys() - RETIRED - used)
    assert HANDLERS.keys() >= RETIRED
    assert not RETIRED & used, sorted(RETIRED & used)


# -- 6. error names and the Python contract --------------------------------------------


def test_every_custom_error_name_is_a_declared_task_error() -> None:
    # Given every ErrorEquals name outside the States. and Lambda. namespaces
    custom = {n for n in _error_names(_machine()) if not n.startswith(("States.", "Lambda."))}
    # When / Then each is a class the tasks raise (to retry, or to end quietly), or an
    # error the control plane sends to a wait
    declared = RETRYABLE.keys() | ENDING.keys() | set(SENT_TO_WAITS)
    assert custom <= declared, sorted(custom - declared)


def test_a_step_of_an_ended_run_ends_the_workflow_quietly() -> None:
    # Given every Task / When reading its first catcher
    # Then RunEnded leads to the Succeed state: the run already recorded its end
    states = _machine()["States"]
    for name, state in states.items():
        if state["Type"] == "Task":
            first = state["Catch"][0]
            assert first["ErrorEquals"] == ["RunEnded"], name
            assert states[first["Next"]]["Type"] == "Succeed", name


def test_every_fail_state_error_is_declared() -> None:
    # Given every Fail state / When reading its Error
    errors = _fail_errors(_machine())
    assert errors
    # Then it is one of FAIL_STATES
    for name, error in errors.items():
        assert error in FAIL_STATES, (name, error)


def test_every_declared_error_is_used_by_the_definition() -> None:
    # Given the names the ASL uses in ErrorEquals and Fail states
    machine = _machine()
    used = _error_names(machine) | set(_fail_errors(machine).values())
    # When / Then every RETRYABLE and FAIL_STATES name is among them
    declared = set(RETRYABLE) | set(ENDING) | set(FAIL_STATES) | set(SENT_TO_WAITS)
    assert declared <= used, sorted(declared - used)


def test_no_fail_state_uses_a_reserved_error_name() -> None:
    # Given every Fail state / When reading its Error
    # Then none is in the States. namespace that Step Functions (and moto) reserve
    for name, error in _fail_errors(_machine()).items():
        assert not error.startswith("States."), (name, error)


def test_retryable_names_match_their_classes() -> None:
    # Given the RETRYABLE contract / When / Then each key is its class's name
    for name, cls in RETRYABLE.items():
        assert name == cls.__name__
        assert issubclass(cls, Exception)


# -- 7. retry policy -----------------------------------------------------------------------


def test_no_retrier_retries_everything_or_timeouts() -> None:
    # Given every Retry entry
    retried = {
        (name, error)
        for name, state in _states(_machine())
        for retrier in state.get("Retry", [])
        for error in retrier["ErrorEquals"]
    }
    assert retried
    # When / Then neither States.ALL nor States.Timeout is retried: retrying a
    # timed-out human wait or runner would duplicate work
    forbidden = {(n, e) for n, e in retried if e in {"States.ALL", "States.Timeout"}}
    assert forbidden == set()


def _total_retry_wait(retrier: dict[str, Any]) -> float:
    interval = float(retrier.get("IntervalSeconds", 1))
    rate = float(retrier.get("BackoffRate", 2.0))
    cap = float(retrier.get("MaxDelaySeconds", float("inf")))
    attempts = int(retrier.get("MaxAttempts", DEFAULT_RETRY_ATTEMPTS))
    return sum(min(interval * rate**i, cap) for i in range(attempts))


def test_retry_attempts_are_bounded() -> None:
    # Given every Retry entry / When reading MaxAttempts (default 3)
    for name, state in _states(_machine()):
        for retrier in state.get("Retry", []):
            attempts = retrier.get("MaxAttempts", DEFAULT_RETRY_ATTEMPTS)
            if retrier["ErrorEquals"] == ["SandboxCapacityExhausted"]:
                # Then a wait for sandbox capacity is bounded in time: capped delays
                # that end well inside the runner authority window
                assert retrier["MaxDelaySeconds"] <= 300, name
                assert _total_retry_wait(retrier) <= RUNNER_AUTHORITY_SECONDS / 2, name
                continue
            # Then anything else is retried at most five times
            assert 0 <= attempts <= MAX_RETRY_ATTEMPTS, (name, attempts)


# -- 8. no secrets travel -----------------------------------------------------------------


def test_tasks_pass_only_public_ids_and_their_own_token() -> None:
    # Given every state that has Parameters
    with_parameters = [(n, s) for n, s in _states(_machine()) if "Parameters" in s]
    assert with_parameters
    for name, state in with_parameters:
        parameters = state["Parameters"]
        # When reading the keys / Then only FunctionName and an allow-listed Payload
        assert parameters.keys() <= PARAMETER_KEYS, (name, sorted(parameters))
        payload = parameters.get("Payload", {})
        assert isinstance(payload, dict), name
        assert payload.keys() <= PAYLOAD_KEYS, (name, sorted(payload))


# -- 9. the approval wait ---------------------------------------------------------------------


def test_approval_wait_uses_the_persisted_deadline() -> None:
    # Given the approval wait
    task = _machine()["States"][APPROVAL_WAIT]
    assert task["Resource"] == LAMBDA_CALLBACK
    assert _handler_of(task) == APPROVAL_WAIT
    # When reading its timeout / Then it comes from state (the persisted deadline)
    assert "TimeoutSeconds" not in task
    assert task["TimeoutSecondsPath"].startswith("$.")


def test_approval_timeout_goes_to_arbitration_not_failure() -> None:
    # Given the approval wait's catchers
    states = _machine()["States"]
    catch = states[APPROVAL_WAIT]["Catch"]
    # When finding the first catcher that matches States.Timeout
    timeout_catcher = next(
        c for c in catch if {"States.Timeout", "States.ALL"} & set(c["ErrorEquals"])
    )
    # Then it names States.Timeout explicitly and leads to database arbitration
    assert "States.Timeout" in timeout_catcher["ErrorEquals"]
    target = timeout_catcher["Next"]
    assert target == EXPIRY_ARBITRATION
    assert states[target]["Type"] == "Task"
    assert _handler_of(states[target]) == EXPIRY_ARBITRATION


# -- 10. runner authority window ----------------------------------------------------------


def test_runner_phase_windows_fit_the_runner_authority_window() -> None:
    # Given the settings bounds of the runner-phase windows the Queue step hands out
    fields = Settings.model_fields
    phase_bounds = {type(m).__name__: m for m in fields["runner_phase_seconds"].metadata}
    # When reading the upper bound / Then no phase outlives the runner authority window
    assert max(m.le for m in fields["runner_phase_seconds"].metadata if hasattr(m, "le")) <= (
        RUNNER_AUTHORITY_SECONDS
    ), phase_bounds
    # And a heartbeat window at least as long as the phase is refused
    with pytest.raises(ValidationError):
        Settings(runner_phase_seconds=600, runner_heartbeat_seconds=600)
