"""A run that ends never leaves its apply record open: the move that ends it closes it.

The apply record is created ``pending`` with the plan. Whatever ends the run
before an apply result is recorded (a rejection, a cancellation, the approval
deadline, a launch refusal, a lost runner) closes it in the same transaction
that moves the run, saying what is known: ``closed`` (nothing was applied),
``failed`` (refused before it started) or ``uncertain``. Here, the endings that go
through a runner's report; a rejection, an expiry, a cancellation and a failed step
close it over the in-memory unit of work (tests/service/test_lifecycle_rules.py,
test_cancellation.py), as do a launch refusal and a replayed start
(tests/service/test_runner_start.py).
"""

from __future__ import annotations

from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import Failed
from runplane.store import run_parts
from tests.integration.arena import Arena, planning

S = RunStatus


def apply_record(arena: Arena, run_id: str) -> dict[str, object]:
    """The apply record as the run review reports it."""
    review = arena.runs.review(arena.admin, run_id)
    assert review["status"] != "applying"
    record = review["apply"]
    assert record is not None
    return record  # type: ignore[no-any-return]


def test_a_failed_plan_has_no_apply_record_to_leave_open(arena: Arena) -> None:
    # Given a planning run
    _, run_id = planning(arena, "plan-failed")
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]

    # When its plan fails
    arena.orchestration.report_plan(run_id, attempt, Failed(reason="boom"))

    # Then the run failed before any apply record existed: the review shows none
    assert arena.runs.get(arena.admin, run_id).status is S.PLAN_FAILED
    assert arena.runs.review(arena.admin, run_id)["apply"] is None
