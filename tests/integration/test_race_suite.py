"""Randomized races against one run: every interleaving ends exactly one way.

Seeded and bounded: each trial builds a fresh run, starts the contending
actors together from a barrier with random small delays, then checks the
invariants: one terminal outcome, an audit trail consistent with it, the
writer reservation held iff the outcome requires it, and no refused actor
writing anything or failing untyped.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import timedelta
from functools import partial
from typing import Any

from runplane.domain.errors import RunplaneError
from runplane.domain.parts import OPEN_APPLY_RECORD
from runplane.domain.run import INTERVENTION_STATUSES, RunStatus
from runplane.domain.runner_reports import Applied, Failed
from runplane.domain.transitions import TRANSITIONS
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from runplane.store.runs import RunRepository
from tests.fakes import FakeClock, SeededIds
from tests.integration.arena import Arena, applying, awaiting_approval, log_artifact

SEED = 20261129
S = RunStatus
EVENT_INTO = {row.event: row.target for row in TRANSITIONS}


def check_invariants(run_id: str, workspace_id: str) -> RunStatus:
    repository = RunRepository(FakeClock(), SeededIds())
    run = repository.get(run_id)
    # One terminal outcome...
    assert run.status.is_terminal, f"{run_id} stuck in {run.status}"
    trail = repository.audit_trail(run_id)
    # ...an audit trail with one event per version, ending in exactly that outcome...
    assert len(trail) == run.version
    terminal_events = [e for e in trail if EVENT_INTO.get(e.type, S.QUEUED).is_terminal]
    assert len(terminal_events) == 1, [e.type for e in trail]
    assert terminal_events[0].details["to"] == run.status.value
    # ...and the workspace held iff the outcome requires it.
    workspace = workspace_store.get_workspace(workspace_id, reads=IdentityMap())
    apply_record = run_parts.get(run_id, "apply", reads=IdentityMap())
    published = bool(apply_record and apply_record.body.get("state_published"))
    # ...with no apply record left open...
    assert apply_record is None or apply_record.state not in OPEN_APPLY_RECORD, apply_record
    keeps = run.status in INTERVENTION_STATUSES or (run.status is S.APPLY_FAILED and published)
    assert (workspace.writer_run_id == run_id) == keeps, (run.status, workspace.writer_run_id)
    return run.status


def race(actions: list[Any], rng: random.Random) -> list[Any]:
    start = threading.Barrier(len(actions))
    outcomes: list[Any] = [None] * len(actions)

    def act(i: int) -> None:
        start.wait()
        time.sleep(rng.random() * 0.005)
        try:
            outcomes[i] = actions[i]()
        except RunplaneError as refused:
            outcomes[i] = refused
        except Exception as untyped:  # a refusal must always be typed
            outcomes[i] = AssertionError(f"untyped {type(untyped).__name__}: {untyped}")

    threads = [threading.Thread(target=act, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for outcome in outcomes:
        assert not isinstance(outcome, AssertionError), outcome
    return outcomes


def test_decisions_cancellation_and_expiry_race_to_one_outcome(arena: Arena) -> None:
    rng = random.Random(SEED)
    seen: Counter[str] = Counter()
    trials = 20
    for trial in range(trials):
        ws, run_id = awaiting_approval(arena, f"race-a-{trial}")
        expired_clock = rng.random() < 0.3
        if expired_clock:
            arena.stack.clock.advance(timedelta(minutes=11))
        r, o, admin = arena.runs, arena.orchestration, arena.admin
        menu = {
            "approve": partial(r.decide, admin, run_id, "approve", None),
            "reject": partial(r.decide, admin, run_id, "reject", None),
            "cancel": partial(r.cancel, admin, run_id, arena.launcher),
            "expire": partial(o.arbitrate_expiry, run_id),
        }
        names = rng.sample(sorted(menu), k=rng.randint(2, 4))
        race([menu[name] for name in names], rng)
        if (
            run_parts.require(run_id, "approval").state == "waiting"
            and not r.get(admin, run_id).status.is_terminal
        ):
            # Nobody decided: the workflow's pending wait times out at the deadline.
            arena.stack.clock.advance(timedelta(minutes=11))
            assert o.arbitrate_expiry(run_id) == {"decision": "expired"}
        approved = run_parts.require(run_id, "approval").state == "approved"
        if approved and not r.get(admin, run_id).status.is_terminal:
            # The approved run goes on: its apply starts, and then it is canceled.
            o.start_runner(run_id, "apply", "token-apply")
            r.cancel(admin, run_id, arena.launcher)
        status = check_invariants(run_id, ws)
        seen[
            f"{'+'.join(sorted(names))}{' after deadline' if expired_clock else ''} -> {status}"
        ] += 1
    print(f"\nrace suite A: {trials} interleavings, outcomes: {dict(sorted(seen.items()))}")
    assert sum(seen.values()) == trials


def test_the_apply_result_and_a_cancellation_race_to_one_outcome(arena: Arena) -> None:
    rng = random.Random(SEED + 1)
    seen: Counter[str] = Counter()
    trials = 12
    for trial in range(trials):
        ws, run_id = applying(arena, f"race-b-{trial}")
        attempt = run_parts.require(run_id, "attempt#apply").body["attempt_id"]
        result = rng.choice(["applied", "failed"])
        report = (
            Applied(log_artifact_id=log_artifact(arena, run_id))
            if result == "applied"
            else Failed(reason="apply failed")
        )
        actions = [
            partial(arena.orchestration.report_apply, run_id, attempt, report),
            partial(arena.runs.cancel, arena.admin, run_id, arena.launcher),
        ]
        rng.shuffle(actions)
        race(actions, rng)
        status = check_invariants(run_id, ws)
        # An unconfirmed publication is never success.
        assert status is not S.SUCCEEDED
        seen[f"{result} vs cancel -> {status}"] += 1
    print(f"\nrace suite B: {trials} interleavings, outcomes: {dict(sorted(seen.items()))}")
    assert sum(seen.values()) == trials
