"""A stopped sandbox task is noticed from ECS's own event, as the template declares it."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.synth import Synthesized, ref

STOPPED = "functions.sandboxes.handler.stopped"


def _rule(stack: Synthesized) -> dict[str, Any]:
    (rule,) = [
        props
        for props in stack.of_type("AWS::Events::Rule").values()
        if props.get("EventPattern", {}).get("source") == ["aws.ecs"]
    ]
    return rule


def test_only_the_sandbox_clusters_runner_tasks_that_stopped_reach_the_function(
    stack: Synthesized,
) -> None:
    # Given the rule on ECS events
    pattern = _rule(stack)["EventPattern"]
    cluster, _ = stack.one("AWS::ECS::Cluster")
    _, definition = stack.one("AWS::ECS::TaskDefinition")
    # Then it matches task state changes that reached STOPPED, of the sandbox cluster
    assert pattern["detail-type"] == ["ECS Task State Change"]
    assert pattern["detail"]["lastStatus"] == ["STOPPED"]
    assert [ref(arn) for arn in pattern["detail"]["clusterArn"]] == [cluster]
    # And only tasks of the runner's task definition family, any revision, in this
    # region and account
    (prefix,) = pattern["detail"]["taskDefinitionArn"]
    text = json.dumps(prefix["prefix"])
    for part in ("AWS::Partition", "AWS::Region", "AWS::AccountId"):
        assert part in text
    assert f"task-definition/{definition['Family']}:" in text


def test_the_rule_invokes_only_the_stopped_sandbox_function_and_retries(
    stack: Synthesized,
) -> None:
    # Given the rule's targets
    (target,) = _rule(stack)["Targets"]
    # Then it is the sandbox-stopped function, given the event as ECS sent it
    assert ref(target["Arn"]) == stack.function(STOPPED)["LogicalId"]
    assert "InputTransformer" not in target
    assert "Input" not in target
    # And a failed delivery is retried for a while (a repeated notice changes nothing)
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 8
    assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] == 3600
    # And EventBridge, from this rule alone, may invoke it
    (permission,) = [
        p
        for p in stack.of_type("AWS::Lambda::Permission").values()
        if ref(p["FunctionName"]) == stack.function(STOPPED)["LogicalId"]
    ]
    assert permission["Principal"] == "events.amazonaws.com"
    assert ref(permission["SourceArn"]) is not None


def test_the_function_knows_the_sandbox_cluster_and_nothing_to_start_or_stop_tasks(
    stack: Synthesized,
) -> None:
    # Given the function's settings
    env = stack.environment(STOPPED)
    cluster, _ = stack.one("AWS::ECS::Cluster")
    # Then it knows which cluster is the sandboxes' (events of others change nothing)
    assert ref(env["RUNPLANE_ECS_CLUSTER"]) == cluster
    # And it has the table and the workflow, and nothing of task definitions or networks
    assert "RUNPLANE_TABLE_NAME" in env
    assert "RUNPLANE_STATE_MACHINE_ARN" in env
    for unneeded in ("RUNPLANE_ECS_TASK_DEFINITION", "RUNPLANE_ECS_SUBNETS", "RUNPLANE_KMS_KEY_ID"):
        assert unneeded not in env
