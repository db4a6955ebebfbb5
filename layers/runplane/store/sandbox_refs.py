"""Which attempt each ECS sandbox task was launched for, found by the task's ARN.

ECS reports a stopped task by its ARN only; the attempt it ran for is recorded here
by the control plane, in the write that records the launch on the attempt, so an
event can be mapped to an attempt without trusting anything the task says. It is a
pointer, not evidence: whoever reads it checks it against the attempt itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pynamodb.attributes import UnicodeAttribute, UTCDateTimeAttribute

from runplane.domain.capabilities import Phase
from runplane.domain.sandbox_exits import SandboxRef
from runplane.store.models import TableItem
from runplane.store.transaction import Transaction

# A task runs one phase at most (four hours); its stop is reported within minutes.
RETENTION = timedelta(days=1)


class SandboxRefItem(TableItem):
    reference = UnicodeAttribute()
    run_id = UnicodeAttribute()
    phase = UnicodeAttribute()
    attempt_id = UnicodeAttribute()
    sandbox_id = UnicodeAttribute()
    launched_at = UTCDateTimeAttribute()


def sandbox_ref_key(reference: str) -> tuple[str, str]:
    return f"SANDBOX#{reference}", "SANDBOX"


def record(ref: SandboxRef, now: datetime, phase_limit: timedelta) -> Transaction:
    """The pointer to ``ref``'s attempt, put once (a task ARN is never reused)."""
    return Transaction().put_new(_item(ref, now, expires_at=now + phase_limit + RETENTION))


def _item(ref: SandboxRef, launched_at: datetime, *, expires_at: datetime) -> SandboxRefItem:
    """The item holding ``ref`` (the inverse of ``_ref``)."""
    return SandboxRefItem(
        *sandbox_ref_key(ref.reference),
        reference=ref.reference,
        run_id=ref.run_id,
        phase=ref.phase.value,
        attempt_id=ref.attempt_id,
        sandbox_id=ref.sandbox_id,
        launched_at=launched_at,
        expires_at=expires_at,
    )


def find(reference: str) -> SandboxRef | None:
    try:
        item = SandboxRefItem.get(*sandbox_ref_key(reference), consistent_read=True)
    except SandboxRefItem.DoesNotExist:
        return None
    return _ref(item)


def _ref(item: SandboxRefItem) -> SandboxRef:
    """The pointer an item holds (the inverse of ``_item``)."""
    return SandboxRef(
        reference=item.reference,
        run_id=item.run_id,
        phase=Phase(item.phase),
        attempt_id=item.attempt_id,
        sandbox_id=item.sandbox_id,
    )


class DynamoSandboxRefs:
    """``SandboxRefs`` on the table (``services.repositories.operations``)."""

    def find(self, reference: str) -> SandboxRef | None:
        return find(reference)
