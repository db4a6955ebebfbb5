"""A run that ends never leaves its apply record open: the move that ends it closes it.

The apply record is created ``pending`` with the plan. Whatever ends the run
before an apply result is recorded (a rejection, a cancellation, the approval
deadline, a launch refusal, a lost runner) closes it in the same transaction
that moves the run, saying what is known: ``closed`` (nothing was applied),
``failed`` (refused before it started) or ``uncertain``. Here, the endings that go
through the store's own steps (a launch refusal, a replayed start, a runner's report);
a rejection, an expiry, a cancellation and a failed step close it over the in-memory
unit of work (tests/service/test_lifecycle_rules.py, test_cancellation.py).
"""

from __future__ import annotations

import pytest

from runplane.domain.errors import RunEnded
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import Failed
from runplane.services.launch_controls import Controls
from runplane.store import run_parts
from tests.integration.arena import Arena, awaiting_approval, planning

S = RunStatus


def apply_record(arena: Arena, run_id: str) -> dict[str, object]:
    """The apply record as the run review reports it."""
    review = arena.runs.review(arena.admin, run_id)
    assert review["status"] != "applying"
    record = review["apply"]
    assert record is not None
    return record  # type: ignore[no-any-return]


def test_an_apply_start_refused_by_launch_controls_fails_its_apply_record(arena: Arena) -> None:
    # Given an approved run, and launches switched off before its apply starts
    _, run_id = awaiting_approval(arena, "launch-denied")
    arena.runs.decide(arena.admin, run_id, "approve", None)
    controls = arena.orchestration._launch_controls  # the arena's own instance
    controls.set(arena.admin, "organization", Controls(launches_enabled=False))

    # When the workflow tries to start the apply
    with pytest.raises(RunEnded):
        arena.orchestration.start_runner(run_id, "apply", "token-apply")

    # Then nothing started: the run and its apply record both failed
    assert arena.runs.get(arena.admin, run_id).status is S.APPLY_FAILED
    record = apply_record(arena, run_id)
    assert record["status"] == "failed"
    assert str(record["reason"]).startswith("LAUNCH_DENIED")


def test_a_lost_apply_start_replay_reports_its_apply_as_uncertain(arena: Arena) -> None:
    # Given an approved run whose apply attempt was recorded but whose launch never was
    _, run_id = awaiting_approval(arena, "replay-launching")
    arena.runs.decide(arena.admin, run_id, "approve", None)
    arena.orchestration.start_runner(run_id, "apply", "token-apply")
    attempt = run_parts.require(run_id, "attempt#apply")
    run_parts.change(
        run_id,
        "attempt#apply",
        expected_state="started",
        state="launching",
        now=arena.stack.clock.now(),
    ).commit()
    assert attempt.state == "started"

    # When the start step is retried and finds only partial evidence
    with pytest.raises(RunEnded):
        arena.orchestration.start_runner(run_id, "apply", "token-apply-2")

    # Then the run fails closed as uncertain, and so does its apply record
    assert arena.runs.get(arena.admin, run_id).status is S.APPLY_START_UNCERTAIN
    assert apply_record(arena, run_id)["status"] == "uncertain"


def test_a_failed_plan_has_no_apply_record_to_leave_open(arena: Arena) -> None:
    # Given a planning run
    _, run_id = planning(arena, "plan-failed")
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]

    # When its plan fails
    arena.orchestration.report_plan(run_id, attempt, Failed(reason="boom"))

    # Then the run failed before any apply record existed: the review shows none
    assert arena.runs.get(arena.admin, run_id).status is S.PLAN_FAILED
    assert arena.runs.review(arena.admin, run_id)["apply"] is None
