"""Runner attempts: their part's name, and whether one is still open.

An attempt's runner sessions are honoured only while the attempt is open, and
the write that closes it also revokes them (the unit of work's ``attempts.close``):
once a result, a cancellation, a loss or a failed-closed replay ends an attempt,
nothing its sandbox presents is accepted again.
"""

from __future__ import annotations

from runplane.domain.capabilities import Binding, Phase
from runplane.domain.parts import OPEN_ATTEMPT, AttemptBody, RunPart

__all__ = ["OPEN_ATTEMPT", "attempt_part", "open_or_none"]


def attempt_part(phase: Phase) -> str:
    return f"attempt#{phase.value}"


def open_or_none(binding: Binding, attempt: RunPart | None) -> RunPart | None:
    """``attempt`` (the run's part for the binding's phase) if it is still open for it."""
    if attempt is None or attempt.state not in OPEN_ATTEMPT:
        return None
    body = AttemptBody.from_body(attempt.body)
    if (body.attempt_id, body.sandbox_id) != (binding.attempt_id, binding.sandbox_id):
        return None
    return attempt
