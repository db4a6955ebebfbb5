"""The standby pool (docs/standby.md), built only when context ``runnerStandby`` is
above 0: nothing of it exists otherwise.

The runner's task definition is the sandbox's own. The launch step (StartRunner)
assigns standbys and starts their replacements with the launcher's existing RunTask
and PassRole grants; it also seals the assigned environment (a data key of the
Runplane key). A schedule tops the pool up every few minutes: standbys whose wait
ended, or whose task stopped while waiting, are replaced.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.functions import (
    TABLE_READ,
    TABLE_WRITE,
    Access,
    Platform,
    RunplaneFunction,
)

TOP_UP_RATE = Duration.minutes(5)


def standby_environment(platform: Platform) -> dict[str, str]:
    """The settings every function of the pool reads (RUNPLANE_<NAME>)."""
    config = platform.config
    return {
        "RUNPLANE_RUNNER_STANDBY": str(config.runner_standby),
        "RUNPLANE_RUNNER_STANDBY_SECONDS": str(config.runner_standby_seconds),
    }


class StandbyPool(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        platform: Platform,
        launch: RunplaneFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.top_up = RunplaneFunction(
            self,
            "TopUp",
            platform=platform,
            name="standby-top-up",
            handler="functions.sandboxes.handler.top_up",
            description="Runplane: keeps the standby runner pool at its size",
            access=Access(
                table=TABLE_READ + TABLE_WRITE,
                start_sandbox=True,
                stop_sandbox=True,
                settings=("control_plane_url",),
            ),
            timeout=Duration.seconds(120),
        )
        sandbox = platform.sandbox
        tasks = Stack.of(self).format_arn(
            service="ecs", resource="task", resource_name=f"{sandbox.cluster.cluster_name}/*"
        )
        # Which waiting standbys' tasks stopped (a crash is replaced before its wait ends).
        self.top_up.role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeStandbys",
                actions=["ecs:DescribeTasks"],
                resources=[tasks],
                conditions={"ArnEquals": {"ecs:cluster": sandbox.cluster.cluster_arn}},
            )
        )
        # The launch step seals the environment it assigns to a standby.
        launch.role.add_to_policy(
            iam.PolicyStatement(
                sid="SealStandbyEnvironment",
                actions=["kms:GenerateDataKey"],
                resources=[platform.storage.key.key_arn],
            )
        )
        for function in (launch, self.top_up):
            for name, value in standby_environment(platform).items():
                function.function.add_environment(name, value)
        launch.function.add_environment("RUNPLANE_KMS_KEY_ID", platform.storage.key.key_arn)
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runplane: top up the standby runner pool",
            schedule=events.Schedule.rate(TOP_UP_RATE),
            targets=[targets.LambdaFunction(self.top_up.function, retry_attempts=0)],
        )
