"""Sandboxes that stop, noticed as they stop: ECS's task state changes, filtered by an
EventBridge rule to the sandbox cluster's runner tasks that reached ``STOPPED``, invoke
a small function that ends a run still waiting on the stopped task's attempt
(services/sandbox_exits.py). The workflow's heartbeat window stays as the backstop for
a sandbox that hangs without stopping, and for an event that never arrives.

No dead-letter queue: the events carry the task's overrides (the runner's environment,
its one-time handles included), which should not be kept anywhere, and a lost event
costs only time (the heartbeat window still ends the wait).
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra.constructs.functions import (
    TABLE_READ,
    TABLE_WRITE,
    Access,
    Platform,
    RunplaneFunction,
)

# The stopped attempt's wait is failed (SendTaskFailure); a run that ends hands its
# workspace to the next waiter (SendTaskSuccess).
WORKFLOW_FAIL_AND_RESUME = ("states:SendTaskFailure", "states:SendTaskSuccess")
# EventBridge retries a failed delivery (throttling, say) this often and this long;
# a notice repeated is harmless (it changes nothing once its attempt closed).
DELIVERY_RETRIES = 8
DELIVERY_MAX_AGE = Duration.hours(1)


class SandboxExits(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, platform: Platform) -> None:
        super().__init__(scope, construct_id)
        sandbox = platform.sandbox
        self.function = RunplaneFunction(
            self,
            "Stopped",
            platform=platform,
            name="sandbox-stopped",
            handler="functions.sandboxes.handler.stopped",
            description="Runplane: a sandbox task that stopped before its runner's result",
            access=Access(
                table=TABLE_READ + TABLE_WRITE,
                workflow=WORKFLOW_FAIL_AND_RESUME,
                sandbox_cluster=True,
            ),
            timeout=Duration.seconds(30),
        )
        # Any revision of the runner's task definition (family), in this region and account.
        revisions = Stack.of(self).format_arn(
            service="ecs",
            resource="task-definition",
            resource_name=f"{sandbox.task_definition.family}:",
        )
        self.rule = events.Rule(
            self,
            "TaskStopped",
            description="Runplane: a sandbox task stopped",
            event_pattern=events.EventPattern(
                source=["aws.ecs"],
                detail_type=["ECS Task State Change"],
                detail={
                    "clusterArn": [sandbox.cluster.cluster_arn],
                    "lastStatus": ["STOPPED"],
                    "taskDefinitionArn": [{"prefix": revisions}],
                },
            ),
            targets=[
                targets.LambdaFunction(
                    self.function.function,
                    retry_attempts=DELIVERY_RETRIES,
                    max_event_age=DELIVERY_MAX_AGE,
                )
            ],
        )
