"""An apply whose engine a signal ended: an uncertain outcome, never a plain failure.

The runner reports ``interrupted``; the run ends ``apply_interrupted`` holding the
workspace (reservation, lock and fence) until an operator recovers it. Driven through
the real report and recovery services on moto.
"""

from __future__ import annotations

import pytest

from runplane.domain.errors import InvalidInput
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import Interrupted
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import Arena, applying, log_artifact, planning
from tests.integration.state_publishing import publish
from tests.integration.test_recovery import person, recoveries, verified
from tests.integration.test_runner_authority import with_state

S = RunStatus
KILLED = "the engine was killed by signal 9 (SIGKILL) during apply; the state may be partly applied"


def report_interrupted(arena: Arena, run_id: str, *, with_log: bool = True) -> str:
    attempt = run_parts.require(run_id, "attempt#apply").body["attempt_id"]
    log = log_artifact(arena, run_id, text=f"Creating...\n[runner] {KILLED}\n".encode())
    report = Interrupted(reason=KILLED, log_artifact_id=log if with_log else None)
    return arena.orchestration.report_apply(run_id, attempt, report)


def test_an_interrupted_apply_holds_the_workspace_for_recovery(arena: Arena) -> None:
    # Given an applying run holding its workspace's reservation and lock
    ws_id, pinned = with_state(arena, "interrupted")
    _, run_id = applying(arena, "interrupted", workspace_id=ws_id)
    held = workspace_store.get_workspace(ws_id, reads=IdentityMap())
    resumed_before = len(arena.workflow.resumed)

    # When its runner reports the engine was killed mid-apply
    status = report_interrupted(arena, run_id)

    # Then the run is apply_interrupted with the signal in its reason
    assert status == S.APPLY_INTERRUPTED.value
    run = arena.runs.get(arena.admin, run_id)
    assert run.status is S.APPLY_INTERRUPTED
    assert "signal 9 (SIGKILL)" in (run.status_reason or "")
    # And the workspace is still held: same writer, lock and fence
    after = workspace_store.get_workspace(ws_id, reads=IdentityMap())
    assert after.writer_run_id == run_id
    assert (after.lock_id, after.fence) == (held.lock_id, held.fence)
    assert after.current_state_version_id == pinned
    # And the apply record is uncertain, the attempt closed failed with its log
    apply_record = run_parts.require(run_id, "apply")
    assert apply_record.state == "uncertain"
    assert apply_record.body["reason"] == KILLED
    attempt = run_parts.require(run_id, "attempt#apply")
    assert attempt.state == "failed"
    assert attempt.body["reason"] == KILLED
    assert attempt.body["log_artifact_id"]
    # And the workflow's wait for the apply was resumed
    assert len(arena.workflow.resumed) == resumed_before + 1
    assert arena.runs.review(arena.admin, run_id)["recovery"]["status"] == "required"

    # When an operator verifies the unmoved state
    result = recoveries(arena).recover(
        person(arena, "oncall"), run_id, verified(pinned), arena.launcher
    )

    # Then the workspace is free and fenced past the interrupted apply
    freed = workspace_store.get_workspace(ws_id, reads=IdentityMap())
    assert (freed.writer_run_id, freed.lock_id) == (None, None)
    assert freed.fence == held.fence + 1 == result["fence"]
    assert arena.runs.get(arena.admin, run_id).status is S.APPLY_INTERRUPTED


def test_an_interrupted_apply_that_published_state_is_still_uncertain(arena: Arena) -> None:
    # Given an applying run whose engine published a snapshot before it was killed
    ws_id, _ = with_state(arena, "partly")
    _, run_id = applying(arena, "partly", workspace_id=ws_id)
    runner = arena.runner(run_id, "apply")
    publish(arena.stack, runner, workspace_store.get_workspace(ws_id, reads=IdentityMap()), 2)
    current = workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id

    # When its runner reports the engine was killed mid-apply
    status = report_interrupted(arena, run_id, with_log=False)

    # Then the run is interrupted, not succeeded nor needs_recovery, and its apply
    # record names the state it published
    assert status == S.APPLY_INTERRUPTED.value
    apply_record = run_parts.require(run_id, "apply")
    assert apply_record.state == "uncertain"
    assert apply_record.body["state_published"] is True
    assert apply_record.body["resulting_state_version_id"] == current
    assert workspace_store.get_workspace(ws_id, reads=IdentityMap()).writer_run_id == run_id

    # When an operator verifies the partly applied state
    result = recoveries(arena).recover(
        person(arena, "oncall"), run_id, verified(current), arena.launcher
    )

    # Then the apply's publication is accepted and the workspace freed
    assert result["publications_verified"] == 1
    assert workspace_store.get_workspace(ws_id, reads=IdentityMap()).writer_run_id is None


def test_a_plan_session_cannot_report_an_interruption(arena: Arena) -> None:
    # Given a planning run
    _, run_id = planning(arena, "plan-interrupted")
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]

    # When its runner reports an interruption, Then it is refused and the run plans on
    with pytest.raises(InvalidInput):
        arena.orchestration.report_plan(run_id, attempt, Interrupted(reason=KILLED))
    assert arena.runs.get(arena.admin, run_id).status is S.PLANNING
