"""The workspace lock over the in-memory store: a user's lock, unlock and force-unlock, a
run holding the workspace always winning (and saying what to do), a runner's lock calls
only confirming its apply authority, and tenancy. A refused call writes nothing. The
store's conditions themselves are held to the same cases on moto by
tests/integration/test_state_publication_contract.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runplane.domain.entities import Workspace
from runplane.domain.errors import (
    NotFound,
    RunnerAuthorityRefused,
    StaleFence,
    WorkspaceAlreadyLocked,
    WorkspaceHeldByRun,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.run import RunStatus
from tests.service.conftest import Tier
from tests.service.state_scenarios import (
    StateWorld,
    applying,
    build,
    holding_run,
    move_run,
    retake_run_lock,
    runner,
)


@pytest.fixture
def world(tier: Tier) -> StateWorld:
    return build(tier)


def _user(world: StateWorld, name: str, *permissions: Permission) -> Principal:
    return Principal(
        PrincipalKind.USER,
        name,
        world.org.id,
        frozenset(permissions or Permission),
        name,
    )


def test_a_user_locks_and_unlocks_and_the_fence_grows(world: StateWorld) -> None:
    # When ada locks the workspace
    locked = world.tier.workspaces.lock(world.admin, world.workspace.id, "manual fix")
    # Then it is hers, with the next fence and her reason
    assert (locked.lock_holder, locked.lock_holder_display, locked.lock_reason) == (
        "user:ada",
        "ada",
        "manual fix",
    )
    assert (locked.fence, locked.lock_run_id) == (1, None)
    # When she unlocks it
    unlocked = world.tier.workspaces.unlock(world.admin, world.workspace.id)
    # Then it is unlocked, its fence kept, and the next lock takes the next fence
    assert (unlocked.locked, unlocked.fence) == (False, 1)
    assert world.tier.workspaces.lock(world.admin, world.workspace.id, None).fence == 2


def test_a_second_lock_by_the_same_holder_is_refused_and_writes_nothing(
    world: StateWorld,
) -> None:
    # Given a workspace locked by ada
    world.tier.workspaces.lock(world.admin, world.workspace.id, "first process")
    before = world.written()
    # When the same credentials lock it again (a second process sharing the token)
    with pytest.raises(WorkspaceAlreadyLocked) as refused:
        world.tier.workspaces.lock(world.admin, world.workspace.id, "second process")
    # Then it is refused naming the holder and what to do, and nothing was written
    assert "already locked by" in refused.value.message
    assert "force-unlock" in refused.value.message
    assert world.written() == before
    # And the holder still unlocks it
    assert world.tier.workspaces.unlock(world.admin, world.workspace.id).locked is False


def test_only_the_holder_unlocks_and_force_unlock_needs_its_permission(
    world: StateWorld,
) -> None:
    # Given ada's lock, and bob who may lock but not force-unlock
    world.tier.workspaces.lock(world.admin, world.workspace.id, None)
    bob = _user(world, "bob", Permission.WORKSPACE_READ, Permission.WORKSPACE_LOCK)
    before = world.written()
    # When bob unlocks or force-unlocks it, each is refused and nothing is written
    with pytest.raises(WorkspaceLocked, match="locked by ada"):
        world.tier.workspaces.unlock(bob, world.workspace.id)
    with pytest.raises(Forbidden):
        world.tier.workspaces.force_unlock(bob, world.workspace.id)
    assert world.written() == before
    # When an operator who may force-unlocks it
    operator = _user(world, "ops", Permission.WORKSPACE_READ, Permission.WORKSPACE_FORCE_UNLOCK)
    # Then it is unlocked
    assert world.tier.workspaces.force_unlock(operator, world.workspace.id).locked is False


def test_locking_needs_its_permission_and_unlocking_an_unlocked_workspace_is_refused(
    world: StateWorld,
) -> None:
    reader = _user(world, "dev", Permission.WORKSPACE_READ)
    before = world.written()
    with pytest.raises(Forbidden):
        world.tier.workspaces.lock(reader, world.workspace.id, None)
    with pytest.raises(WorkspaceNotLocked):
        world.tier.workspaces.unlock(world.admin, world.workspace.id)
    with pytest.raises(WorkspaceNotLocked):
        world.tier.workspaces.force_unlock(world.admin, world.workspace.id)
    assert world.written() == before


def test_a_run_holding_writer_authority_refuses_native_locks_with_what_to_do(
    world: StateWorld,
) -> None:
    # Given a run holding the workspace's writer reservation
    run = holding_run(world, RunStatus.PLANNING)
    before = world.written()
    # When ada locks the workspace
    with pytest.raises(WorkspaceHeldByRun) as held:
        world.tier.workspaces.lock(world.admin, world.workspace.id, "terraform apply")
    # Then she is told which run holds it and to wait, and nothing is written
    assert run.id in held.value.message
    assert "wait for that run to finish" in held.value.message
    assert f"runplane run show {run.id}" in held.value.message
    assert world.written() == before


def test_a_run_kept_for_recovery_tells_the_operator_to_recover(world: StateWorld) -> None:
    # Given a run kept for recovery, still holding its apply lock
    run, _ = applying(world)
    move_run(world, run, RunStatus.NEEDS_RECOVERY)
    before = world.written()
    # When an operator locks or force-unlocks the workspace
    attempts: tuple[Callable[[], Workspace], ...] = (
        lambda: world.tier.workspaces.lock(world.admin, world.workspace.id, None),
        lambda: world.tier.workspaces.force_unlock(world.admin, world.workspace.id),
    )
    for attempt in attempts:
        with pytest.raises(WorkspaceHeldByRun) as held:
            attempt()
        # Then each says to complete the run's recovery
        assert f"held by run {run.id} (status needs_recovery)" in held.value.message
        assert "complete that run's recovery (runplane run recover)" in held.value.message
        assert held.value.message.endswith(f"runplane run show {run.id} shows that run")
        # A 423, not a 409: native clients print the sentence only for other statuses
        assert (held.value.http_status, held.value.code) == (423, "WORKSPACE_RECOVERY_PENDING")
    assert world.written() == before


def test_a_runner_s_lock_calls_confirm_its_apply_authority_only(world: StateWorld) -> None:
    # Given a run applying under its apply lock
    run, session = applying(world)
    before = world.written()
    # When its apply session locks and unlocks, as the engine does around a write
    locked = world.tier.workspaces.lock(session, world.workspace.id, "Locked by OpenTofu")
    unlocked = world.tier.workspaces.unlock(session, world.workspace.id)
    # Then both answer with the run's lock, which stays: nothing is written
    assert locked.lock_run_id == unlocked.lock_run_id == run.id
    assert world.written() == before
    # And once the lock was taken again (fence + 1), the session's calls are refused
    retake_run_lock(world, run)
    with pytest.raises(StaleFence):
        world.tier.workspaces.lock(session, world.workspace.id, None)
    # And a plan session's are refused outright
    plan = runner(world, run.id, phase="plan")
    with pytest.raises(RunnerAuthorityRefused):
        world.tier.workspaces.unlock(plan, world.workspace.id)


def test_another_organizations_workspace_is_not_found_for_locking(world: StateWorld) -> None:
    # Given another organization's workspace, locked by its admin
    other = world.tier.tenancy.create_organization("someone-else")
    theirs = world.tier.workspaces.create(world.tier.admin(other), "someone-else", "theirs")
    world.tier.workspaces.lock(world.tier.admin(other), theirs.id, None)
    before = world.written()
    # When our admin locks, unlocks or force-unlocks it, each is not found
    attempts: tuple[Callable[[], Workspace], ...] = (
        lambda: world.tier.workspaces.lock(world.admin, theirs.id, None),
        lambda: world.tier.workspaces.unlock(world.admin, theirs.id),
        lambda: world.tier.workspaces.force_unlock(world.admin, theirs.id),
    )
    for attempt in attempts:
        with pytest.raises(NotFound):
            attempt()
    # And nothing is written
    assert world.written() == before
