"""Managed runs as TFE clients see them: the one table from our run statuses to TFE's.

A workspace in remote execution mode lets the ``remote`` backend's ``plan`` and
``apply`` create managed runs through the TFE runs API. Clients decide what to do
next from a run's TFE status, its ``actions`` and the status of its plan, apply
and policy check, so each is derived here from durable facts and nowhere else.
The table is rendered into docs/cloud-api.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from runplane.domain.run import ACTIVE_STATUSES, RunKind, RunStatus, StageStatus

S = RunStatus

# The input snapshot's ``source`` of a run a ``remote`` backend created: its
# configuration names that backend, which the runner's override replaces.
REMOTE_OPERATION = "remote-operation"


class ExecutionMode(StrEnum):
    """Where a workspace's plans and applies run, as TFE names it."""

    # The client runs the engine and only stores state and takes locks here.
    LOCAL = "local"
    # ``plan``/``apply`` through the remote backend create managed runs.
    REMOTE = "remote"


class TfeRunStatus(StrEnum):
    # Waiting in the workspace's queue behind the run that holds it.
    PENDING = "pending"
    PLAN_QUEUED = "plan_queued"
    PLANNING = "planning"
    POLICY_CHECKING = "policy_checking"
    PLANNED = "planned"
    POLICY_CHECKED = "policy_checked"
    POLICY_SOFT_FAILED = "policy_soft_failed"
    CONFIRMED = "confirmed"
    APPLYING = "applying"
    APPLIED = "applied"
    PLANNED_AND_FINISHED = "planned_and_finished"
    ERRORED = "errored"
    DISCARDED = "discarded"
    CANCELED = "canceled"


T = TfeRunStatus

# Our status -> TFE's, where the status alone decides. Statuses that need a fact
# of the run or its workspace (dispatch_pending, queued, awaiting_approval,
# succeeded) are resolved in ``tfe_status``.
RUN_STATUS_TABLE: MappingProxyType[RunStatus, TfeRunStatus] = MappingProxyType(
    {
        # Not started yet; behind another run's writer reservation, ``pending``.
        S.DISPATCH_PENDING: T.PLAN_QUEUED,
        S.QUEUED: T.PLAN_QUEUED,
        S.PLANNING: T.PLANNING,
        # The plan is done; policy is evaluated before anyone may decide.
        S.PLAN_COMPLETE: T.POLICY_CHECKING,
        S.POLICY_EVALUATING: T.POLICY_CHECKING,
        S.POLICY_PASSED: T.POLICY_CHECKING,
        S.AWAITING_APPROVAL: T.POLICY_CHECKED,
        S.APPLYING: T.APPLYING,
        S.SUCCEEDED: T.APPLIED,
        S.PLAN_CREDENTIALS_REQUIRED: T.ERRORED,
        S.PLAN_FAILED: T.ERRORED,
        S.POLICY_FAILED: T.ERRORED,
        S.REJECTED: T.DISCARDED,
        S.EXPIRED: T.DISCARDED,
        S.CANCELED: T.CANCELED,
        S.APPLY_FAILED: T.ERRORED,
        # Uncertain outcomes: errored, with the reason; an operator recovers them.
        S.APPLY_START_UNCERTAIN: T.ERRORED,
        S.APPLY_INTERRUPTED: T.ERRORED,
        S.NEEDS_RECOVERY: T.ERRORED,
    }
)

# Refinements of the table by one fact of the run, for the docs.
_BEHIND = "a `plan_and_apply` run while another run holds the workspace's writer reservation"
REFINEMENTS: tuple[tuple[RunStatus, str, TfeRunStatus], ...] = (
    (S.DISPATCH_PENDING, _BEHIND, T.PENDING),
    (S.QUEUED, _BEHIND, T.PENDING),
    (S.AWAITING_APPROVAL, "no policy check was recorded", T.PLANNED),
    (S.AWAITING_APPROVAL, "policy soft-failed (an override is needed)", T.POLICY_SOFT_FAILED),
    (S.AWAITING_APPROVAL, "approved, apply not started yet", T.CONFIRMED),
    (
        S.SUCCEEDED,
        "nothing was applied (plan-only, speculative, no changes)",
        T.PLANNED_AND_FINISHED,
    ),
)

# Policy check row states (see runplane.services.policy) -> TFE policy check statuses.
POLICY_TABLE: MappingProxyType[str, str] = MappingProxyType(
    {
        "passed": "passed",
        "soft_failed": "soft_failed",
        "failed": "hard_failed",
        "overridden": "overridden",
    }
)

# Until the run rests where a person (or the client) can act, its policy check reads
# pending: the client waits on it after the plan, and must then see a run it can
# confirm or discard, never one still moving between policy and approval.
_BEFORE_DECISION = frozenset(
    {
        S.DISPATCH_PENDING,
        S.QUEUED,
        S.PLANNING,
        S.PLAN_COMPLETE,
        S.POLICY_EVALUATING,
        S.POLICY_PASSED,
    }
)


@dataclass(frozen=True)
class RunFacts:
    """What the TFE view of a run is derived from, all read from the database."""

    status: RunStatus
    kind: RunKind
    applied: bool
    """The apply stage completed."""
    approval: str | None
    """The approval record's state (``waiting``, ``approved``, ...), if any."""
    policy: str | None
    """The policy check row's state, if the plan reserved one."""
    plan_stage: StageStatus | None = None
    apply_stage: StageStatus | None = None
    waiting_for: str | None = None
    """The run this one waits behind: see ``waits_behind``."""


# A run that has not started yet: it may still have to wait for the workspace.
NOT_STARTED = frozenset({S.DISPATCH_PENDING, S.QUEUED})


def may_wait(kind: RunKind, status: RunStatus) -> bool:
    """Whether a run may yet wait for its workspace's writer reservation: it needs one
    and has not started. Runs that never take it (speculative, plan-only) wait behind
    nobody: they plan while another run holds the workspace."""
    return kind.needs_writer_reservation and status in NOT_STARTED


def waits_behind(run_id: str, kind: RunKind, status: RunStatus, holder: str | None) -> str | None:
    """The run that ``run_id`` waits behind, which TFE calls ``pending``: the holder of
    the workspace's writer reservation, when the run may wait and is not the holder."""
    if holder is None or holder == run_id or not may_wait(kind, status):
        return None
    return holder


def tfe_status(facts: RunFacts) -> TfeRunStatus:
    status = facts.status
    if facts.waiting_for is not None and status in NOT_STARTED:
        return T.PENDING
    if status is S.AWAITING_APPROVAL:
        if facts.approval == "approved":
            return T.CONFIRMED
        if facts.policy == "soft_failed":
            return T.POLICY_SOFT_FAILED
        return T.POLICY_CHECKED if facts.policy is not None else T.PLANNED
    if status is S.SUCCEEDED and not facts.applied:
        return T.PLANNED_AND_FINISHED
    return RUN_STATUS_TABLE[status]


def awaits_decision(facts: RunFacts) -> bool:
    # A run one person approved of two still awaits a decision (another's).
    return facts.status is S.AWAITING_APPROVAL and facts.approval in {"waiting", "waiting_second"}


def is_confirmable(facts: RunFacts) -> bool:
    """``yes`` at the client's prompt approves: only a run awaiting a decision that an
    approval alone can satisfy (a soft-failed policy needs an override first)."""
    return awaits_decision(facts) and facts.policy != "soft_failed"


def is_discardable(facts: RunFacts) -> bool:
    return awaits_decision(facts)


def is_cancelable(facts: RunFacts) -> bool:
    """Cancel before a decision is asked for, or during apply (which then holds the
    writer authority for recovery); a run awaiting a decision is discarded instead."""
    return facts.status in ACTIVE_STATUSES and facts.status is not S.AWAITING_APPROVAL


def plan_status(facts: RunFacts) -> str:
    stage = facts.plan_stage
    if stage is StageStatus.COMPLETED:
        return "finished"
    if stage is StageStatus.RUNNING:
        return "running"
    if facts.status is S.CANCELED:
        return "canceled"
    if stage is StageStatus.FAILED:
        return "errored"
    if facts.status.is_terminal:
        return "unreachable"
    waiting = facts.waiting_for is not None
    return "queued" if facts.status is S.QUEUED and not waiting else "pending"


def apply_status(facts: RunFacts) -> str:
    stage = facts.apply_stage
    if stage is StageStatus.COMPLETED:
        return "finished"
    if stage is StageStatus.RUNNING:
        return "running"
    if stage is StageStatus.FAILED:
        return "canceled" if facts.status is S.APPLY_INTERRUPTED else "errored"
    if facts.status.is_terminal:
        return "canceled" if facts.status is S.CANCELED else "unreachable"
    if facts.status is S.AWAITING_APPROVAL and facts.approval == "approved":
        return "queued"
    return "pending"


def policy_check_status(facts: RunFacts) -> str:
    if facts.status in _BEFORE_DECISION:
        return "pending"
    if facts.policy is not None and facts.policy in POLICY_TABLE:
        return POLICY_TABLE[facts.policy]
    # The run ended before its policy was evaluated.
    return "canceled" if facts.status is S.CANCELED else "unreachable"


# -- identifiers ------------------------------------------------------------------------

# A run's plan, apply and policy check share the random part of its public ID.
PLAN_PREFIX, APPLY_PREFIX, POLICY_CHECK_PREFIX = "plan-", "apply-", "polchk-"
_DERIVED = re.compile(r"(?P<prefix>plan-|apply-|polchk-)(?P<body>[a-z2-7]{26})")


def derived_id(prefix: str, run_id: str) -> str:
    return prefix + run_id.removeprefix("run-")


def run_of(derived: str, prefix: str) -> str | None:
    """The run ID behind a plan, apply or policy check ID, or None if it is not one."""
    match = _DERIVED.fullmatch(derived)
    if match is None or match["prefix"] != prefix:
        return None
    return "run-" + match["body"]
