"""EventBridge Scheduler: one schedule per Runplane schedule, in one schedule group.

The target is the fire-schedule task Lambda; its input carries only IDs and the
scheduled time (a Scheduler context attribute), never a credential.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

# EventBridge Scheduler substitutes this with the fire's scheduled time (UTC, ISO 8601).
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


def target_input(schedule_id: str, workspace_id: str) -> str:
    return json.dumps(
        {"schedule_id": schedule_id, "workspace_id": workspace_id, "scheduled_time": SCHEDULED_TIME}
    )


class EventBridgeSchedules:
    def __init__(self, client: Any, *, group: str, target_arn: str, role_arn: str) -> None:
        self._client = client
        self._group = group
        self._target_arn = target_arn
        self._role_arn = role_arn

    def put(self, schedule_id: str, workspace_id: str, expression: str, *, enabled: bool) -> None:
        """Create the schedule, or update it in place (pausing is ``enabled=False``)."""
        request: dict[str, Any] = {
            "Name": schedule_id,
            "GroupName": self._group,
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED" if enabled else "DISABLED",
            "Target": {
                "Arn": self._target_arn,
                "RoleArn": self._role_arn,
                "Input": target_input(schedule_id, workspace_id),
                # A fire that cannot be delivered within an hour is dropped: the next
                # one checks the workspace again.
                "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 10},
            },
        }
        try:
            self._client.create_schedule(**request)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConflictException":
                raise
            self._client.update_schedule(**request)

    def put_own(self, name: str, expression: str, payload: dict[str, Any]) -> None:
        """One of the deployment's own schedules (the auto-destroy sweep): CDK creates it
        in AWS; the embedded stack registers it here, in the same group, to the same
        target."""
        self._client.create_schedule(
            Name=name,
            GroupName=self._group,
            ScheduleExpression=expression,
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            State="ENABLED",
            Target={
                "Arn": self._target_arn,
                "RoleArn": self._role_arn,
                "Input": json.dumps(payload),
            },
        )

    def delete(self, schedule_id: str) -> None:
        try:
            self._client.delete_schedule(Name=schedule_id, GroupName=self._group)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise

    def registered(self) -> list[dict[str, Any]]:
        """Every schedule of the group, as Scheduler holds it (the embedded stack's
        scheduler fires from this, as EventBridge would)."""
        found: list[dict[str, Any]] = []
        pages = self._client.get_paginator("list_schedules").paginate(GroupName=self._group)
        for page in pages:
            for summary in page.get("Schedules", []):
                found.append(self._client.get_schedule(Name=summary["Name"], GroupName=self._group))
        return found
