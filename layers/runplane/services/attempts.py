"""Runner attempts: the one write that closes one, and whether one is still open.

An attempt's runner sessions are honoured only while the attempt is open, and
the write that closes it also revokes them: once a result, a cancellation, a
loss or a failed-closed replay ends an attempt, nothing its sandbox presents
is accepted again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.capabilities import Binding, Phase
from runplane.domain.parts import (
    OPEN_ATTEMPT,
    AttemptBody,
    AttemptState,
    PartKind,
    RunPart,
    check_move,
)
from runplane.store import capabilities as capability_store
from runplane.store import run_parts, sandbox_slots
from runplane.store.transaction import Transaction

__all__ = ["OPEN_ATTEMPT", "attempt_part", "close_attempt", "open_or_none"]


def attempt_part(phase: Phase) -> str:
    return f"attempt#{phase.value}"


def close_attempt(
    run_id: str,
    part: str,
    attempt: RunPart,
    state: AttemptState,
    now: datetime,
    **evidence: Any,
) -> list[Transaction]:
    """Close an attempt exactly once (its current state is the condition), give
    back the sandbox slots it took and revoke its runner sessions (those ``attempt``,
    as read, names: a session started since is refused all the same, its attempt
    being closed)."""
    check_move(PartKind.ATTEMPT, attempt.state, state)
    closing = run_parts.change(
        run_id,
        part,
        expected_state=attempt.state,
        state=state,
        body={**attempt.body, "finished_at": now.isoformat(), **evidence},
        token=None,
        now=now,
    )
    body = AttemptBody.from_body(attempt.body)
    return [
        closing,
        *(sandbox_slots.give_back(scope) for scope in body.slots),
        capability_store.revoke_sessions(attempt.session_keys, now, since=attempt.created_at),
    ]


def open_or_none(binding: Binding, attempt: RunPart | None) -> RunPart | None:
    """``attempt`` (the run's part for the binding's phase) if it is still open for it."""
    if attempt is None or attempt.state not in OPEN_ATTEMPT:
        return None
    body = AttemptBody.from_body(attempt.body)
    if (body.attempt_id, body.sandbox_id) != (binding.attempt_id, binding.sandbox_id):
        return None
    return attempt
