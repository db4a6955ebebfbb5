"""Step Functions: start a run's execution and resume its waits. Carries only IDs."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

    from runplane.domain.entities import Run

logger = logging.getLogger(__name__)


class Workflow:
    def __init__(self, client: SFNClient, state_machine_arn: str) -> None:
        self._sfn = client
        self._arn = state_machine_arn

    def start(self, run: Run) -> None:
        """Start the run's execution, named by the run ID (so a retry cannot start two).
        Its input names the run's organization and workspace too (neither ever changes),
        so a step can read what it needs of them with the run."""
        self.start_named(
            run.id,
            {
                "run_id": run.id,
                "organization_id": run.organization_id,
                "workspace_id": run.workspace_id,
            },
        )

    def start_named(self, name: str, ids: Mapping[str, str]) -> None:
        """Start an execution named ``name`` (idempotent on it) whose input is ``ids``:
        public IDs only, never tokens or bodies."""
        try:
            self._sfn.start_execution(
                stateMachineArn=self._arn, name=name, input=json.dumps(dict(ids))
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise

    def resume(self, token: str, output: Mapping[str, Any]) -> bool:
        """Complete a wait; False if the wait is already over (timed out, or resumed)."""
        try:
            self._sfn.send_task_success(taskToken=token, output=json.dumps(dict(output)))
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code in {"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"}:
                logger.info("wait already over", extra={"code": code})
                return False
            raise
        return True

    def fail(self, token: str, error: str, cause: str) -> bool:
        try:
            self._sfn.send_task_failure(taskToken=token, error=error, cause=cause)
        except ClientError as failure:
            code = failure.response.get("Error", {}).get("Code")
            if code in {"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"}:
                return False
            raise
        return True

    def heartbeat(self, token: str) -> bool:
        try:
            self._sfn.send_task_heartbeat(taskToken=token)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in {
                "TaskTimedOut",
                "InvalidToken",
                "TaskDoesNotExist",
            }:
                return False
            raise
        return True
