"""A sandbox that stopped before its runner's final report: what is noticed, and when
a notice is for the attempt the run is still waiting on.

The embedded stack's launcher sees its runner process exit; in AWS, ECS reports the
sandbox's task ``STOPPED`` (an EventBridge "ECS Task State Change" event). Either way
the notice names the attempt by what the control plane recorded when it launched the
sandbox (run, phase, attempt, sandbox and the launcher's reference to it), never by
anything the sandbox could write. These are the rules, without the reads.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from runplane.domain.capabilities import Phase
from runplane.domain.parts import OPEN_ATTEMPT, AttemptBody
from runplane.domain.run import RunStatus

# The error a stopped sandbox's workflow wait is failed with. The run workflow catches
# it where it catches a heartbeat timeout (statemachines/run.asl.json).
SANDBOX_STOPPED = "SandboxStopped"

# Where each phase's attempt is still waited on: a notice for a run anywhere else is
# stale (the phase's result, a cancellation or a recovery already moved it).
WAITING_STATUSES: Mapping[Phase, frozenset[RunStatus]] = MappingProxyType(
    {
        Phase.PLAN: frozenset({RunStatus.PLANNING}),
        # Launched but its start not yet proven, or applying.
        Phase.APPLY: frozenset({RunStatus.AWAITING_APPROVAL, RunStatus.APPLYING}),
    }
)

# The runner's exit statuses after the control plane accepted its phase's final report
# (0: the phase succeeded, 1: it failed; docs/runner-contract.md). Any other status, a
# signal, or a task stopped from outside may have left the attempt open. The engine
# runs as another user and cannot choose the runner's status; a runner that lied could
# only delay its run's end to the heartbeat window, never end it wrongly.
REPORTED_EXIT_CODES: frozenset[int] = frozenset({0, 1})
# What a status reason (200 characters) keeps of how a sandbox stopped.
_DETAIL_CHARACTERS = 150
# An ECS task ARN: arn:<partition>:ecs:<region>:<account>:task/[<cluster>/]<id> (the
# cluster is absent from the old ARN format).
_TASK_ARN = re.compile(
    r"arn:aws[a-z-]*:ecs:[a-z0-9-]+:[0-9]{12}:task/(?:[A-Za-z0-9_-]+/)?[A-Za-z0-9]+"
)


@dataclass(frozen=True)
class SandboxRef:
    """Which attempt a sandbox was launched for, found by the launcher's reference to it
    (an ECS task ARN): recorded by the control plane with the launch, a pointer that
    whoever reads it checks against the attempt itself."""

    reference: str
    run_id: str
    phase: Phase
    attempt_id: str
    sandbox_id: str


@dataclass(frozen=True)
class SandboxExit:
    """A sandbox seen to stop, named by what its launch recorded; ``detail`` says how
    (an exit code, a signal, ECS's stop code and reason), for the status reason."""

    run_id: str
    phase: Phase
    attempt_id: str
    sandbox_id: str
    reference: str
    detail: str
    # The runner exited with a status it gives only after its final report was
    # accepted: that report closed the attempt, so the notice need not read it.
    reported: bool = False

    @property
    def reason(self) -> str:
        """The run's status reason, as a timeout's names its error (``apply: ...``)."""
        return f"{self.phase.value}: {SANDBOX_STOPPED} ({self.detail})"[:200]


def stale(
    notice: SandboxExit,
    run_status: RunStatus,
    attempt_state: str | None,
    attempt: AttemptBody | None,
) -> str | None:
    """Why ``notice`` must change nothing (None: its attempt is still waited on).

    The attempt must be the run's attempt of the notice's phase, launched for this very
    sandbox (its attempt and sandbox IDs; its reference once the launch recorded it),
    still open, with the run where that phase's result is awaited. A runner that exits
    after its final report finds its attempt closed by that report.
    """
    if attempt is None or attempt_state is None:
        return f"run {notice.run_id} has no {notice.phase.value} attempt"
    if (attempt.attempt_id, attempt.sandbox_id) != (notice.attempt_id, notice.sandbox_id):
        return f"attempt {notice.attempt_id} is not the run's {notice.phase.value} attempt"
    if attempt.sandbox_ref is not None and attempt.sandbox_ref != notice.reference:
        return f"attempt {notice.attempt_id} runs in another sandbox"
    if attempt_state not in OPEN_ATTEMPT:
        return f"attempt {notice.attempt_id} already closed ({attempt_state})"
    if run_status not in WAITING_STATUSES[notice.phase]:
        return f"run {notice.run_id} is {run_status.value}"
    return None


def process_reported(returncode: int) -> bool:
    """Whether a local runner process ended after its final report was accepted."""
    return returncode in REPORTED_EXIT_CODES


def process_exit(returncode: int) -> str:
    """How a local runner process ended, from its return code (negative: a signal)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"the runner process was killed by signal {-returncode} ({name})"
    return f"the runner process exited with code {returncode}"


def is_task_reference(reference: str) -> bool:
    """Whether a launch's reference is an ECS task ARN, which ECS's events name."""
    return _TASK_ARN.fullmatch(reference) is not None


@dataclass(frozen=True)
class StoppedTask:
    """An ECS task that stopped, as its "ECS Task State Change" event says."""

    task_arn: str
    cluster_arn: str
    detail: str
    reported: bool = False


def stopped_task(event: Mapping[str, Any]) -> StoppedTask | None:
    """The stopped task an EventBridge event reports; None for any other event.

    Only what identifies the task and says how it stopped is read: the event also
    carries the task's overrides (the runner's environment, its one-time handles
    included), which are never read, kept or logged.
    """
    if event.get("source") != "aws.ecs" or event.get("detail-type") != "ECS Task State Change":
        return None
    detail = event.get("detail")
    if not isinstance(detail, Mapping) or detail.get("lastStatus") != "STOPPED":
        return None
    task_arn, cluster_arn = detail.get("taskArn"), detail.get("clusterArn")
    if not isinstance(task_arn, str) or not isinstance(cluster_arn, str):
        return None
    return StoppedTask(
        task_arn, cluster_arn, _how_the_task_stopped(detail), _runner_reported(detail)
    )


def _runner_reported(detail: Mapping[str, Any]) -> bool:
    """Whether the task's one container (the runner) exited with a reported status."""
    containers = detail.get("containers")
    if not isinstance(containers, list) or len(containers) != 1:
        return False
    container = containers[0]
    code = container.get("exitCode") if isinstance(container, Mapping) else None
    return isinstance(code, int) and not isinstance(code, bool) and code in REPORTED_EXIT_CODES


def _how_the_task_stopped(detail: Mapping[str, Any]) -> str:
    said: list[str] = []
    for key in ("stopCode", "stoppedReason"):
        value = detail.get(key)
        if isinstance(value, str) and value:
            said.append(value)
    containers = detail.get("containers")
    for container in containers if isinstance(containers, list) else []:
        if not isinstance(container, Mapping):
            continue
        code = container.get("exitCode")
        if isinstance(code, int) and not isinstance(code, bool):
            said.append(f"{str(container.get('name') or 'container')[:40]} exit code {code}")
    text = "; ".join(said) or "no reason given"
    return f"the ECS task stopped: {text}"[:_DETAIL_CHARACTERS]
