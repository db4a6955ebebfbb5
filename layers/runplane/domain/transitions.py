"""The run transition table: the only definition of which status moves are allowed.

Each row says which move it is, when it is allowed, which audit event records
it, and what it does to the run's stages. Everything else (the store's
conditional writes, the docs, the workflow) reads this table; nothing else
decides whether a move is legal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from runplane.domain.errors import IllegalTransition
from runplane.domain.run import ACTIVE_STATUSES, RunKind, RunStatus, Stage, StageStatus

S = RunStatus


class Requires(StrEnum):
    """A fact about the run that a move depends on besides its status."""

    NOTHING = "always"
    NOTHING_TO_APPLY = "plan-only or speculative run, or a plan with no changes"
    SOMETHING_TO_APPLY = "plan_and_apply run whose plan has changes"


class WriterEffect(StrEnum):
    """What entering a status does to the workspace writer reservation."""

    KEEP = "keep"
    RELEASE = "release"
    RETAIN_FOR_RECOVERY = "retain for recovery"
    RELEASE_UNLESS_STATE_PUBLISHED = "release unless the apply published state"


@dataclass(frozen=True)
class RunFacts:
    """What a guard may look at. ``plan_has_changes`` is None until a plan exists."""

    kind: RunKind
    plan_has_changes: bool | None = None

    @property
    def has_something_to_apply(self) -> bool:
        return self.kind.may_apply and self.plan_has_changes is True

    @property
    def has_nothing_to_apply(self) -> bool:
        return not self.kind.may_apply or self.plan_has_changes is False


@dataclass(frozen=True)
class Transition:
    source: RunStatus
    target: RunStatus
    event: str
    requires: Requires = Requires.NOTHING
    stages: Mapping[Stage, StageStatus] = field(default_factory=dict)

    def allows(self, facts: RunFacts) -> bool:
        if self.requires is Requires.SOMETHING_TO_APPLY:
            return facts.has_something_to_apply
        if self.requires is Requires.NOTHING_TO_APPLY:
            return facts.has_nothing_to_apply
        return True


# The stage that is running while the run rests in a status, and the stages
# that have not started yet. Used to close stages when a run ends early.
_RUNNING_STAGE: dict[RunStatus, Stage | None] = {
    S.DISPATCH_PENDING: None,
    S.QUEUED: None,
    S.PLANNING: Stage.PLAN,
    S.PLAN_COMPLETE: None,
    S.POLICY_EVALUATING: Stage.POLICY,
    S.POLICY_PASSED: None,
    S.AWAITING_APPROVAL: Stage.APPROVAL,
    S.APPLYING: Stage.APPLY,
}
_STAGE_ORDER = (Stage.PLAN, Stage.POLICY, Stage.APPROVAL, Stage.APPLY)
_FIRST_UNSTARTED: dict[RunStatus, int] = {
    S.DISPATCH_PENDING: 0,
    S.QUEUED: 0,
    S.PLANNING: 1,
    S.PLAN_COMPLETE: 1,
    S.POLICY_EVALUATING: 2,
    S.POLICY_PASSED: 2,
    S.AWAITING_APPROVAL: 3,
    S.APPLYING: 4,
}


def _ending(
    source: RunStatus, running: StageStatus, **explicit: StageStatus
) -> dict[Stage, StageStatus]:
    """Stage effects of a move that ends the run early from ``source``.

    The running stage becomes ``running``'s value, every stage not yet started
    is skipped, and ``explicit`` overrides either.
    """
    effects: dict[Stage, StageStatus] = {}
    current = _RUNNING_STAGE[source]
    if current is not None:
        effects[current] = running
    for stage in _STAGE_ORDER[_FIRST_UNSTARTED[source] :]:
        effects[stage] = StageStatus.SKIPPED
    effects.update({Stage(name): status for name, status in explicit.items()})
    return effects


def _row(
    source: RunStatus,
    target: RunStatus,
    event: str,
    requires: Requires = Requires.NOTHING,
    stages: Mapping[Stage, StageStatus] | None = None,
) -> Transition:
    return Transition(source, target, event, requires, MappingProxyType(dict(stages or {})))


MAIN_PATH: tuple[RunStatus, ...] = (
    S.DISPATCH_PENDING,
    S.QUEUED,
    S.PLANNING,
    S.PLAN_COMPLETE,
    S.POLICY_EVALUATING,
    S.POLICY_PASSED,
    S.AWAITING_APPROVAL,
    S.APPLYING,
    S.SUCCEEDED,
)
_PRE_APPLY = MAIN_PATH[: MAIN_PATH.index(S.APPLYING)]

RUNNING, DONE, FAILED = StageStatus.RUNNING, StageStatus.COMPLETED, StageStatus.FAILED

TRANSITIONS: tuple[Transition, ...] = (
    # Main path.
    _row(S.DISPATCH_PENDING, S.QUEUED, "run.queued"),
    _row(S.QUEUED, S.PLANNING, "run.planning_started", stages={Stage.PLAN: RUNNING}),
    _row(S.PLANNING, S.PLAN_COMPLETE, "run.plan_completed", stages={Stage.PLAN: DONE}),
    _row(
        S.PLAN_COMPLETE, S.POLICY_EVALUATING, "run.policy_started", stages={Stage.POLICY: RUNNING}
    ),
    _row(S.POLICY_EVALUATING, S.POLICY_PASSED, "run.policy_passed", stages={Stage.POLICY: DONE}),
    _row(
        S.POLICY_PASSED,
        S.AWAITING_APPROVAL,
        "run.approval_requested",
        Requires.SOMETHING_TO_APPLY,
        {Stage.APPROVAL: RUNNING},
    ),
    _row(
        S.POLICY_PASSED,
        S.SUCCEEDED,
        "run.plan_finished",
        Requires.NOTHING_TO_APPLY,
        _ending(S.POLICY_PASSED, StageStatus.SKIPPED),
    ),
    _row(
        S.AWAITING_APPROVAL,
        S.APPLYING,
        "run.apply_started",
        Requires.SOMETHING_TO_APPLY,
        {Stage.APPROVAL: DONE, Stage.APPLY: RUNNING},
    ),
    _row(S.APPLYING, S.SUCCEEDED, "run.applied", stages={Stage.APPLY: DONE}),
    # Plan and policy outcomes that end the run.
    _row(S.PLANNING, S.PLAN_FAILED, "run.plan_failed", stages=_ending(S.PLANNING, FAILED)),
    _row(
        S.PLANNING,
        S.PLAN_CREDENTIALS_REQUIRED,
        "run.plan_credentials_required",
        stages=_ending(S.PLANNING, FAILED),
    ),
    _row(
        S.POLICY_EVALUATING,
        S.POLICY_FAILED,
        "run.policy_failed",
        stages=_ending(S.POLICY_EVALUATING, FAILED),
    ),
    # Decisions and deadlines at approval.
    _row(
        S.AWAITING_APPROVAL,
        S.REJECTED,
        "run.rejected",
        stages=_ending(S.AWAITING_APPROVAL, DONE),
    ),
    _row(
        S.AWAITING_APPROVAL,
        S.EXPIRED,
        "run.approval_expired",
        stages=_ending(S.AWAITING_APPROVAL, FAILED),
    ),
    # After approval, before the apply start is proven: a pre-start gate refused
    # (nothing ran), or a start was requested and cannot be proven either way.
    _row(
        S.AWAITING_APPROVAL,
        S.APPLY_FAILED,
        "run.apply_refused",
        Requires.SOMETHING_TO_APPLY,
        {Stage.APPROVAL: DONE, Stage.APPLY: FAILED},
    ),
    _row(
        S.AWAITING_APPROVAL,
        S.APPLY_START_UNCERTAIN,
        "run.apply_start_uncertain",
        Requires.SOMETHING_TO_APPLY,
        {Stage.APPROVAL: DONE, Stage.APPLY: FAILED},
    ),
    # Apply outcomes other than success.
    _row(S.APPLYING, S.APPLY_FAILED, "run.apply_failed", stages={Stage.APPLY: FAILED}),
    _row(
        S.APPLYING,
        S.APPLY_START_UNCERTAIN,
        "run.apply_start_uncertain",
        stages={Stage.APPLY: FAILED},
    ),
    _row(S.APPLYING, S.APPLY_INTERRUPTED, "run.apply_interrupted", stages={Stage.APPLY: FAILED}),
    _row(S.APPLYING, S.NEEDS_RECOVERY, "run.needs_recovery", stages={Stage.APPLY: FAILED}),
    # Cancellation before apply; during apply a winning cancel is apply_interrupted.
    *(
        _row(source, S.CANCELED, "run.canceled", stages=_ending(source, FAILED))
        for source in _PRE_APPLY
    ),
)

WRITER_ON_ENTRY: Mapping[RunStatus, WriterEffect] = MappingProxyType(
    {
        **{status: WriterEffect.KEEP for status in ACTIVE_STATUSES},
        S.SUCCEEDED: WriterEffect.RELEASE,
        S.PLAN_CREDENTIALS_REQUIRED: WriterEffect.RELEASE,
        S.PLAN_FAILED: WriterEffect.RELEASE,
        S.POLICY_FAILED: WriterEffect.RELEASE,
        S.REJECTED: WriterEffect.RELEASE,
        S.EXPIRED: WriterEffect.RELEASE,
        S.CANCELED: WriterEffect.RELEASE,
        S.APPLY_FAILED: WriterEffect.RELEASE_UNLESS_STATE_PUBLISHED,
        S.APPLY_START_UNCERTAIN: WriterEffect.RETAIN_FOR_RECOVERY,
        S.APPLY_INTERRUPTED: WriterEffect.RETAIN_FOR_RECOVERY,
        S.NEEDS_RECOVERY: WriterEffect.RETAIN_FOR_RECOVERY,
    }
)

# Where a run ends when a workflow step fails or times out while it rests in a
# status: never a success. At approval, a failed apply step may have started.
FAILURE_OUTCOME: Mapping[RunStatus, RunStatus] = MappingProxyType(
    {
        S.DISPATCH_PENDING: S.CANCELED,
        S.QUEUED: S.CANCELED,
        S.PLANNING: S.PLAN_FAILED,
        S.PLAN_COMPLETE: S.CANCELED,
        S.POLICY_EVALUATING: S.POLICY_FAILED,
        S.POLICY_PASSED: S.CANCELED,
        S.AWAITING_APPROVAL: S.CANCELED,
        S.APPLYING: S.NEEDS_RECOVERY,
    }
)
FAILURE_OUTCOME_DURING_APPLY: Mapping[RunStatus, RunStatus] = MappingProxyType(
    {**FAILURE_OUTCOME, S.AWAITING_APPROVAL: S.APPLY_START_UNCERTAIN}
)


def failure_outcome(status: RunStatus, *, during_apply: bool) -> RunStatus | None:
    """Where a failed workflow step ends a run in ``status`` (None: it has ended)."""
    table = FAILURE_OUTCOME_DURING_APPLY if during_apply else FAILURE_OUTCOME
    return table.get(status)


_BY_MOVE: Mapping[tuple[RunStatus, RunStatus], Transition] = MappingProxyType(
    {(row.source, row.target): row for row in TRANSITIONS}
)


def find(source: RunStatus, target: RunStatus) -> Transition | None:
    return _BY_MOVE.get((source, target))


def check(source: RunStatus, target: RunStatus, facts: RunFacts) -> Transition:
    """Return the row that allows ``source -> target`` for this run, or raise."""
    row = _BY_MOVE.get((source, target))
    if row is None:
        raise IllegalTransition(source, target, "no such move in the run lifecycle")
    if not row.allows(facts):
        raise IllegalTransition(source, target, f"requires {row.requires.value}")
    return row


def targets_from(source: RunStatus) -> Iterable[RunStatus]:
    return (row.target for row in TRANSITIONS if row.source is source)


def reachable_from(start: RunStatus) -> frozenset[RunStatus]:
    seen = {start}
    frontier = [start]
    while frontier:
        for target in targets_from(frontier.pop()):
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    return frozenset(seen)
