"""Seeded interleavings of decisions, new runs and deadlines over the in-memory unit of
work (the scheduler and the invariants: tests/interleavings.py): 10,000 schedules, each
checking the run lifecycle's invariants after every step. ``RUNPLANE_INTERLEAVING_SEED``
replays one schedule; the same schedules on moto: tests/integration/test_interleavings_moto.py.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from runplane.domain.entities import Run
from runplane.domain.identity import Principal
from runplane.domain.run import RunStatus
from runplane.services.runs import Decision
from runplane.services.writer import hand_off
from tests.fake_unit_of_work import InMemoryUnitOfWork
from tests.fakes import FakeClock, LedgerState
from tests.interleavings import Observed, RunView, Schedule, replay_seed, seeds
from tests.service.conftest import Tier

# 10,000 schedules of STEPS steps after the world is built, in CHUNKS tests (for xdist).
SCHEDULES, CHUNKS, STEPS = 10_000, 10, 14


@dataclass
class InMemoryBackend:
    """The service tier's runs: ``Runs.decide`` over the in-memory unit of work, and the
    workflow's steps over the same ledger and writer queue."""

    tier: Tier
    organization_id: str
    workspace_ids: Sequence[str]
    empty: LedgerState
    start: datetime

    @property
    def clock(self) -> FakeClock:
        return self.tier.clock

    def reset(self) -> None:
        """A new world: no runs, no reservation, nothing resumed, the clock at its start."""
        t = self.tier
        t.run_reader.restore(self.empty)
        t.writer_queue.holders.clear()
        t.writer_queue.waiting.clear()
        t.workflow.resumed.clear()
        t.workflow.failed.clear()
        t.workflow.started.clear()
        t.units.clear()
        t.clock.current = self.start

    def create(self, run: Run) -> None:
        self.tier.run_reader.create(run, actor="user:ada", input={"configuration_version_id": "cv"})

    def move(self, run_id: str, target: RunStatus, updates: Mapping[str, Any] | None) -> None:
        ledger = self.tier.run_reader
        ledger.move(ledger.get_run(run_id), target, actor="workflow", run_updates=updates)

    def reserve(self, run: Run, token: str) -> None:
        # As WriterAuthority.reserve: a free reservation is taken, else the run queues.
        queue = self.tier.writer_queue
        waiting = queue.waiting.setdefault(run.workspace_id, [])
        if queue.holders.get(run.workspace_id) is None and not waiting:
            queue.holders[run.workspace_id] = run.id
        else:
            waiting.append((run.id, token))

    def put_part(
        self, run_id: str, name: str, state: str, body: Mapping[str, Any], token: str | None
    ) -> None:
        with InMemoryUnitOfWork(self.tier.run_reader, self.tier.writer_queue) as uow:
            uow.parts.put(run_id, name, state=state, body=body, now=self.clock.now(), token=token)
            uow.commit()

    def finish(self, run_id: str, target: RunStatus) -> None:
        with InMemoryUnitOfWork(self.tier.run_reader, self.tier.writer_queue) as uow:
            uow.runs.move(uow.runs.get(run_id), target, actor="workflow")
            moved = uow.commit()
        hand_off(self.tier.workflow, moved.handoff if moved else None)

    def decide(
        self, principal: Principal, run_id: str, decision: str, binding: Mapping[str, object] | None
    ) -> Decision:
        return self.tier.runs.decide(principal, run_id, decision, None, binding)

    def resumed(self) -> list[str]:
        return [token for token, _ in self.tier.workflow.resumed]

    def snapshot(self) -> object:
        t = self.tier
        return (
            t.run_reader.saved(),
            dict(t.writer_queue.holders),
            {ws: tuple(queue) for ws, queue in t.writer_queue.waiting.items() if queue},
            tuple(t.workflow.resumed),
            tuple(t.workflow.failed),
            tuple(t.workflow.started),
        )

    def observe(self, run_ids: Sequence[str]) -> Observed:
        ledger, queue = self.tier.run_reader, self.tier.writer_queue
        return Observed(
            {r: RunView.of(ledger.get_run(r), ledger.parts(r)) for r in run_ids},
            {ws: queue.holders.get(ws) for ws in self.workspace_ids},
            {ws: tuple(r for r, _ in queue.waiting.get(ws, [])) for ws in self.workspace_ids},
            # The in-memory world has no apply lock, so no fence: it stays at zero.
            {ws: 0 for ws in self.workspace_ids},
        )


def _backend(tier: Tier) -> InMemoryBackend:
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    workspaces = [tier.workspaces.create(admin, "acme", name).id for name in ("network", "dns")]
    return InMemoryBackend(tier, org.id, workspaces, tier.run_reader.saved(), tier.clock.now())


@pytest.mark.parametrize("chunk", range(1 if replay_seed() is not None else CHUNKS))
def test_decisions_new_runs_and_deadlines_keep_the_invariants_in_every_interleaving(
    tier: Tier, chunk: int
) -> None:
    # Given a world of one organization, two workspaces and runs brought to approval
    backend = _backend(tier)
    per_chunk = SCHEDULES // CHUNKS
    chosen = seeds(chunk * per_chunk, per_chunk)
    started, steps, tally = time.perf_counter(), 0, Counter[str]()
    # When each seeded schedule runs its operations, interleaved at their reads
    for seed in chosen:
        backend.reset()
        schedule = Schedule(backend, seed, STEPS)
        # Then every step keeps every invariant (a failure names its seed and steps)
        schedule.play()
        steps += len(schedule.steps)
        tally += schedule.tally
    elapsed = time.perf_counter() - started
    print(
        f"\nin-memory interleavings: {len(chosen)} schedules ({steps} steps) in {elapsed:.2f} s, "
        f"{len(chosen) / elapsed:.0f} schedules/s"
    )
    print("\n".join(f"  {count:>6}  {what}" for what, count in sorted(tally.items())))
