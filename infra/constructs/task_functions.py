"""The task Lambdas of the run workflow: one function per entry of ``HANDLERS``."""

from __future__ import annotations

import re

from aws_cdk import Duration
from constructs import Construct

from functions.tasks.handlers import HANDLERS
from infra.constructs.functions import (
    KEY_UNWRAP,
    OBJECT_READ,
    TABLE_READ,
    TABLE_WRITE,
    WORKFLOW_RESUME,
    Access,
    Platform,
    RunplaneFunction,
)
from infra.constructs.storage import ARTIFACTS_PREFIX

_STEP = TABLE_READ + TABLE_WRITE

# What each step's service call does beyond reading and writing the table. Steps that
# end or hand over a run resume the next waiter for the workspace's writer reservation.
TASK_ACCESS: dict[str, Access] = {
    # Hands the workflow its runner-phase windows.
    "QueueRun": Access(table=_STEP, settings=("runner_phase_seconds", "runner_heartbeat_seconds")),
    "WaitForWriter": Access(table=_STEP, workflow=WORKFLOW_RESUME),
    "StartRunner": Access(
        table=_STEP,
        workflow=WORKFLOW_RESUME,
        start_sandbox=True,
        settings=(
            "control_plane_url",
            "policy_runtime",
            "runner_phase_seconds",
            "runner_heartbeat_seconds",
        ),
    ),
    # Reads the plan's JSON and the attached policy sets (encrypted artifacts); a
    # failed policy check ends the run and hands the workspace to the next waiter; a
    # passed one asks for approval, with the deployment's default window.
    "EvaluatePolicy": Access(
        table=_STEP,
        object_prefixes=(ARTIFACTS_PREFIX,),
        object_actions=OBJECT_READ,
        key=KEY_UNWRAP,
        workflow=WORKFLOW_RESUME,
        settings=("approval_window_seconds",),
    ),
    "FinishPlan": Access(table=_STEP, workflow=WORKFLOW_RESUME),
    # Retired (functions/tasks/handlers.py): executions started before the policy step
    # asked for approval still call it.
    "RequestApproval": Access(table=_STEP, settings=("approval_window_seconds",)),
    "WaitForApproval": Access(table=_STEP, workflow=WORKFLOW_RESUME),
    "ArbitrateExpiry": Access(table=_STEP, workflow=WORKFLOW_RESUME),
    # A lost runner's sandbox is stopped: nothing it reports can be accepted any more.
    "FailRun": Access(table=_STEP, workflow=WORKFLOW_RESUME, stop_sandbox=True),
}

# Launching a Fargate task can take several seconds, and evaluating Rego policies over a
# large plan needs memory and time; the other steps are a few table calls.
_TIMEOUTS = {"StartRunner": Duration.seconds(60), "EvaluatePolicy": Duration.seconds(120)}
_MEMORY = {"EvaluatePolicy": 1024}


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


class TaskFunctions(Construct):
    """``by_name["QueueRun"]`` is the function the ASL's ``${QueueRunFunctionArn}`` names."""

    def __init__(self, scope: Construct, construct_id: str, *, platform: Platform) -> None:
        super().__init__(scope, construct_id)
        missing = sorted(set(HANDLERS) - set(TASK_ACCESS))
        if missing:
            raise ValueError(f"no access is declared for task handlers {missing}")
        self.by_name: dict[str, RunplaneFunction] = {}
        for name, handler in HANDLERS.items():
            self.by_name[name] = RunplaneFunction(
                self,
                name,
                platform=platform,
                name=f"task-{_kebab(name)}",
                handler=f"{handler.__module__}.{handler.__name__}",
                description=f"Runplane run workflow step {name}",
                access=TASK_ACCESS[name],
                timeout=_TIMEOUTS.get(name, Duration.seconds(30)),
                memory_size=_MEMORY.get(name, 512),
            )
