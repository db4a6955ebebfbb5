"""The run workflow: ``statemachines/run.asl.json`` as an AWS Step Functions state machine.

The definition is the same file the embedded stack runs, carried inline in the
template (``DefinitionBody.from_string``); every ``${Placeholder}`` is filled by a
DefinitionSubstitution. The state machine's name is fixed, so functions that
start or resume executions learn its ARN from ``state_machine_arn`` without a
reference to the state machine (which references them).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from functions.tasks.handlers import RETIRED
from infra.config import RunplaneConfig
from infra.constructs.assets import REPO
from infra.constructs.nag import acknowledge
from infra.constructs.task_functions import TaskFunctions

STATEMACHINES = REPO / "statemachines"
RUN_DEFINITION = STATEMACHINES / "run.asl.json"
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9]+)\}")
FUNCTION_ARN = re.compile(r"([A-Za-z0-9]+)FunctionArn")


def placeholders(path: Path) -> set[str]:
    return set(PLACEHOLDER.findall(path.read_text(encoding="utf-8")))


def definition_version(path: Path = RUN_DEFINITION) -> str:
    """What runs record as the definition they were created under."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def state_machine_name(config: RunplaneConfig) -> str:
    return f"{config.prefix}-run"


def state_machine_arn(stack: Stack, config: RunplaneConfig) -> str:
    return named_state_machine_arn(stack, state_machine_name(config))


def named_state_machine_arn(stack: Stack, name: str) -> str:
    """A state machine's ARN from its name, before the machine exists (no cycle)."""
    return stack.format_arn(
        service="states",
        resource="stateMachine",
        resource_name=name,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


class Orchestration(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RunplaneConfig,
        tasks: TaskFunctions,
    ) -> None:
        super().__init__(scope, construct_id)
        text = RUN_DEFINITION.read_text(encoding="utf-8")
        substitutions: dict[str, str] = {}
        invoked = []
        for placeholder in sorted(placeholders(RUN_DEFINITION)):
            match = FUNCTION_ARN.fullmatch(placeholder)
            if match is None or match.group(1) not in tasks.by_name:
                raise ValueError(f"{RUN_DEFINITION.name}: nothing provides ${{{placeholder}}}")
            function = tasks.by_name[match.group(1)].function
            substitutions[placeholder] = function.function_arn
            invoked.append(function.function_arn)
        # Executions started under an earlier definition still invoke retired steps.
        invoked += [tasks.by_name[name].function.function_arn for name in sorted(RETIRED)]

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="Runplane run workflow: invokes exactly its task functions",
        )
        # The definition invokes unqualified ARNs, so no version or alias is granted.
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeTaskFunctions", actions=["lambda:InvokeFunction"], resources=invoked
            )
        )
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "Run",
            state_machine_name=state_machine_name(config),
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(text),
            definition_substitutions=substitutions,
            role=self.role,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                # Task inputs carry task tokens (resume credentials): never log data.
                include_execution_data=False,
            ),
        )
        self.definition_version = definition_version()
        expected = state_machine_arn(Stack.of(self), config)
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery (logs:CreateLogDelivery and related) and X-Ray "
            "(xray:PutTraceSegments and related) do not support resource-level permissions.",
        )
        self.expected_arn = expected
