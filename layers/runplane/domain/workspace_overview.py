"""What a workspace listing says needs a person's attention (pure rules).

A workspace needs attention when its latest run waits for an approval, waits for an
operator's recovery, or failed (however long ago: the list says how the workspace
stands, where the attention inbox lists only the last 7 days' failures as news), or
when the last check found drift. Each reason is named, never shown by colour alone.
"""

from __future__ import annotations

from enum import StrEnum

from runplane.domain.attention import FAILED_STATUSES
from runplane.domain.run import INTERVENTION_STATUSES, RunStatus


class Attention(StrEnum):
    AWAITING_APPROVAL = "awaiting_approval"
    NEEDS_RECOVERY = "needs_recovery"
    FAILED = "failed"
    DRIFTED = "drifted"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Attention.AWAITING_APPROVAL: "awaiting approval",
    Attention.NEEDS_RECOVERY: "needs recovery",
    Attention.FAILED: "failed",
    Attention.DRIFTED: "drifted",
}


def attention_of(
    latest_run: RunStatus | None, *, held_for_recovery: bool, drifted: bool
) -> tuple[Attention, ...]:
    """Why a workspace needs attention (empty: it does not), most pressing first.

    ``latest_run``: its newest run's status (None: no run, or not readable);
    ``held_for_recovery``: a run holds its writer authority until an operator recovers
    it (an apply that failed after publishing state keeps it)."""
    reasons: list[Attention] = []
    if latest_run is RunStatus.AWAITING_APPROVAL:
        reasons.append(Attention.AWAITING_APPROVAL)
    if held_for_recovery or latest_run in INTERVENTION_STATUSES:
        reasons.append(Attention.NEEDS_RECOVERY)
    if latest_run in FAILED_STATUSES:
        reasons.append(Attention.FAILED)
    if drifted:
        reasons.append(Attention.DRIFTED)
    return tuple(reasons)
