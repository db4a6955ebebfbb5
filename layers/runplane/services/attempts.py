"""Closing a runner attempt: the one write that ends it and returns its sandbox slots."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runplane.store import run_parts, sandbox_slots
from runplane.store.transaction import Transaction

# Attempt states in which a sandbox may be running (and holds its slots).
OPEN_ATTEMPT = frozenset({"launching", "started"})


def close_attempt(
    run_id: str, part: str, attempt: run_parts.RunPart, state: str, now: datetime, **evidence: Any
) -> list[Transaction]:
    """Close an attempt exactly once (its current state is the condition) and give
    back the sandbox slots it took."""
    closing = run_parts.change(
        run_id,
        part,
        expected_state=attempt.state,
        state=state,
        body={**attempt.body, "finished_at": now.isoformat(), **evidence},
        token=None,
        now=now,
    )
    slots = attempt.body.get("slots") or []
    return [closing, *(sandbox_slots.give_back(scope) for scope in slots)]
