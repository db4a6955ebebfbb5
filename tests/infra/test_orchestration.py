"""The run workflow in the template is the repository's ASL, fully wired."""

from __future__ import annotations

import json
import re

import pytest

from functions.tasks.handlers import HANDLERS, RETIRED
from functions.tasks.source_handlers import SOURCE_HANDLERS
from infra.constructs.orchestration import PLACEHOLDER, STATEMACHINES
from tests.infra.synth import Synthesized, as_list, ref

ASL_FILES = sorted(STATEMACHINES.glob("*.asl.json"))


def _state_machines(stack: Synthesized) -> dict[str, dict[str, object]]:
    return stack.of_type("AWS::StepFunctions::StateMachine")


# Each workflow (state machine name suffix) and the handlers its Tasks invoke.
WORKFLOWS = pytest.mark.parametrize(
    ("suffix", "handlers"), [("-run", HANDLERS), ("-source", SOURCE_HANDLERS)]
)


def _machine(stack: Synthesized, suffix: str) -> dict[str, object]:
    (props,) = [
        p for p in _state_machines(stack).values() if str(p["StateMachineName"]).endswith(suffix)
    ]
    return props


def test_every_asl_file_is_deployed_verbatim_with_every_placeholder_substituted(
    stack: Synthesized,
) -> None:
    # Given every ASL file in statemachines/
    assert ASL_FILES, "no ASL files found"
    definitions = {
        str(props["DefinitionString"]): props for props in _state_machines(stack).values()
    }
    for path in ASL_FILES:
        text = path.read_text(encoding="utf-8")
        # Then a state machine carries exactly that text inline (not an S3 location) ...
        assert text in definitions, f"{path.name} is not deployed as written"
        props = definitions[text]
        # ... and substitutes every placeholder it contains, and nothing else.
        substitutions = props["DefinitionSubstitutions"]
        assert isinstance(substitutions, dict)
        assert set(substitutions) == set(PLACEHOLDER.findall(text))
        assert all(ref(value) for value in substitutions.values()), "a substitution is a literal"


@WORKFLOWS
def test_each_function_placeholder_names_the_function_running_that_handler(
    stack: Synthesized, suffix: str, handlers: dict[str, object]
) -> None:
    # Given the state machine's substitutions
    props = _machine(stack, suffix)
    substitutions = props["DefinitionSubstitutions"]
    assert isinstance(substitutions, dict)
    by_id = {f["LogicalId"]: handler for handler, f in stack.functions().items()}
    for placeholder, value in substitutions.items():
        # Then ${XFunctionArn} is the ARN of the function whose handler is HANDLERS["X"]
        name = re.fullmatch(r"(\w+)FunctionArn", placeholder)
        assert name is not None, placeholder
        assert value == {"Fn::GetAtt": [ref(value), "Arn"]}
        handler = handlers[name.group(1)]
        assert by_id[ref(value)] == f"{handler.__module__}.{handler.__name__}"  # type: ignore[attr-defined]


def test_every_task_handler_has_its_own_function(stack: Synthesized) -> None:
    # Then each HANDLERS and SOURCE_HANDLERS entry runs in a function of its own
    handlers = {
        f"{h.__module__}.{h.__name__}" for h in [*HANDLERS.values(), *SOURCE_HANDLERS.values()]
    }
    deployed = {h for h in stack.functions() if h.startswith("functions.tasks.")}
    assert deployed == handlers


@WORKFLOWS
def test_the_state_machine_role_may_invoke_exactly_the_functions_the_asl_names(
    stack: Synthesized, suffix: str, handlers: dict[str, object]
) -> None:
    # Given the functions the ASL invokes, and those of the retired steps executions
    # started under an earlier definition still invoke
    props = _machine(stack, suffix)
    substitutions = props["DefinitionSubstitutions"]
    assert isinstance(substitutions, dict)
    invoked = {ref(v) for k, v in substitutions.items() if k.endswith("FunctionArn")}
    retired = {
        f"{h.__module__}.{h.__name__}"  # type: ignore[attr-defined]
        for name, h in handlers.items()
        if handlers is HANDLERS and name in RETIRED
    }
    kept = {f["LogicalId"] for handler, f in stack.functions().items() if handler in retired}
    assert len(kept) == len(retired)
    assert not kept & invoked
    role = ref(props["RoleArn"])
    assert role is not None
    # Then the role's only Lambda permission is InvokeFunction on exactly those ARNs
    lambda_grants = [(a, r) for a, r, _ in stack.grants(role) if a.startswith("lambda:")]
    assert {a for a, _ in lambda_grants} == {"lambda:InvokeFunction"}
    assert {ref(r) for _, r in lambda_grants} == invoked | kept
    assert all(r == {"Fn::GetAtt": [ref(r), "Arn"]} for _, r in lambda_grants), (
        "versions or aliases (ARN:*) are granted"
    )
    # And everything else it may do is log delivery and tracing
    others = stack.actions(role) - {"lambda:InvokeFunction"}
    assert others
    assert all(a.startswith(("logs:", "xray:")) for a in others)


@WORKFLOWS
def test_executions_are_logged_without_data_and_traced(
    stack: Synthesized, suffix: str, handlers: dict[str, object]
) -> None:
    props = _machine(stack, suffix)
    logging = props["LoggingConfiguration"]
    assert isinstance(logging, dict)
    # Task inputs carry task tokens: ALL events, but never their data
    assert logging["Level"] == "ALL"
    assert logging["IncludeExecutionData"] is False
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert props["StateMachineType"] == "STANDARD"


def test_functions_learn_the_state_machine_arn_from_its_fixed_name(stack: Synthesized) -> None:
    # Given the functions that start or resume executions
    props = _machine(stack, "-run")
    name = props["StateMachineName"]
    for handler in stack.functions():
        env = stack.environment(handler)
        if "RUNPLANE_STATE_MACHINE_ARN" not in env:
            continue
        # Then the ARN they are given ends in the state machine's name (no reference to
        # the state machine, which references them)
        arn = json.dumps(env["RUNPLANE_STATE_MACHINE_ARN"])
        assert f":stateMachine:{name}" in arn, handler
        # And their Step Functions grants name that same ARN
        role = stack.role_of(handler)
        for action, resource, _ in stack.grants(role):
            if action.startswith("states:"):
                assert resource in (
                    env["RUNPLANE_STATE_MACHINE_ARN"],
                    env.get("RUNPLANE_SOURCE_STATE_MACHINE_ARN"),
                ), (handler, action)
    assert as_list(name) == [f"{stack.config.prefix}-run"]


def test_only_the_run_api_and_the_event_worker_may_start_the_source_workflow(
    stack: Synthesized,
) -> None:
    # Given the source workflow's fixed name
    name = _machine(stack, "-source")["StateMachineName"]
    starters = set()
    for handler in stack.functions():
        env = stack.environment(handler)
        role = stack.role_of(handler)
        arn = env.get("RUNPLANE_SOURCE_STATE_MACHINE_ARN")
        on_source = {a for a, r, _ in stack.grants(role) if arn is not None and r == arn}
        named = [r for _, r, _ in stack.grants(role) if f":stateMachine:{name}" in json.dumps(r)]
        if arn is None:
            # Then a function without the source workflow's ARN has no grant on it
            assert not named, handler
            continue
        starters.add(handler)
        # Then its ARN ends in that name, and the only grant on it is StartExecution
        assert f":stateMachine:{name}" in json.dumps(arn), handler
        assert on_source == {"states:StartExecution"}, handler
    # And only the webhook (ingestions) and the event worker (commit statuses of runs
    # that ended) start it: the functions that move runs publish an event instead
    assert starters == {"functions.api.app.handler", "functions.events.handler.handler"}
