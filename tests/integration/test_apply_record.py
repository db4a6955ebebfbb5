"""A run that ends never leaves its apply record open: the move that ends it closes it.

The apply record is created ``pending`` with the plan. Whatever ends the run
before an apply result is recorded (a rejection, a cancellation, the approval
deadline, a launch refusal, a lost runner) closes it in the same transaction
that moves the run, saying what is known: ``closed`` (nothing was applied),
``failed`` (refused before it started) or ``uncertain``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from runplane.domain.errors import RunEnded
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import Failed
from runplane.services.launch_controls import Controls
from runplane.store import run_parts
from tests.integration.arena import (
    Arena,
    applying,
    awaiting_approval,
    plan_complete,
    planning,
)

S = RunStatus


def apply_record(arena: Arena, run_id: str) -> dict[str, object]:
    """The apply record as the run review reports it."""
    review = arena.runs.review(arena.admin, run_id)
    assert review["status"] != "applying"
    record = review["apply"]
    assert record is not None
    return record  # type: ignore[no-any-return]


def test_a_rejected_run_closes_its_apply_record(arena: Arena) -> None:
    # Given a run awaiting approval, its apply record pending
    _, run_id = awaiting_approval(arena, "rejected")
    assert run_parts.require(run_id, "apply").state == "pending"

    # When a person rejects the plan
    arena.runs.decide(arena.admin, run_id, "reject", "not today")

    # Then the run is rejected and its apply record closed: nothing was applied
    assert arena.runs.get(arena.admin, run_id).status is S.REJECTED
    record = apply_record(arena, run_id)
    assert record["status"] == "closed"
    assert record["resulting_state_version"] == {"status": "not_recorded"}
    assert run_parts.require(run_id, "apply").body["run_status"] == "rejected"


def test_an_expired_run_closes_its_apply_record(arena: Arena) -> None:
    # Given a run awaiting approval whose deadline has passed
    _, run_id = awaiting_approval(arena, "expired")
    arena.stack.clock.advance(timedelta(minutes=11))

    # When the workflow's wait times out and the database arbitrates
    assert arena.orchestration.arbitrate_expiry(run_id) == {"decision": "expired"}

    # Then the run expired and its apply record is closed
    assert arena.runs.get(arena.admin, run_id).status is S.EXPIRED
    assert apply_record(arena, run_id)["status"] == "closed"


def _policy_passed(arena: Arena, name: str) -> tuple[str, str]:
    ws, run_id = plan_complete(arena, name)
    arena.orchestration.evaluate_policy(run_id)
    return ws, run_id


def _approved_and_launched(arena: Arena, name: str) -> tuple[str, str]:
    """Approved, its apply sandbox launched, the start not yet proven."""
    ws, run_id = awaiting_approval(arena, name)
    arena.runs.decide(arena.admin, run_id, "approve", None)
    arena.orchestration.start_runner(run_id, "apply", "token-apply")
    assert run_parts.require(run_id, "apply").state == "starting"
    return ws, run_id


CANCELABLE: dict[str, Callable[[Arena, str], tuple[str, str]]] = {
    "plan_complete": plan_complete,
    "policy_passed": _policy_passed,
    "awaiting_approval": awaiting_approval,
    "approved_apply_launched": _approved_and_launched,
}


@pytest.mark.parametrize("where", list(CANCELABLE))
def test_a_run_canceled_before_apply_closes_its_apply_record(arena: Arena, where: str) -> None:
    # Given a run with an apply record that has not started applying
    _, run_id = CANCELABLE[where](arena, f"cancel-{where.replace('_', '-')}")

    # When it is canceled
    ended = arena.runs.cancel(arena.admin, run_id, arena.launcher)

    # Then it is canceled and its apply record closed (the apply never started)
    assert ended.status is S.CANCELED
    record = apply_record(arena, run_id)
    assert record["status"] == "closed"
    assert str(record["reason"]).startswith("canceled by")


def test_a_run_canceled_while_applying_reports_its_apply_as_uncertain(arena: Arena) -> None:
    # Given an applying run
    _, run_id = applying(arena, "interrupted")

    # When a cancellation wins the race with the apply result
    ended = arena.runs.cancel(arena.admin, run_id, arena.launcher)

    # Then the apply may have happened in part: the record says uncertain, not started
    assert ended.status is S.APPLY_INTERRUPTED
    assert apply_record(arena, run_id)["status"] == "uncertain"


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


def test_a_policy_step_that_errors_closes_the_apply_record(arena: Arena) -> None:
    # Given a run whose policy evaluation has started
    _, run_id = plan_complete(arena, "policy-errored")
    lifecycle = arena.stack.lifecycle
    lifecycle.move(lifecycle.runs.get(run_id), S.POLICY_EVALUATING, actor="workflow")

    # When the policy step errors and the workflow's catch ends the run
    assert arena.orchestration.fail(run_id, "policy", "States.TaskFailed") == {
        "status": "policy_failed"
    }

    # Then the run failed closed and its apply record is closed with it
    assert apply_record(arena, run_id)["status"] == "closed"
    assert run_parts.require(run_id, "apply").state not in {"pending", "starting", "started"}
