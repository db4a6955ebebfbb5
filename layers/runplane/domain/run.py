"""Run kinds, durable statuses and stages: the vocabulary of the run lifecycle."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runplane.domain.parts import ApplyRecordState


class RunKind(StrEnum):
    PLAN_ONLY = "plan_only"
    SPECULATIVE = "speculative"
    PLAN_AND_APPLY = "plan_and_apply"
    # A plan that only refreshes state (``plan -refresh-only``): it reports drift,
    # never proposes changes to infrastructure, and never applies.
    REFRESH_ONLY = "refresh_only"

    @property
    def may_apply(self) -> bool:
        return self is RunKind.PLAN_AND_APPLY

    @property
    def needs_writer_reservation(self) -> bool:
        """Only runs that may apply hold the workspace writer reservation."""
        return self is RunKind.PLAN_AND_APPLY


class RunStatus(StrEnum):
    DISPATCH_PENDING = "dispatch_pending"
    QUEUED = "queued"
    PLANNING = "planning"
    PLAN_COMPLETE = "plan_complete"
    POLICY_EVALUATING = "policy_evaluating"
    POLICY_PASSED = "policy_passed"
    AWAITING_APPROVAL = "awaiting_approval"
    APPLYING = "applying"
    SUCCEEDED = "succeeded"
    PLAN_CREDENTIALS_REQUIRED = "plan_credentials_required"
    PLAN_FAILED = "plan_failed"
    POLICY_FAILED = "policy_failed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELED = "canceled"
    APPLY_FAILED = "apply_failed"
    APPLY_START_UNCERTAIN = "apply_start_uncertain"
    APPLY_INTERRUPTED = "apply_interrupted"
    NEEDS_RECOVERY = "needs_recovery"

    @property
    def meaning(self) -> str:
        return STATUS_MEANINGS[self]

    @property
    def is_terminal(self) -> bool:
        """Terminal and intervention statuses never change again."""
        return self not in ACTIVE_STATUSES

    @property
    def needs_intervention(self) -> bool:
        return self in INTERVENTION_STATUSES


ACTIVE_STATUSES: frozenset[RunStatus] = frozenset(
    {
        RunStatus.DISPATCH_PENDING,
        RunStatus.QUEUED,
        RunStatus.PLANNING,
        RunStatus.PLAN_COMPLETE,
        RunStatus.POLICY_EVALUATING,
        RunStatus.POLICY_PASSED,
        RunStatus.AWAITING_APPROVAL,
        RunStatus.APPLYING,
    }
)

# Outcomes that leave an operator something to decide before the workspace
# can move on: the run keeps writer authority until explicit recovery.
INTERVENTION_STATUSES: frozenset[RunStatus] = frozenset(
    {
        RunStatus.APPLY_START_UNCERTAIN,
        RunStatus.APPLY_INTERRUPTED,
        RunStatus.NEEDS_RECOVERY,
    }
)

STATUS_MEANINGS: dict[RunStatus, str] = {
    RunStatus.DISPATCH_PENDING: "Durable run exists; workflow dispatch is pending",
    RunStatus.QUEUED: "The workflow accepted the run and execution is waiting",
    RunStatus.PLANNING: "The sandbox is running the pinned OpenTofu plan",
    RunStatus.PLAN_COMPLETE: "Immutable plan evidence is committed",
    RunStatus.POLICY_EVALUATING: "The sanitized plan derivative is being evaluated",
    RunStatus.POLICY_PASSED: "Persisted policy evidence permits progression",
    RunStatus.AWAITING_APPROVAL: (
        "The exact plan and policy binding awaits a human decision until its "
        "persisted deadline (seven days by default)"
    ),
    RunStatus.APPLYING: "Apply-start authorization was redeemed and the sandbox is applying",
    RunStatus.SUCCEEDED: (
        "The run completed: plan-only and speculative success is labelled "
        "'Plan completed', apply success 'Applied'"
    ),
    RunStatus.PLAN_CREDENTIALS_REQUIRED: "The plan stopped because the engine needs credentials",
    RunStatus.PLAN_FAILED: "The plan failed; nothing was applied",
    RunStatus.POLICY_FAILED: "A mandatory policy denied the plan, or evaluation failed closed",
    RunStatus.REJECTED: "A person rejected the plan; nothing was applied",
    RunStatus.EXPIRED: "No decision committed before the approval deadline (APPROVAL_EXPIRED)",
    RunStatus.CANCELED: "Canceled before apply started; nothing was applied",
    RunStatus.APPLY_FAILED: (
        "The apply failed; if it published partial state the run keeps writer "
        "authority for recovery"
    ),
    RunStatus.APPLY_START_UNCERTAIN: (
        "Apply start could not be proven; writer authority is held until recovery"
    ),
    RunStatus.APPLY_INTERRUPTED: (
        "The apply did not finish: a cancellation won the apply-result race (the sandbox "
        "was stopped) or a signal killed the engine mid-apply; the writer fence is held "
        "until recovery"
    ),
    RunStatus.NEEDS_RECOVERY: (
        "The apply started but its outcome is unknown; writer authority is held until recovery"
    ),
}


def apply_record_on_end(status: RunStatus) -> ApplyRecordState:
    """What an apply record still open when the run ends in ``status`` becomes.

    An apply that may have touched infrastructure is ``uncertain``; an apply
    refused before it started is ``failed``; every other ending applied nothing.
    """
    # The parts' vocabulary is loaded by what moves a run, not by every reader of one.
    from runplane.domain.parts import ApplyRecordState

    if status is RunStatus.APPLY_FAILED:
        return ApplyRecordState.FAILED
    if status in INTERVENTION_STATUSES:
        return ApplyRecordState.UNCERTAIN
    return ApplyRecordState.CLOSED


class Stage(StrEnum):
    PLAN = "plan"
    POLICY = "policy"
    APPROVAL = "approval"
    APPLY = "apply"


class StageStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"

    @property
    def is_closed(self) -> bool:
        return self in {StageStatus.COMPLETED, StageStatus.SKIPPED, StageStatus.FAILED}


def dashboard_label(status: RunStatus, *, applied: bool) -> str:
    """The label a person sees: success reads differently for plans and applies.

    ``applied`` is whether the apply stage completed: a plan_and_apply run whose
    plan found no changes applied nothing and reads "Plan completed".
    """
    if status is RunStatus.SUCCEEDED:
        return "Applied" if applied else "Plan completed"
    return status.value.replace("_", " ").capitalize()


@dataclass(frozen=True)
class Transitioned:
    """A committed status move: the run's ``source`` and new ``status``, its version
    after the move, and the audit event that records it."""

    run_id: str
    source: RunStatus
    status: RunStatus
    version: int
    event: str
    at: datetime
