"""A decision or cancellation that loses to another one is a 409 naming the run's
status: the run was decided, nothing was written, and retrying will not help."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from functools import partial

import pytest

from runplane.domain.errors import AlreadyDecided, RunplaneError, TooMuchContention
from runplane.store import run_parts
from tests.integration.arena import Arena, awaiting_approval, plan_complete
from tests.integration.conftest import Stack
from tests.integration.test_race_suite import SEED, race


def _refusal(arena: Arena, first: str, second: str) -> tuple[str, AlreadyDecided, list[object]]:
    _, run_id = awaiting_approval(arena, f"decided-{first}-{second}")
    r, admin = arena.runs, arena.admin
    act: dict[str, Callable[[], object]] = {
        "approve": partial(r.decide, admin, run_id, "approve", None),
        "reject": partial(r.decide, admin, run_id, "reject", None),
        "cancel": partial(r.cancel, admin, run_id, arena.launcher),
    }
    act[first]()
    before = arena.stack.scan()
    with pytest.raises(AlreadyDecided) as refused:
        act[second]()
    return run_id, refused.value, [before, arena.stack.scan()]


@pytest.mark.parametrize(
    ("first", "second", "status", "approval"),
    [
        # The workflow has not yet moved the approved run: it still awaits approval.
        ("approve", "reject", "awaiting_approval", "approved"),
        ("reject", "approve", "rejected", "rejected"),
        ("approve", "approve", "awaiting_approval", "approved"),
        ("reject", "reject", "rejected", "rejected"),
        ("cancel", "reject", "canceled", "canceled"),
        ("cancel", "approve", "canceled", "canceled"),
        ("reject", "cancel", "rejected", "rejected"),
    ],
)
def test_a_second_decision_is_refused_with_the_runs_status(
    arena: Arena, stack: Stack, first: str, second: str, status: str, approval: str
) -> None:
    # Given a run awaiting approval that was just decided (or canceled)
    # When another decision (or a cancellation) arrives
    run_id, refused, (before, after) = _refusal(arena, first, second)

    # Then it is a 409 with a code, naming the run's status and its approval
    assert refused.http_status == 409
    body = refused.to_body()
    assert body["code"] == "ALREADY_DECIDED"
    assert body["status"] == status
    assert body["approval"] == approval
    assert body["run_id"] == run_id
    assert status in body["message"]
    # And nothing was written
    assert after == before
    assert run_parts.require(run_id, "approval").state == approval


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


def test_a_decision_resumes_the_workflow_wait_itself(arena: Arena) -> None:
    # Given a run awaiting approval whose workflow stored its wait's token
    _, run_id = plan_complete(arena, "resumed-by-decision")
    o = arena.orchestration
    o.evaluate_policy(run_id)
    o.request_approval(run_id)
    o.wait_for_approval(run_id, "token-waiting")
    resumed_before = len(arena.workflow.resumed)

    # When a person rejects it through the service (no caller resumes anything)
    arena.runs.decide(arena.admin, run_id, "reject", "not now")

    # Then the service itself resumed the wait with the decision
    assert arena.workflow.resumed[resumed_before:] == ["token-waiting"]
    assert run_parts.require(run_id, "approval").state == "rejected"


def test_a_decision_resumes_a_wait_whose_token_was_stored_after_the_decision_read_it(
    arena: Arena, stack: Stack
) -> None:
    # Given a run whose approval was requested, its workflow not having stored its token yet
    _, run_id = plan_complete(arena, "late-token")
    o = arena.orchestration
    o.evaluate_policy(run_id)
    o.request_approval(run_id)
    assert run_parts.require(run_id, "approval").token is None

    # When the workflow stores its token between the decision's read and its write
    resumed_before = len(arena.workflow.resumed)
    stack.clock.on_next_reading(lambda: o.wait_for_approval(run_id, "token-late"))
    decided = arena.runs.decide(arena.admin, run_id, "approve", None)

    # Then the decision carries that token, so the wait it raced with is resumed
    assert run_parts.require(run_id, "approval").state == "approved"
    assert decided.token == "token-late"
    assert arena.workflow.resumed[resumed_before:] == ["token-late"]


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_returns_the_run_as_it_left_it(arena: Arena, decision: str) -> None:
    # Given a run awaiting approval
    _, run_id = awaiting_approval(arena, f"decision-reply-{decision}")

    # When a person decides
    decided = arena.runs.decide(arena.admin, run_id, decision, None)

    # Then the decision names the run as a read right after returns it (a rejection
    # moved it; an approval left it awaiting the workflow)
    assert decided.run == arena.stack.lifecycle.runs.get(run_id)
    expected = "awaiting_approval" if decision == "approve" else "rejected"
    assert decided.run.status.value == expected


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
