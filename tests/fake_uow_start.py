"""The in-memory unit of work's repositories for a runner phase's start (as
``store.uow_start``'s): capabilities minted and redeemed in an ``InMemoryRunnerSessions``
(where a sandbox's bootstrap handle is then redeemed for its session), sandbox slots
taken in ``InMemorySandboxes``, launches' references recorded in ``InMemorySandboxRefs``
and the apply lock taken on the directory's workspace. Each intent checks the table's
condition at commit and raises its error, inside the unit's all-or-nothing commit
(tests/integration/test_start_unit_of_work_contract.py holds both to the same cases).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from runplane.domain.capabilities import Binding, CapabilityKind, CapabilityRecord
from runplane.domain.entities import ApplyLock, LockHolder
from runplane.domain.errors import (
    ConcurrentChange,
    NotWriter,
    SandboxCapacityExhausted,
    WorkspaceAlreadyLocked,
)
from runplane.domain.launch_controls import Clearance
from runplane.domain.sandbox_exits import SandboxRef
from tests.fake_unit_of_work import InMemorySandboxes, InMemoryWriter, _Effect, _Intent
from tests.fakes_access import InMemoryRunnerSessions, Redemption
from tests.fakes_operations import InMemorySandboxRefs


@dataclass
class InMemoryStartRecords:
    """The capabilities (with their redemptions) and the launches' references a start
    writes."""

    sessions: InMemoryRunnerSessions = field(default_factory=InMemoryRunnerSessions)
    refs: InMemorySandboxRefs = field(default_factory=InMemorySandboxRefs)

    def saved(self) -> tuple[Any, ...]:
        held = self.sessions
        return dict(held.capabilities), dict(held.redemptions), dict(self.refs.refs)

    def restore(self, saved: tuple[Any, ...]) -> None:
        capabilities, redemptions, refs = saved
        self.sessions.capabilities = dict(capabilities)
        self.sessions.redemptions = dict(redemptions)
        self.refs.refs = dict(refs)


class InMemoryCapabilityIntents:
    def __init__(self, records: InMemoryStartRecords, intents: list[_Intent]) -> None:
        self._held = records.sessions
        self._intents = intents

    def mint(self, handle_hash: str, record: CapabilityRecord, now: datetime) -> None:
        held = self._held

        def mint() -> None:
            if handle_hash in held.capabilities:
                raise ConcurrentChange("the capability changed concurrently; nothing was written")
            held.mint(handle_hash, record)

        self._intents.append(_Effect(("capability", handle_hash), mint))

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
        held = self._held
        stored = tuple(sorted((result or {}).items()))

        def redeem() -> None:
            # The table's conditions, in the order its refusal explains them.
            held._refuse_redemption(handle_hash, kind, binding, now)
            jti = held.capabilities[handle_hash].jti
            held.redemptions[handle_hash] = Redemption(jti, request_digest, stored)

        self._intents.append(_Effect(("capability", handle_hash), redeem))


class InMemorySandboxIntents:
    def __init__(
        self, sandboxes: InMemorySandboxes, records: InMemoryStartRecords, intents: list[_Intent]
    ) -> None:
        self._sandboxes = sandboxes
        self._refs = records.refs
        self._intents = intents

    def take_slots(self, clearance: Clearance) -> list[str]:
        active = self._sandboxes.active
        for scope, (label, limit) in clearance.limits.items():

            def take(scope: str = scope, label: str = label, limit: int | None = limit) -> None:
                if limit is not None and active.get(scope, 0) >= limit:
                    raise SandboxCapacityExhausted(label, limit)
                active[scope] = active.get(scope, 0) + 1

            self._intents.append(_Effect(("sandbox_slots", scope), take))
        return list(clearance.limits)

    def record(self, ref: SandboxRef, now: datetime, phase_limit: timedelta) -> None:
        refs = self._refs

        def record() -> None:
            if ref.reference in refs.refs:
                raise ConcurrentChange(f"sandbox {ref.reference} was recorded already")
            refs.record(ref)

        self._intents.append(_Effect(("sandbox_ref", ref.reference), record))


class InMemoryStartWriter(InMemoryWriter):
    """The unit's writer, and the apply lock a phase's start takes."""

    def take_apply_lock(self, lock: ApplyLock, now: datetime) -> None:
        directory, queue = self._directory, self._queue

        def take() -> None:
            held = directory.get_workspace(lock.workspace_id)
            writer = queue.holders.get(lock.workspace_id)
            if writer != lock.run_id:
                raise NotWriter(lock.workspace_id, lock.run_id, writer)
            if held.lock_id is not None:
                raise WorkspaceAlreadyLocked(
                    lock.workspace_id, held.lock_holder_display or held.lock_holder
                )
            if held.fence != lock.fence - 1:
                raise ConcurrentChange(f"workspace {lock.workspace_id} fence moved")
            holder = LockHolder.for_run(lock.run_id)
            directory.workspaces[lock.workspace_id] = replace(
                held,
                fence=lock.fence,
                lock_id=lock.lock_id,
                lock_run_id=lock.run_id,
                lock_holder=holder.ref,
                lock_holder_display=holder.display,
                lock_reason="apply",
                locked_at=now,
            )

        self._intents.append(_Effect(("workspace", lock.workspace_id), take))
