"""The one write that closes a runner attempt: its part, its sandbox slots and its
runner sessions, to commit together (``services.attempts``, the unit of work's
``attempts``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.domain.parts import AttemptBody, AttemptState, PartKind, RunPart, check_move
from runplane.store import capabilities as capability_store
from runplane.store import run_parts, sandbox_slots
from runplane.store.transaction import Transaction


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
