"""On DynamoDB, a decision or cancellation that loses a race is refused as already
decided, never as contention: concurrent writers on the table, and an approval landing
between an expiry's read and its write. Which second decision is refused, with what,
and that it writes nothing: tests/service/test_decisions.py and
tests/service/test_lifecycle_rules.py."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta
from functools import partial

from runplane.domain.errors import AlreadyDecided, RunplaneError, TooMuchContention
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import Arena, awaiting_approval, plan_complete
from tests.integration.test_race_suite import SEED, race


def test_racing_decisions_and_cancellations_never_answer_contention(arena: Arena) -> None:
    # Given runs awaiting approval, each met by concurrent approvals, rejections and cancels
    rng = random.Random(SEED + 7)
    refusals: Counter[str] = Counter()
    for trial in range(12):
        _, run_id = awaiting_approval(arena, f"decision-race-{trial}")
        r, admin = arena.runs, arena.admin
        menu = [
            partial(r.decide, admin, run_id, "approve", None),
            partial(r.decide, admin, run_id, "reject", None),
            partial(r.cancel, admin, run_id, arena.launcher),
        ]
        # When they race
        outcomes = race(rng.sample(menu, k=rng.randint(2, 3)), rng)
        # Then every loser is told the run was decided: never "retry later"
        for outcome in outcomes:
            if isinstance(outcome, RunplaneError):
                assert not isinstance(outcome, TooMuchContention), outcome
                assert isinstance(outcome, AlreadyDecided), outcome
                assert outcome.http_status == 409
                refusals[outcome.to_body()["status"]] += 1
    print(f"\nrefused decisions by the status they named: {dict(refusals)}")


def test_an_approval_between_the_expirys_read_and_write_wins_without_contention(
    arena: Arena,
) -> None:
    # Given a run awaiting approval, a moment before its deadline
    _, run_id = awaiting_approval(arena, "expiry-race")
    run = arena.runs.get(arena.admin, run_id)
    assert run.approval_expires_at is not None
    clock = arena.stack.clock
    clock.current = run.approval_expires_at - timedelta(milliseconds=10)

    def approved_then_deadline_passes() -> None:
        arena.runs.decide(arena.admin, run_id, "approve", None)
        clock.advance(timedelta(seconds=1))

    # When the approval commits after the expiry read the approval waiting, and the
    # deadline passes before the expiry's write
    clock.on_next_reading(approved_then_deadline_passes)
    outcome = arena.orchestration.arbitrate_expiry(run_id)
    # Then the expiry's write is refused once (not retried into contention) and the
    # approval is what happened: the run still awaits its apply
    assert outcome == {"decision": "approve"}
    assert run_parts.require(run_id, "approval").state == "approved"
    assert arena.runs.get(arena.admin, run_id).status.value == "awaiting_approval"


def test_a_rejection_meeting_the_waits_token_is_written_again_and_resumes_it(
    arena: Arena,
) -> None:
    # Given a run awaiting approval whose workflow has not stored its wait's token yet
    ws, run_id = plan_complete(arena, "token-race")
    arena.orchestration.evaluate_policy(run_id)
    assert run_parts.require(run_id, "approval").token is None
    # When a rejection reads it, and the wait stores its token before the rejection's write
    arena.stack.clock.on_next_reading(
        lambda: arena.orchestration.wait_for_approval(run_id, "token-late")
    )
    decided = arena.runs.decide(arena.admin, run_id, "reject", None)
    # Then the first write was refused, writing nothing, and the second, naming the token,
    # rejected the run, released its workspace and resumed the wait with the rejection
    assert decided.token == "token-late"
    assert decided.run.status.value == "rejected"
    assert run_parts.require(run_id, "approval").state == "rejected"
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id is None
    assert arena.workflow.resumed[-1] == "token-late"
