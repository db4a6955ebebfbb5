"""Seeded interleavings of decisions, cancellations, approval expiries, new runs, apply
results, recoveries and deadlines over the in-memory unit of work (the scheduler and the invariants:
tests/interleavings.py): 10,000 schedules, each checking the run lifecycle's invariants
after every step. ``RUNPLANE_INTERLEAVING_SEED``
replays one schedule; the same schedules on moto: tests/integration/test_interleavings_moto.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any, Never

import pytest

from runplane.domain.entities import ApplyLock, Run, Workspace
from runplane.domain.identity import Principal
from runplane.domain.parts import ApplyRecordState, AttemptBody, AttemptState, RunPart
from runplane.domain.recovery import RecoveryRequest
from runplane.domain.run import RunStatus
from runplane.services.artifacts import ArtifactStore
from runplane.services.capabilities import Capabilities
from runplane.services.recovery import Recoveries
from runplane.services.runner_reports import RunnerReports
from runplane.services.runs import Decision
from runplane.services.writer import hand_off
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import InMemoryRecoveries, InMemoryUnitOfWork
from tests.fakes import (
    FakeClock,
    InMemoryArtifactRecords,
    InMemoryObjects,
    InMemoryStateVersions,
    LedgerState,
    LocalDataKeys,
    SeededIds,
    no_read_ahead,
)
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
from tests.service.conftest import Tier

# 10,000 schedules of STEPS steps after the world is built, in CHUNKS tests (for xdist).
SCHEDULES, CHUNKS, STEPS = 10_000, 10, 14


@dataclass
class InMemoryBackend:
    """The service tier's runs: ``Runs.decide``, ``Runs.cancel`` and the approval's expiry
    over the in-memory unit of work, and the workflow's steps over the same ledger, writer
    queue and sandboxes."""

    tier: Tier
    organization_id: str
    workspace_ids: Sequence[str]
    empty: LedgerState
    start: datetime
    # What a recovery reads and writes beside the run's stores: the workspaces as they
    # were created (fence 0, no state), state versions, recovery operations.
    created: dict[str, Workspace]
    versions: InMemoryStateVersions = field(default_factory=InMemoryStateVersions)
    recoveries: InMemoryRecoveries = field(default_factory=InMemoryRecoveries)
    # Each run's recovery request as its recovery submitted it.
    submitted: dict[str, RecoveryRequest] = field(default_factory=dict)

    @property
    def clock(self) -> FakeClock:
        return self.tier.clock

    def reset(self) -> None:
        """A new world: no runs, no reservation, nothing resumed, the clock at its start."""
        t = self.tier
        t.run_reader.restore(self.empty)
        t.writer_queue.holders.clear()
        t.writer_queue.waiting.clear()
        t.sandboxes.restore(({}, {}))
        t.launcher.launched.clear()
        t.launcher.stopped.clear()
        t.workflow.resumed.clear()
        t.workflow.failed.clear()
        t.workflow.started.clear()
        t.units.clear()
        t.clock.current = self.start
        t.directory.workspaces = dict(self.created)
        self.versions.versions.clear()
        self.recoveries.restore(({}, [], []))
        self.submitted.clear()

    def create(self, run: Run) -> None:
        self.tier.run_reader.create(run, actor="user:ada", input={"configuration_version_id": "cv"})

    def move(self, run_id: str, target: RunStatus, updates: Mapping[str, Any] | None) -> None:
        ledger = self.tier.run_reader
        ledger.move(ledger.get_run(run_id), target, actor="workflow", run_updates=updates)

    def reserve(self, run: Run, token: str) -> None:
        self.tier.writer_queue.reserve(run, token)

    def _unit(self) -> InMemoryUnitOfWork:
        t = self.tier
        return InMemoryUnitOfWork(
            t.run_reader,
            t.writer_queue,
            t.sandboxes,
            directory=t.directory,
            versions=self.versions,
            recoveries=self.recoveries,
        )

    @cached_property
    def _reports(self) -> RunnerReports:
        t = self.tier
        return RunnerReports(
            t.clock,
            t.ids,
            run_lifecycle(t.clock, t.ids),
            Capabilities(t.clock, t.ids, self._unit),
            t.workflow,
            t.launcher,
            control_plane_url="http://runplane.test",
            launch_controls=_nothing_else,
            policies=_nothing_else,
            units=self._unit,
            reads_ahead=no_read_ahead,
        )

    @cached_property
    def _recoveries(self) -> Recoveries:
        # Nothing here imports an emergency state: no artifact is ever written.
        t = self.tier
        return Recoveries(t.clock, t.ids, _no_artifacts(), t.workflow, self._unit)

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
        hand_off(self.tier.workflow, moved.handoff if moved else None)

    def start_apply(self, run_id: str, reference: str) -> None:
        self.finish(run_id, RunStatus.APPLYING)
        now, session = self.clock.now(), f"session-{reference}"
        # The apply lock, with the next fence, as the workflow's start takes it.
        workspace_id = self.tier.run_reader.get_run(run_id).workspace_id
        held = self.tier.directory.workspaces[workspace_id]
        lock = ApplyLock(workspace_id, f"lock-{reference}", held.fence + 1, run_id)
        self.tier.directory.workspaces[workspace_id] = replace(
            held, fence=lock.fence, lock_id=lock.lock_id, lock_run_id=run_id, locked_at=now
        )
        body = _attempt_body(self.organization_id, reference, now, lock)
        part = RunPart(
            run_id, ATTEMPT, AttemptState.STARTED, body, f"tok-{reference}", now, now,
            frozenset({session}),
        )  # fmt: skip
        self.tier.run_reader.add_part(part)
        self.tier.run_reader.add_part(
            RunPart(run_id, "apply", ApplyRecordState.STARTED, {}, None, now, now)
        )
        # The engine publishes under the lock before the runner reports (the state API's
        # writes, each its own request).
        version = published(self.tier.run_reader.get_run(run_id), AttemptBody.from_body(body), now)
        self.versions.add(version)
        self.tier.directory.workspaces[workspace_id] = replace(
            self.tier.directory.workspaces[workspace_id], current_state_version_id=version.id
        )
        active = self.tier.sandboxes.active
        active[self.organization_id] = active.get(self.organization_id, 0) + 1
        self.tier.sandboxes.sessions[session] = None

    def end_apply(self, run_id: str) -> None:
        # What the report commits, or refuses writing nothing, is RunnerReports'.
        attempt = self.tier.run_reader.parts(run_id).get(ATTEMPT)
        attempt_id = AttemptBody.from_body(attempt.body).attempt_id if attempt else "att-none"
        self._reports.report_apply(run_id, attempt_id, APPLIED)

    def cancel(self, principal: Principal, run_id: str) -> Run:
        return self.tier.runs.cancel(principal, run_id, self.tier.launcher)

    def expire(self, run_id: str) -> Mapping[str, Any]:
        return self.tier.steps.arbitrate_expiry(run_id)

    def stopped(self) -> list[str]:
        return list(self.tier.launcher.stopped)

    def decide(
        self, principal: Principal, run_id: str, decision: str, binding: Mapping[str, object] | None
    ) -> Decision:
        return self.tier.runs.decide(principal, run_id, decision, None, binding)

    def recover(self, principal: Principal, run_id: str) -> Mapping[str, Any]:
        current = self.tier.directory.get_workspace(
            self.tier.run_reader.get_run(run_id).workspace_id
        ).current_state_version_id
        # A retry submits what the operator's recovery submitted (the state verified then).
        request = self.submitted.get(run_id, verified_recovery(current))
        result = self._recoveries.recover(principal, run_id, request, self.tier.launcher)
        self.submitted[run_id] = request
        return result

    def resumed(self) -> list[str]:
        return [token for token, _ in self.tier.workflow.resumed]

    def snapshot(self) -> object:
        t = self.tier
        return (
            t.run_reader.saved(),
            dict(t.writer_queue.holders),
            {ws: tuple(queue) for ws, queue in t.writer_queue.waiting.items() if queue},
            # A slot given back or a session revoked, and the sandboxes stopped.
            t.sandboxes.saved(),
            tuple(t.launcher.stopped),
            tuple(t.workflow.resumed),
            tuple(t.workflow.failed),
            tuple(t.workflow.started),
            dict(t.directory.workspaces),
            self.recoveries.saved(),
        )

    def observe(self, run_ids: Sequence[str]) -> Observed:
        ledger, queue, sandboxes = self.tier.run_reader, self.tier.writer_queue, self.tier.sandboxes
        return Observed(
            {r: RunView.of(ledger.get_run(r), ledger.held_parts(r)) for r in run_ids},
            {ws: queue.holders.get(ws) for ws in self.workspace_ids},
            {ws: tuple(r for r, _ in queue.waiting.get(ws, [])) for ws in self.workspace_ids},
            {ws: self.tier.directory.get_workspace(ws).fence for ws in self.workspace_ids},
            dict(sandboxes.active),
            {key: revoked is not None for key, revoked in sandboxes.sessions.items()},
        )


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


def _nothing_else() -> Never:
    raise AssertionError("an apply's result reached a service the schedules do not build")


def _backend(tier: Tier) -> InMemoryBackend:
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    workspaces = [tier.workspaces.create(admin, "acme", name).id for name in ("network", "dns")]
    return InMemoryBackend(
        tier,
        org.id,
        workspaces,
        tier.run_reader.saved(),
        tier.clock.now(),
        dict(tier.directory.workspaces),
    )


def _no_artifacts() -> ArtifactStore:
    return ArtifactStore(
        FakeClock(),
        SeededIds(),
        InMemoryObjects(),
        LocalDataKeys(),
        records=InMemoryArtifactRecords(),
    )


@pytest.mark.parametrize("chunk", range(1 if replay_seed() is not None else CHUNKS))
def test_decisions_cancellations_expiries_and_new_runs_keep_the_invariants_in_every_interleaving(
    tier: Tier, chunk: int
) -> None:
    # Given a world of one organization, two workspaces and runs brought to approval
    backend = _backend(tier)
    per_chunk = SCHEDULES // CHUNKS
    chosen = seeds(chunk * per_chunk, per_chunk)
    # When each seeded schedule runs its operations, interleaved at their reads
    # Then every step keeps every invariant (a failure names its seed and steps)
    play_all(backend, chosen, STEPS, "in-memory")
