"""A sandbox that stopped before its runner's final report, noticed as it stops.

The embedded stack's launcher reports its runner process's exit; in AWS, ECS reports
the sandbox's task ``STOPPED`` through EventBridge. Either notice names the attempt
by what the control plane recorded at launch (``domain.sandbox_exits``), and the run
then ends exactly as a heartbeat timeout of that phase ends it
(``WorkflowSteps.end_lost_phase``): a plan fails, an apply whose start was proven
needs recovery, holding the workspace. That move is one write conditioned on the run
and the attempt as read, so a notice that races the runner's own report, a
cancellation or a recovery either wins or writes nothing. The workflow's wait is then
failed with ``SandboxStopped``, which the workflow catches where it catches a
heartbeat timeout; its failure step finds the run ended and ends quietly.

A notice for an attempt that reported (a runner exiting normally), that anything
else closed, or that is not the run's current one is acknowledged and writes nothing.
A runner's exit status says whether its final report was accepted
(``REPORTED_EXIT_CODES``): such a notice is acknowledged without a read.
The workflow's heartbeat window stays as the backstop for a sandbox that hangs
without stopping, and for a notice that never arrives.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runplane.adapters.workflow import Workflow
from runplane.domain.errors import Conflict, NotFound, TooMuchContention
from runplane.domain.parts import AttemptBody
from runplane.domain.sandbox_exits import SANDBOX_STOPPED, SandboxExit, StoppedTask, stale
from runplane.services.attempts import attempt_part
from runplane.services.repositories.operations import SandboxRefs
from runplane.services.unit_of_work import UnitsOfWork
from runplane.services.workflow_steps import WorkflowSteps

logger = logging.getLogger("runplane.sandboxes")

# A notice is read again after a refused move (the run moved meanwhile, say from
# awaiting_approval to applying as the apply started): this often at most.
MAX_READS = 3


@dataclass(frozen=True)
class Noticed:
    """What a notice did: ``ended`` the run in ``status``, or was ``ignored`` (why)."""

    outcome: str
    run_id: str | None = None
    status: str | None = None
    why: str | None = None

    def as_dict(self) -> dict[str, str]:
        shown = {"outcome": self.outcome, "run_id": self.run_id}
        shown |= {"status": self.status, "why": self.why}
        return {key: value for key, value in shown.items() if value is not None}


class SandboxExits:
    def __init__(
        self,
        steps: WorkflowSteps,
        workflow: Workflow,
        units: UnitsOfWork,
        refs: SandboxRefs,
        *,
        cluster: str | None = None,
    ) -> None:
        self._steps = steps
        self._workflow = workflow
        self._units = units
        self._refs = refs
        # The sandbox cluster's ARN: ECS events of any other cluster are not ours.
        self._cluster = cluster

    def stopped(self, notice: SandboxExit) -> Noticed:
        """The sandbox ``notice`` names stopped: end its run if it still waits on it."""
        if notice.reported:
            return self._ignored(notice, "the runner's final report was accepted")
        for _ in range(MAX_READS):
            name = attempt_part(notice.phase)
            try:
                with self._units() as uow:
                    run, parts = uow.runs.with_parts(notice.run_id, [name])
            except NotFound:
                return self._ignored(notice, f"run {notice.run_id} does not exist")
            attempt = parts[name]
            body = AttemptBody.from_body(attempt.body) if attempt else None
            why = stale(notice, run.status, attempt.state if attempt else None, body)
            if why is not None:
                return self._ignored(notice, why)
            assert attempt is not None  # stale() holds an absent attempt stale
            try:
                target = self._steps.end_lost_phase(
                    run, notice.phase, attempt, notice.reason, attempt_reason=notice.detail
                )
            except (Conflict, TooMuchContention):
                # The run or the attempt moved since they were read: look again.
                continue
            if target is None:
                return self._ignored(notice, f"run {run.id} has ended")
            logger.info(
                "sandbox stopped before its result",
                extra={"run_id": run.id, "phase": notice.phase.value, "status": target.value},
            )
            if attempt.token:
                # As a heartbeat timeout would: the workflow's failure step finds the
                # run already ended. False: the wait had ended anyway.
                self._workflow.fail(attempt.token, SANDBOX_STOPPED, notice.reason)
            return Noticed("ended", run.id, target.value)
        return self._ignored(notice, f"run {notice.run_id} kept moving")

    def task_stopped(self, task: StoppedTask) -> Noticed:
        """An ECS task stopped: the notice for the attempt its launch was recorded for."""
        if self._cluster is None or task.cluster_arn != self._cluster:
            return Noticed("ignored", why="the task is not of the sandbox cluster")
        if task.reported:
            return Noticed("ignored", why="the runner's final report was accepted")
        launched = self._refs.find(task.task_arn)
        if launched is None:
            return Noticed("ignored", why="no sandbox was recorded for the task")
        return self.stopped(
            SandboxExit(
                run_id=launched.run_id,
                phase=launched.phase,
                attempt_id=launched.attempt_id,
                sandbox_id=launched.sandbox_id,
                reference=launched.reference,
                detail=task.detail,
            )
        )

    @staticmethod
    def _ignored(notice: SandboxExit, why: str) -> Noticed:
        logger.info(
            "sandbox stop changes nothing",
            extra={"run_id": notice.run_id, "phase": notice.phase.value, "why": why},
        )
        return Noticed("ignored", notice.run_id, why=why)
