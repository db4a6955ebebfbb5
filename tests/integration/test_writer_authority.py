"""Workspace writer authority: FIFO reservation, hand-off, the apply lock and the fence."""

from __future__ import annotations

import threading

import pytest

from runplane.domain.entities import Organization, Run, Workspace
from runplane.domain.errors import NotWriter, StaleFence, TransitionRejected
from runplane.domain.run import RunKind, RunStatus
from runplane.services.writer import ReservationNotNeeded
from runplane.store import workspaces as workspace_store
from runplane.store import writer_queue
from runplane.store.prefetch import IdentityMap
from runplane.store.writer import DynamoWriterAuthority
from tests.integration.conftest import Stack
from tests.integration.drive import walk

S = RunStatus


def apply_run(stack: Stack, org: Organization, workspace: Workspace) -> Run:
    return stack.new_run(org.id, workspace.id, RunKind.PLAN_AND_APPLY, actor="user:ada")


def holder_and_queue(workspace_id: str) -> tuple[str | None, list[tuple[str, str]]]:
    workspace, _, waiters = writer_queue.queue_state(workspace_id, reads=IdentityMap())
    return workspace.writer_run_id, [(w.run_id, w.token) for w in waiters]


def test_fifo_hand_off_across_three_runs_while_another_workspace_proceeds(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    writer = DynamoWriterAuthority(stack.clock, stack.ids)
    other = stack.tenancy.create_workspace(org.id, "dns")
    # Given three plan_and_apply runs asking for one workspace in order
    first, second, third = (apply_run(stack, org, workspace) for _ in range(3))
    assert writer.reserve(first, "token-1").held
    assert writer.reserve(second, "token-2").position == 1
    assert writer.reserve(third, "token-3").position == 2

    # Then a run in another workspace is not held up by that queue
    elsewhere = apply_run(stack, org, other)
    assert writer.reserve(elsewhere, "token-x").held

    # When the holder ends, the oldest waiter gets the reservation and its token back
    first = walk(stack.lifecycle, first, S.PLANNING)
    moved = stack.lifecycle.move(first, S.PLAN_FAILED, actor="workflow")
    assert moved.handoff is not None
    assert (moved.handoff.run_id, moved.handoff.token) == (second.id, "token-2")
    assert holder_and_queue(workspace.id) == (second.id, [(third.id, "token-3")])

    # And when that one ends too, the last waiter follows
    second = walk(stack.lifecycle, second, S.AWAITING_APPROVAL)
    moved = stack.lifecycle.move(second, S.REJECTED, actor="user:bob")
    assert moved.handoff is not None
    assert moved.handoff.run_id == third.id
    assert holder_and_queue(workspace.id) == (third.id, [])

    # And the last release leaves the reservation free with nobody waiting
    third = walk(stack.lifecycle, third, S.POLICY_PASSED, changes=False)
    moved = stack.lifecycle.move(third, S.SUCCEEDED, actor="workflow")
    assert moved.handoff is None
    assert holder_and_queue(workspace.id) == (None, [])
    assert workspace_store.get_workspace(workspace.id, reads=IdentityMap()).queue_length == 0
    assert holder_and_queue(other.id) == (elsewhere.id, [])


def test_plan_only_and_speculative_runs_never_touch_the_reservation(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    holder = apply_run(stack, org, workspace)
    stack.lifecycle.writer.reserve(holder, "token-1")
    for kind in (RunKind.PLAN_ONLY, RunKind.SPECULATIVE):
        run = stack.new_run(org.id, workspace.id, kind, actor="user:ada")
        with pytest.raises(ReservationNotNeeded):
            stack.lifecycle.writer.reserve(run, "token")
        before = writer_queue.queue_state(workspace.id, reads=IdentityMap())
        run = walk(stack.lifecycle, run, S.POLICY_PASSED)
        moved = stack.lifecycle.move(run, S.SUCCEEDED, actor="workflow")
        assert moved.handoff is None
        assert writer_queue.queue_state(workspace.id, reads=IdentityMap()) == before


def test_asking_again_keeps_the_place_and_takes_the_new_token(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    first, second = apply_run(stack, org, workspace), apply_run(stack, org, workspace)
    writer = DynamoWriterAuthority(stack.clock, stack.ids)
    writer.reserve(first, "token-1")
    writer.reserve(second, "token-2")

    assert writer.reserve(first, "token-1b").held
    again = writer.reserve(second, "token-2b")

    assert (again.held, again.position) == (False, 1)
    assert holder_and_queue(workspace.id) == (first.id, [(second.id, "token-2b")])


def test_a_canceled_waiter_leaves_the_queue_and_is_skipped(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    first, second, third = (apply_run(stack, org, workspace) for _ in range(3))
    writer = DynamoWriterAuthority(stack.clock, stack.ids)
    for i, run in enumerate((first, second, third)):
        writer.reserve(run, f"token-{i}")
    second = walk(stack.lifecycle, second, S.QUEUED)

    stack.lifecycle.move(second, S.CANCELED, actor="user:bob")
    assert holder_and_queue(workspace.id) == (first.id, [(third.id, "token-2")])

    moved = stack.lifecycle.move(first, S.CANCELED, actor="user:bob")
    assert moved.handoff is not None
    assert moved.handoff.run_id == third.id


def test_concurrent_requests_queue_each_run_exactly_once(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    runs = [apply_run(stack, org, workspace) for _ in range(6)]
    start = threading.Barrier(len(runs))
    results = {}

    def ask(run: Run) -> None:
        start.wait()
        results[run.id] = stack.lifecycle.writer.reserve(run, f"token-{run.id}")

    threads = [threading.Thread(target=ask, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    holders = [r for r in results.values() if r.held]
    assert len(holders) == 1
    holder, queue = holder_and_queue(workspace.id)
    assert holder == holders[0].run_id
    assert sorted(run_id for run_id, _ in queue) == sorted(r.id for r in runs if r.id != holder)
    positions = {results[run_id].position for run_id, _ in queue}
    assert positions == set(range(1, len(runs)))
    assert (
        workspace_store.get_workspace(workspace.id, reads=IdentityMap()).queue_length
        == len(runs) - 1
    )


def test_outcomes_that_need_recovery_keep_the_writer_authority(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    outcomes = [
        (S.NEEDS_RECOVERY, False),
        (S.APPLY_INTERRUPTED, False),
        (S.APPLY_START_UNCERTAIN, False),
        (S.APPLY_FAILED, True),
    ]
    for target, published in outcomes:
        ws = stack.tenancy.create_workspace(org.id, f"ws-{target.value}")
        run, waiter = apply_run(stack, org, ws), apply_run(stack, org, ws)
        stack.lifecycle.writer.reserve(run, "token-1")
        stack.lifecycle.writer.reserve(waiter, "token-2")
        run = walk(stack.lifecycle, run, S.APPLYING)
        lock = stack.lifecycle.writer.acquire_apply_lock(run)

        moved = stack.lifecycle.mover.move(run, target, actor="workflow", state_published=published)

        assert moved.handoff is None
        after = workspace_store.get_workspace(ws.id, reads=IdentityMap())
        assert (after.writer_run_id, after.lock_id, after.fence) == (run.id, lock.lock_id, 1)
        assert after.queue_length == 1


def test_a_failed_apply_that_published_nothing_releases_lock_and_reservation(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    run, waiter = apply_run(stack, org, workspace), apply_run(stack, org, workspace)
    stack.lifecycle.writer.reserve(run, "token-1")
    stack.lifecycle.writer.reserve(waiter, "token-2")
    run = walk(stack.lifecycle, run, S.APPLYING)
    lock = stack.lifecycle.writer.acquire_apply_lock(run)

    moved = stack.lifecycle.mover.move(run, S.APPLY_FAILED, actor="workflow", lock=lock)

    assert moved.handoff is not None
    assert moved.handoff.run_id == waiter.id
    after = workspace_store.get_workspace(workspace.id, reads=IdentityMap())
    assert (after.writer_run_id, after.lock_id, after.fence) == (waiter.id, None, 1)


def test_the_fence_grows_with_every_lock_and_a_stale_holder_is_refused(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    writer = DynamoWriterAuthority(stack.clock, stack.ids)
    first, second = apply_run(stack, org, workspace), apply_run(stack, org, workspace)
    writer.reserve(first, "token-1")
    writer.reserve(second, "token-2")

    # Given the first run locked (fence 1), finished and handed over
    old_lock = writer.acquire_apply_lock(first)
    assert writer.acquire_apply_lock(first) == old_lock  # repeating is safe
    assert old_lock.fence == 1
    writer.require_authority(old_lock).commit()
    first = walk(stack.lifecycle, first, S.APPLYING)
    stack.lifecycle.mover.move(first, S.SUCCEEDED, actor="workflow", lock=old_lock)

    # When the second run locks, the fence advances
    new_lock = writer.acquire_apply_lock(second)
    assert new_lock.fence == 2
    before = stack.scan()

    # Then anything done with the old authority is refused and writes nothing
    with pytest.raises(StaleFence) as stale:
        writer.require_authority(old_lock).commit()
    assert (stale.value.fence, stale.value.current_fence) == (1, 2)
    with pytest.raises(StaleFence):
        writer.release_apply_lock(old_lock).commit()
    assert stack.scan() == before
    writer.require_authority(new_lock).commit()


def test_a_stale_lock_refuses_the_whole_transition(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    writer = DynamoWriterAuthority(stack.clock, stack.ids)
    run = apply_run(stack, org, workspace)
    writer.reserve(run, "token-1")
    run = walk(stack.lifecycle, run, S.APPLYING)
    old_lock = writer.acquire_apply_lock(run)
    writer.release_apply_lock(old_lock).commit()
    writer.acquire_apply_lock(run)
    before = stack.scan()

    with pytest.raises(StaleFence):
        stack.lifecycle.mover.move(run, S.SUCCEEDED, actor="workflow", lock=old_lock)
    with pytest.raises(StaleFence):
        stack.lifecycle.mover.move(
            run,
            S.NEEDS_RECOVERY,
            actor="workflow",
            extra_writes=[writer.require_authority(old_lock)],
        )

    assert stack.scan() == before


def test_only_the_reservation_holder_can_lock_or_release(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    writer = DynamoWriterAuthority(stack.clock, stack.ids)
    holder, waiter = apply_run(stack, org, workspace), apply_run(stack, org, workspace)
    writer.reserve(holder, "token-1")
    writer.reserve(waiter, "token-2")
    outsider = apply_run(stack, org, workspace)
    before = stack.scan()

    with pytest.raises(NotWriter):
        writer.acquire_apply_lock(waiter)
    with pytest.raises(NotWriter):
        writer.release(workspace.id, outsider.id)
    assert stack.scan() == before

    writer.acquire_apply_lock(holder)
    writer.release(workspace.id, holder.id)
    assert holder_and_queue(workspace.id) == (waiter.id, [])
    assert workspace_store.get_workspace(workspace.id, reads=IdentityMap()).lock_id is None


def test_releasing_with_a_stale_snapshot_of_the_run_is_rejected(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    run = apply_run(stack, org, workspace)
    stack.lifecycle.writer.reserve(run, "token-1")
    stale = run
    walk(stack.lifecycle, run, S.QUEUED)
    before = stack.scan()

    with pytest.raises(TransitionRejected):
        stack.lifecycle.move(stale, S.CANCELED, actor="user:bob")

    assert stack.scan() == before


def test_a_queue_leaves_nothing_behind_and_a_retried_wait_keeps_its_place(
    stack: Stack, org: Organization, workspace: Workspace
) -> None:
    writer = DynamoWriterAuthority(stack.clock, stack.ids)
    # Given a holder and three runs queued behind it
    first, second, third, fourth = (apply_run(stack, org, workspace) for _ in range(4))
    writer.reserve(first, "token-1")
    for run, token in ((second, "token-2"), (third, "token-3"), (fourth, "token-4")):
        writer.reserve(run, token)

    # When the last one retries its wait with a new token
    again = writer.reserve(fourth, "token-4b")

    # Then it keeps its place (third in line) and its new token is the one handed back
    assert (again.held, again.position) == (False, 3)
    assert writer.waiter_token(fourth) == "token-4b"

    # When the middle one leaves the queue and the holder releases twice
    writer.release(workspace.id, third.id)
    assert writer.release(workspace.id, first.id).run_id == second.id  # type: ignore[union-attr]
    handoff = writer.release(workspace.id, second.id)

    # Then the workspace passed in order, and no queue item is left behind
    assert handoff is not None
    assert (handoff.run_id, handoff.token) == (fourth.id, "token-4b")
    assert holder_and_queue(workspace.id) == (fourth.id, [])
    assert writer.waiter_token(third) is None
    leftovers = [item for item in stack.scan() if item["SK"]["S"].startswith(("WAIT#", "QUEUED#"))]
    assert leftovers == []
