"""The seeded interleavings of tests/service/test_interleavings.py on DynamoDB (moto):
``Runs.decide``, ``Runs.cancel`` and the approval's expiry as the composition root builds
them, over the DynamoDB unit of work, the workflow's steps through the run ledger, the
writer authority and the same unit of work, and the invariants read back from the table
(tests/interleavings.py). A schedule that passes over the fakes and fails here is a fake
that drifted from the table. ``RUNPLANE_INTERLEAVING_SEED`` replays one schedule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from runplane.domain.entities import ApplyLock, Run
from runplane.domain.identity import Principal
from runplane.domain.parts import ApplyRecordState, AttemptBody, AttemptState
from runplane.domain.recovery import RecoveryRequest
from runplane.domain.run import RunStatus
from runplane.domain.state import Authority
from runplane.services.runs import Decision
from runplane.services.writer import hand_off
from runplane.store import sandbox_slots, state_versions, writer_queue
from runplane.store.prefetch import IdentityMap
from runplane.store.provision import create_table
from runplane.store.run_reader import DynamoRunReader
from runplane.store.unit_of_work import DynamoUnitOfWork
from runplane.store.workspaces import get_workspace
from tests.fakes import FakeClock, RecordingLauncher
from tests.integration.arena import FakeWorkflow
from tests.integration.conftest import TABLE, Stack
from tests.interleavings import (
    APPLIED,
    ATTEMPT,
    Observed,
    RunView,
    play_all,
    published,
    replay_seed,
    seeds,
    verified_recovery,
)

# A few schedules of the in-memory suite's length: each step scans the table.
SCHEDULES, STEPS = 20, 14
# Schedules that reach a recovery (and, 305, its replay) in the in-memory suite: played
# here too, so the recovery's writes are held to the table's. The test fails if they no
# longer reach one (the scheduler changed): pick others the same way.
RECOVERING = [41, 125, 305]


@dataclass
class DynamoBackend:
    """The stack's services on a table emptied for each schedule."""

    stack: Stack
    organization_id: str = ""
    workspace_ids: Sequence[str] = field(default_factory=list)
    launcher: RecordingLauncher = field(default_factory=RecordingLauncher)
    # Each run's recovery request as its recovery submitted it.
    submitted: dict[str, RecoveryRequest] = field(default_factory=dict)

    @property
    def clock(self) -> FakeClock:
        return self.stack.clock

    @property
    def workflow(self) -> FakeWorkflow:
        workflow = self.stack.services.workflow
        assert isinstance(workflow, FakeWorkflow)
        return workflow

    def reset(self) -> None:
        """A new world on an empty table: one organization and two workspaces."""
        client = self.stack.dynamodb
        client.delete_table(TableName=TABLE)  # type: ignore[attr-defined]
        create_table(client, TABLE)  # type: ignore[arg-type]
        self.workflow.resumed.clear()
        self.workflow.failed.clear()
        self.workflow.started.clear()
        self.launcher = RecordingLauncher()
        self.submitted.clear()
        org = self.stack.tenancy.create_organization("acme")
        self.organization_id = org.id
        self.workspace_ids = [
            self.stack.tenancy.create_workspace(org.id, name).id for name in ("network", "dns")
        ]

    def create(self, run: Run) -> None:
        ledger = self.stack.lifecycle.ledger
        ledger.create(run, actor="user:ada", input={"configuration_version_id": "cv"})

    def move(self, run_id: str, target: RunStatus, updates: Mapping[str, Any] | None) -> None:
        lifecycle = self.stack.lifecycle
        run = lifecycle.runs.get(run_id)
        lifecycle.ledger.move(run, target, actor="workflow", run_updates=updates)

    def reserve(self, run: Run, token: str) -> None:
        self.stack.lifecycle.writer.reserve(run, token)

    def _unit(self) -> DynamoUnitOfWork:
        lifecycle = self.stack.lifecycle
        return DynamoUnitOfWork(self.stack.records, lifecycle.mover.move)

    def put_part(
        self, run_id: str, name: str, state: str, body: Mapping[str, Any], token: str | None
    ) -> None:
        with self._unit() as uow:
            uow.parts.put(run_id, name, state=state, body=body, now=self.clock.now(), token=token)
            uow.commit()

    def finish(self, run_id: str, target: RunStatus) -> None:
        with self._unit() as uow:
            uow.runs.move(uow.runs.get(run_id), target, actor="workflow")
            moved = uow.commit()
        hand_off(self.workflow, moved.handoff if moved else None)

    def start_apply(self, run_id: str, reference: str) -> None:
        # The attempt holds a sandbox slot and the apply lock with the next fence; runner
        # sessions are not minted here.
        self.finish(run_id, RunStatus.APPLYING)
        now = self.clock.now()
        run = self.stack.lifecycle.runs.get(run_id)
        lock = self.stack.lifecycle.writer.acquire_apply_lock(run)
        body = _attempt_body(self.organization_id, reference, now, lock)
        with self._unit() as uow:
            uow.parts.put(
                run_id, ATTEMPT, state=AttemptState.STARTED, body=body, now=now, token=None
            )
            uow.parts.put(run_id, "apply", state=ApplyRecordState.STARTED, body={}, now=now)
            uow.commit()
        sandbox_slots.take(self.organization_id, None, "apply").commit()
        # The engine publishes under the lock before the runner reports (the state API's
        # write: the version and the pointer's move, exactly as authorized).
        workspace = get_workspace(run.workspace_id, reads=IdentityMap())
        version = published(run, AttemptBody.from_body(body), now)
        authority = Authority(
            workspace_id=run.workspace_id,
            holder_ref=str(workspace.lock_holder),
            lock_id=lock.lock_id,
            predecessor_id=workspace.current_state_version_id,
            fence=lock.fence,
            run_id=run.id,
        )
        state_versions.publish(version, authority, f"publish-{reference}").commit()

    def end_apply(self, run_id: str) -> None:
        # What the report commits, or refuses writing nothing, is RunnerReports'.
        attempt = DynamoRunReader(self.stack.records).parts(run_id).get(ATTEMPT)
        attempt_id = AttemptBody.from_body(attempt.body).attempt_id if attempt else "att-none"
        self.stack.services.orchestration.report_apply(run_id, attempt_id, APPLIED)

    def cancel(self, principal: Principal, run_id: str) -> Run:
        return self.stack.services.runs.cancel(principal, run_id, self.launcher)

    def expire(self, run_id: str) -> Mapping[str, Any]:
        return self.stack.services.orchestration.arbitrate_expiry(run_id)

    def stopped(self) -> list[str]:
        return list(self.launcher.stopped)

    def decide(
        self, principal: Principal, run_id: str, decision: str, binding: Mapping[str, object] | None
    ) -> Decision:
        return self.stack.services.runs.decide(principal, run_id, decision, None, binding)

    def recover(self, principal: Principal, run_id: str) -> Mapping[str, Any]:
        run = self.stack.lifecycle.runs.get(run_id)
        workspace, _, _ = writer_queue.queue_state(run.workspace_id, reads=IdentityMap())
        # A retry submits what the operator's recovery submitted (the state verified then).
        request = self.submitted.get(run_id, verified_recovery(workspace.current_state_version_id))
        result = self.stack.services.recoveries.recover(principal, run_id, request, self.launcher)
        self.submitted[run_id] = request
        return result

    def resumed(self) -> list[str]:
        return list(self.workflow.resumed)

    def snapshot(self) -> object:
        w = self.workflow
        return (
            self.stack.scan(),
            tuple(w.resumed),
            tuple(w.failed),
            tuple(w.started),
            tuple(self.launcher.stopped),
        )

    def observe(self, run_ids: Sequence[str]) -> Observed:
        reader = DynamoRunReader(self.stack.records)
        runs = {r: RunView.of(reader.get_run(r), reader.parts(r)) for r in run_ids}
        holders, waiting, fences = {}, {}, {}
        for ws in self.workspace_ids:
            workspace, _, waiters = writer_queue.queue_state(ws, reads=IdentityMap())
            holders[ws] = workspace.writer_run_id
            waiting[ws] = tuple(waiter.run_id for waiter in waiters)
            fences[ws] = workspace.fence
        slots = {self.organization_id: sandbox_slots.active(self.organization_id)}
        return Observed(runs, holders, waiting, fences, slots)


def _attempt_body(scope: str, reference: str, now: datetime, lock: ApplyLock) -> dict[str, object]:
    """The apply's attempt in sandbox ``reference``, holding a slot of ``scope`` and the
    apply ``lock``."""
    return {
        "attempt_id": f"att-{reference}",
        "sandbox_id": f"sbx-{reference}",
        "phase": "apply",
        "launched_at": now.isoformat(),
        "slots": [scope],
        "sandbox_ref": reference,
        "lock_id": lock.lock_id,
        "fence": lock.fence,
    }


# The schedules in a few tests, so that workers share them.
CHUNKS = 3


@pytest.mark.parametrize("chunk", range(1 if replay_seed() is not None else CHUNKS))
def test_the_interleavings_keep_the_invariants_on_dynamodb(stack: Stack, chunk: int) -> None:
    # Given the run services on moto, a new table for each schedule
    backend = DynamoBackend(stack)
    last = chunk == CHUNKS - 1
    chosen = seeds(0, SCHEDULES)[chunk::CHUNKS]
    if replay_seed() is None and last:
        chosen += RECOVERING
    # When each seeded schedule runs over the DynamoDB unit of work
    # Then every step keeps every invariant, read back from the table
    tally = play_all(backend, chosen, STEPS, "moto")
    if replay_seed() is None and last:
        assert tally["recovery: recovered"] >= len(RECOVERING)
        assert tally["recovery: replayed"] >= 1
