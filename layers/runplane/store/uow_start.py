"""The unit of work's repositories for a runner phase's start (``store.unit_of_work``):
its capabilities' mint and redemption, the sandbox slots and reference its launch
writes, and the apply lock taken with the next fence. Each intent is the conditional
write the area's store module builds, committed with the unit's other writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from runplane.domain.capabilities import Binding, CapabilityKind, CapabilityRecord
from runplane.domain.entities import ApplyLock
from runplane.domain.launch_controls import Clearance
from runplane.domain.sandbox_exits import SandboxRef
from runplane.store import apply_lock, capabilities, sandbox_refs, sandbox_slots
from runplane.store.transaction import Transaction
from runplane.store.unit_of_work import DynamoWriterQueue


class DynamoCapabilityIntents:
    def __init__(self, writes: list[Transaction]) -> None:
        self._writes = writes

    def mint(self, handle_hash: str, record: CapabilityRecord, now: datetime) -> None:
        self._writes.append(
            capabilities.mint(
                handle_hash,
                jti=record.jti,
                organization_id=record.organization_id,
                kind=record.kind,
                binding=record.binding,
                inputs=record.inputs,
                now=now,
                valid_until=record.valid_until,
            )
        )

    def redeem(
        self,
        handle_hash: str,
        kind: CapabilityKind,
        binding: Binding,
        now: datetime,
        *,
        request_digest: str | None = None,
        result: Mapping[str, str] | None = None,
    ) -> None:
        self._writes.append(
            capabilities.redeem(
                handle_hash,
                kind=kind,
                binding=binding,
                now=now,
                request_digest=request_digest,
                result=None if result is None else dict(result),
            )
        )


class DynamoSandboxIntents:
    def __init__(self, writes: list[Transaction]) -> None:
        self._writes = writes

    def take_slots(self, clearance: Clearance) -> list[str]:
        scopes, takes = sandbox_slots.take_cleared(clearance)
        self._writes.extend(takes)
        return scopes

    def record(self, ref: SandboxRef, now: datetime, phase_limit: timedelta) -> None:
        self._writes.append(sandbox_refs.record(ref, now, phase_limit))


class DynamoStartWriter(DynamoWriterQueue):
    """The unit's writer queue, and the apply lock a phase's start takes."""

    def take_apply_lock(self, lock: ApplyLock, now: datetime) -> None:
        self._writes.append(
            apply_lock.acquire_apply_lock(
                lock.workspace_id, lock.run_id, lock.lock_id, lock.fence - 1, now
            )
        )
