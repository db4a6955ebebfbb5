"""One conditional transaction per move: status+version, stages, audit, extra facts."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import AlreadyExists, TransitionRejected
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus
from runplane.store.models import NameClaimItem
from runplane.store.transaction import Transaction
from tests.integration.conftest import Stack
from tests.integration.drive import walk

S = RunStatus


def test_a_move_updates_status_version_stages_and_audit_together(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a queued plan-only run
    run = stack.new_run(org.id, workspace.id, RunKind.PLAN_ONLY, actor="user:ada")
    run = walk(stack.lifecycle, run, S.QUEUED)

    # When planning starts
    stack.lifecycle.move(run, S.PLANNING, actor="workflow")

    # Then the run, its plan stage and its audit trail moved as one
    after = stack.lifecycle.runs.get(run.id)
    assert (after.status, after.version) == (S.PLANNING, run.version + 1)
    plan = stack.lifecycle.runs.stages(run.id)[Stage.PLAN]
    assert plan.status is StageStatus.RUNNING
    assert plan.started_at is not None
    trail = stack.lifecycle.runs.audit_trail(run.id)
    assert [e.type for e in trail] == ["run.created", "run.queued", "run.planning_started"]
    assert trail[-1].details == {"from": "queued", "to": "planning"}
    assert trail[-1].actor == "workflow"


def test_a_move_returns_the_run_as_a_read_right_after_it_would(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a plan-and-apply run whose policy passed, with a reason on its last move
    run = stack.new_run(org.id, workspace.id, RunKind.PLAN_AND_APPLY, actor="user:ada")
    run = walk(stack.lifecycle, run, S.POLICY_PASSED)
    expires = run.updated_at + timedelta(days=7)

    # When it moves to await approval, setting its deadline
    moved = stack.lifecycle.move(
        run, S.AWAITING_APPROVAL, actor="workflow", run_updates={"approval_expires_at": expires}
    )

    # Then the run the move returns is the one a consistent read returns
    assert moved.run == stack.lifecycle.runs.get(run.id)
    assert moved.run.approval_expires_at == expires
    assert moved.run.status_reason is None


def test_a_stale_version_is_rejected_with_the_current_item_and_writes_nothing(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a run that moved on since a caller read it
    stale = stack.new_run(org.id, workspace.id, RunKind.PLAN_ONLY, actor="user:ada")
    walk(stack.lifecycle, stale, S.QUEUED)
    before = stack.scan()

    # When the caller moves its stale snapshot, with an extra fact attached
    extra = Transaction().put_new(NameClaimItem("CLAIM#x", "CLAIM", owner_id=stale.id))
    with pytest.raises(TransitionRejected) as rejected:
        stack.lifecycle.mover.move(stale, S.QUEUED, actor="workflow", extra_writes=[extra])

    # Then the error carries the run as it is now, and the table is byte-for-byte unchanged
    assert rejected.value.current is not None
    assert rejected.value.current["status"] == "queued"
    assert rejected.value.current["version"] == 2
    assert rejected.value.code == "TRANSITION_REJECTED"
    assert stack.scan() == before


def test_a_refused_extra_fact_refuses_the_move_too(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a fact that already exists (immutable evidence cannot be put twice)
    run = stack.new_run(org.id, workspace.id, RunKind.PLAN_ONLY, actor="user:ada")
    Transaction().put_new(NameClaimItem("CLAIM#x", "CLAIM", owner_id="first")).commit()
    before = stack.scan()

    # When a move carries a second put of it
    duplicate = Transaction().put_new(
        NameClaimItem("CLAIM#x", "CLAIM", owner_id=run.id),
        on_refused=lambda current: AlreadyExists(f"claimed by {current and current['owner_id']}"),
    )
    with pytest.raises(AlreadyExists, match="claimed by first"):
        stack.lifecycle.mover.move(run, S.QUEUED, actor="workflow", extra_writes=[duplicate])

    # Then the run did not move and no audit event was written
    assert stack.scan() == before
    assert stack.lifecycle.runs.get(run.id).status is S.DISPATCH_PENDING


def test_the_audit_event_exists_iff_the_move_happened(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    run = stack.new_run(org.id, workspace.id, RunKind.SPECULATIVE, actor="user:ada")
    run = walk(stack.lifecycle, run, S.POLICY_PASSED, changes=True)

    stack.lifecycle.move(run, S.SUCCEEDED, actor="workflow")
    with pytest.raises(TransitionRejected):
        stack.lifecycle.move(run, S.CANCELED, actor="user:bob")

    trail = stack.lifecycle.runs.audit_trail(run.id)
    assert [e.type for e in trail][-1] == "run.plan_finished"
    assert "run.canceled" not in [e.type for e in trail]
    assert len(trail) == stack.lifecycle.runs.get(run.id).version
    stages = stack.lifecycle.runs.stages(run.id)
    assert stages[Stage.APPROVAL].status is StageStatus.SKIPPED
    assert stages[Stage.APPLY].status is StageStatus.SKIPPED


def test_concurrent_moves_from_the_same_status_have_exactly_one_winner(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    # Given a planning run and four writers holding the same snapshot
    run = stack.new_run(org.id, workspace.id, RunKind.PLAN_ONLY, actor="user:ada")
    run = walk(stack.lifecycle, run, S.PLANNING)
    targets = [S.PLAN_COMPLETE, S.PLAN_FAILED, S.CANCELED, S.PLAN_CREDENTIALS_REQUIRED] * 2
    start = threading.Barrier(len(targets))
    outcomes: dict[int, object] = {}

    def attempt(i: int, target: RunStatus) -> None:
        start.wait()
        try:
            outcomes[i] = stack.lifecycle.move(run, target, actor=f"writer:{i}").transition.status
        except TransitionRejected as error:
            outcomes[i] = error

    # When they all race
    threads = [threading.Thread(target=attempt, args=p) for p in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then exactly one won, the losers saw its result, and one audit event records it
    winners = [o for o in outcomes.values() if isinstance(o, RunStatus)]
    losers = [o for o in outcomes.values() if isinstance(o, TransitionRejected)]
    assert len(winners) == 1
    assert len(losers) == len(targets) - 1
    final = stack.lifecycle.runs.get(run.id)
    assert final.status is winners[0]
    assert final.version == run.version + 1
    assert all(loser.current and loser.current["status"] == final.status for loser in losers)
    trail = stack.lifecycle.runs.audit_trail(run.id)
    assert len(trail) == final.version
    assert trail[-1].details["to"] == final.status.value
