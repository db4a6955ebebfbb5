"""Workspace schedules: an EventBridge Scheduler group, the fire-schedule Lambda it
targets, the role Scheduler assumes to invoke it, and the run API's access to
manage the group's schedules (docs/schedules.md); and the deployment's own schedule in
the group, the auto-destroy sweep every five minutes (docs/auto-destroy.md)."""

from __future__ import annotations

import json

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra.constructs.functions import (
    TABLE_READ,
    TABLE_WRITE,
    WORKFLOW_RESUME,
    WORKFLOW_START,
    Access,
    Platform,
    RunplaneFunction,
)
from infra.constructs.nag import acknowledge
from runplane.domain.auto_destroy import SWEEP, SWEEP_RATE

# What the run API does with the group's schedules (create/update on pause, delete).
SCHEDULE_ACTIONS = (
    "scheduler:CreateSchedule",
    "scheduler:DeleteSchedule",
    "scheduler:GetSchedule",
    "scheduler:UpdateSchedule",
)


class Schedules(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, platform: Platform, api: RunplaneFunction
    ) -> None:
        super().__init__(scope, construct_id)
        config = platform.config
        self.group = scheduler.CfnScheduleGroup(self, "Group", name=f"{config.prefix}-schedules")
        # A fire creates a plan-only run and starts its workflow: the table and
        # StartExecution (no variables, so no artifacts or keys). The auto-destroy sweep
        # also creates runs and approves an opted-in workspace's destroy run (resuming its
        # wait); its notices are outbox items of its own writes, like every run event.
        self.fire = RunplaneFunction(
            self,
            "Fire",
            platform=platform,
            name="fire-schedule",
            handler="functions.scheduler.handler.fire",
            description="Runplane: one schedule fire creates one plan-only run",
            access=Access(
                table=TABLE_READ + TABLE_WRITE,
                workflow=WORKFLOW_START + WORKFLOW_RESUME,
                settings=(
                    "definition_version",
                    "build_sha",
                    "runner_release",
                    "policy_runtime",
                    "engine_versions",
                ),
            ),
            # A sweep of a thousand armed workspaces is about a thousand reads (see
            # docs/BENCHMARKS.md, "Auto-destroy sweep").
            timeout=Duration.seconds(120),
        )
        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "InvokeRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description="EventBridge Scheduler: invoke the fire-schedule function only",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeFire",
                actions=["lambda:InvokeFunction"],
                resources=[self.fire.function.function_arn],
            )
        )
        scheduler.CfnSchedule(
            self,
            "AutoDestroySweep",
            group_name=self.group.name,
            name="auto-destroy-sweep",
            description="Runplane: one auto-destroy step for every armed workspace",
            schedule_expression=SWEEP_RATE,
            schedule_expression_timezone="UTC",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            target=scheduler.CfnSchedule.TargetProperty(
                arn=self.fire.function.function_arn,
                role_arn=self.role.role_arn,
                input=json.dumps({"sweep": SWEEP}),
                # A sweep not delivered within ten minutes is dropped: the next one runs.
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_event_age_in_seconds=600, maximum_retry_attempts=3
                ),
            ),
        )
        schedules_arn = stack.format_arn(
            service="scheduler",
            resource="schedule",
            resource_name=f"{self.group.name}/*",
        )
        api.role.add_to_policy(
            iam.PolicyStatement(
                sid="Schedules", actions=list(SCHEDULE_ACTIONS), resources=[schedules_arn]
            )
        )
        api.role.add_to_policy(
            iam.PolicyStatement(
                sid="PassSchedulerRole",
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )
        acknowledge(
            api.role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:"
            f"<AWS::AccountId>:schedule/{self.group.name}/*]",
            "Schedule names are the schedule IDs Runplane generates; the grant is limited to "
            "the schedules of the Runplane schedule group.",
        )
        for function in (api, self.fire):
            function.function.add_environment("RUNPLANE_SCHEDULER_GROUP", str(self.group.name))
        api.function.add_environment(
            "RUNPLANE_SCHEDULER_TARGET_ARN", self.fire.function.function_arn
        )
        api.function.add_environment("RUNPLANE_SCHEDULER_ROLE_ARN", self.role.role_arn)
