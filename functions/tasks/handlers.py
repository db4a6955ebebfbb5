"""Task Lambdas of the run workflow: one entry point per step, each a single call.

Inputs carry the run ID (and, for waits, the task token; for the steps that read
them, the run's organization and workspace IDs); outputs carry only what the next
Choice needs.
"""

from __future__ import annotations

from typing import Any

from functions.observability import observed
from runplane.domain.run_scope import RunScope
from runplane.wiring import services


@observed
def queue_run(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().orchestration.queue(event["run_id"], RunScope.of(event))


@observed
def wait_for_writer(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().orchestration.wait_for_writer(
        event["run_id"], event["token"], RunScope.of(event)
    )


@observed
def start_runner(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().orchestration.start_runner(
        event["run_id"], event["phase"], event["token"], RunScope.of(event)
    )


@observed
def evaluate_policy(event: dict[str, Any], context: Any) -> dict[str, Any]:
    plan = event.get("plan")
    plan_json = plan.get("plan_json_artifact_id") if isinstance(plan, dict) else None
    return services().orchestration.evaluate_policy(
        event["run_id"],
        RunScope.of(event),
        plan_json_artifact_id=plan_json if isinstance(plan_json, str) else None,
    )


@observed
def finish_plan(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().orchestration.finish_plan(event["run_id"])


@observed
def request_approval(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Retired: the policy step asks for approval itself (see RETIRED).
    return services().orchestration.request_approval(event["run_id"], RunScope.of(event))


@observed
def wait_for_approval(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().orchestration.wait_for_approval(event["run_id"], event["token"])


@observed
def arbitrate_expiry(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().orchestration.arbitrate_expiry(event["run_id"])


@observed
def fail_run(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().orchestration.fail(event["run_id"], event["phase"], str(event["error"]))


# The ASL's ${<Name>FunctionArn} placeholders, by handler.
HANDLERS = {
    "QueueRun": queue_run,
    "WaitForWriter": wait_for_writer,
    "StartRunner": start_runner,
    "EvaluatePolicy": evaluate_policy,
    "FinishPlan": finish_plan,
    "RequestApproval": request_approval,
    "WaitForApproval": wait_for_approval,
    "ArbitrateExpiry": arbitrate_expiry,
    "FailRun": fail_run,
}

# Handlers no state of the current definition invokes, kept (deployed, and invocable by
# the workflow's role) for executions started under an earlier one: a Standard execution
# runs to its end, up to a year, on the definition it started with.
RETIRED = frozenset({"RequestApproval"})
