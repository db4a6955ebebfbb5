"""Concurrent-sandbox slots: one counter per scope, moved only inside transactions.

A slot is taken in the transaction that records a runner attempt as launching,
and given back in the transaction that closes that attempt (its result, its
cancellation, its loss), so the count is decided by the database and each slot
is returned exactly once: the attempt's own state condition guards both.
"""

from __future__ import annotations

from runplane.domain.errors import SandboxCapacityExhausted
from runplane.domain.launch_controls import Clearance
from runplane.store.models import SandboxCountItem, sandbox_count_key
from runplane.store.transaction import Transaction


def active(scope: str) -> int:
    try:
        item = SandboxCountItem.get(*sandbox_count_key(scope), consistent_read=True)
    except SandboxCountItem.DoesNotExist:
        return 0
    return int(item.active or 0)


def take(scope: str, limit: int | None, label: str) -> Transaction:
    """One more running sandbox in ``scope``: refused when ``limit`` are running."""
    item = SandboxCountItem(*sandbox_count_key(scope))
    condition = None
    if limit is not None:
        condition = SandboxCountItem.active.does_not_exist() | (SandboxCountItem.active < limit)
    return Transaction().update(
        item,
        [SandboxCountItem.scope.set(scope), SandboxCountItem.active.add(1)],
        condition=condition,
        on_refused=lambda current: SandboxCapacityExhausted(label, limit or 0),
    )


def take_cleared(clearance: Clearance) -> tuple[list[str], list[Transaction]]:
    """The scopes a new sandbox counts against, and the writes taking a slot in each
    (refused with ``SandboxCapacityExhausted`` when one is full)."""
    writes = [take(scope, limit, label) for scope, (label, limit) in clearance.limits.items()]
    return list(clearance.limits), writes


def give_back(scope: str) -> Transaction:
    item = SandboxCountItem(*sandbox_count_key(scope))
    return Transaction().update(
        item, [SandboxCountItem.scope.set(scope), SandboxCountItem.active.add(-1)]
    )
