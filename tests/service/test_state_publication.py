"""Publishing state over the in-memory store: a user publishes only under her own lock, a
runner only with its run's apply authority (an apply session of the run's current, open
attempt, under that attempt's lock and fence, while the run applies), never past a run
holding the workspace; succession (lineage, serial, retries); single-use upload URLs; and
tenancy. A refused write writes nothing: no version, pointer move, token use, audit event
or artifact. The store's conditions themselves are held to the same cases on moto by
tests/integration/test_state_publication_contract.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from runplane.domain.errors import (
    NotFound,
    RunnerAuthorityRefused,
    RunNotApplying,
    StaleFence,
    StateConflict,
    StateRejected,
    UploadUrlExpired,
    UploadUrlUsed,
    WorkspaceHeldByRun,
    WorkspaceLocked,
    WorkspaceNotLocked,
)
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.run import RunStatus
from runplane.domain.state import FINALIZED, PENDING, StateVersion
from tests.service.conftest import Tier
from tests.service.state_scenarios import (
    LINEAGE,
    StateWorld,
    applying,
    build,
    end_attempt,
    holding_run,
    move_run,
    open_upload,
    publish,
    raw_state,
    retake_run_lock,
    runner,
)

JSON_STATE = b'{"format_version": "1.0"}'


@pytest.fixture
def world(tier: Tier) -> StateWorld:
    return build(tier)


def _published(
    world: StateWorld, who: Principal, serial: int, lineage: str = LINEAGE, force: bool = False
) -> StateVersion:
    version = publish(world, who, serial, lineage=lineage, force=force)
    assert isinstance(version, StateVersion)
    return version


# -- a user ------------------------------------------------------------------------------


def test_a_user_publishes_under_her_lock_and_the_pointer_moves(world: StateWorld) -> None:
    # Given ada's lock
    world.tier.workspaces.lock(world.admin, world.workspace.id, "manual fix")
    # When she publishes serial 1, then 2
    first = _published(world, world.admin, 1)
    second = _published(world, world.admin, 2)
    # Then the second is current, naming the first, both finalized with their content
    current = world.current()
    assert (current.current_state_version_id, current.current_serial) == (second.id, 2)
    assert current.current_lineage == LINEAGE
    assert (second.status, second.predecessor_id, second.lock_id) == (
        FINALIZED,
        first.id,
        current.lock_id,
    )
    assert world.state.download(world.admin, second.id) == raw_state(2)
    # And each publication is in the audit trail
    assert [(e.type, e.details["state_version"]) for e in world.publication.events] == [
        ("state.published", first.id),
        ("state.published", second.id),
    ]


def test_publishing_without_the_lock_or_under_another_s_is_refused(world: StateWorld) -> None:
    # Given an unlocked workspace
    before = world.written()
    # When ada publishes, it is refused: she holds no lock
    with pytest.raises(WorkspaceNotLocked):
        publish(world, world.admin, 1)
    assert world.written() == before
    # Given bob's lock
    bob = Principal(
        PrincipalKind.USER, "bob", world.org.id, frozenset(Permission), "bob", auth_time=None
    )
    world.tier.workspaces.lock(bob, world.workspace.id, None)
    before = world.written()
    # When ada publishes, it is refused naming him, and nothing is written
    with pytest.raises(WorkspaceLocked) as refused:
        publish(world, world.admin, 1)
    assert "locked by bob" in refused.value.message
    assert world.written() == before


def test_state_write_is_needed_to_publish(world: StateWorld) -> None:
    reader = Principal(
        PrincipalKind.USER,
        "dev",
        world.org.id,
        frozenset({Permission.WORKSPACE_READ, Permission.STATE_READ}),
        "dev",
    )
    before = world.written()
    with pytest.raises(Forbidden):
        publish(world, reader, 1)
    assert world.written() == before


def test_a_user_lock_taken_before_a_run_queued_cannot_publish_past_it(world: StateWorld) -> None:
    # Given ada's lock and her first version, then a run taking the writer reservation
    world.tier.workspaces.lock(world.admin, world.workspace.id, "manual fix")
    _published(world, world.admin, 1)
    run = holding_run(world, RunStatus.PLANNING)
    before = world.written()
    # When she publishes again
    with pytest.raises(WorkspaceHeldByRun) as held:
        publish(world, world.admin, 2)
    # Then the run is named and nothing is written
    assert held.value.run_id == run.id
    assert world.current().current_serial == 1
    assert world.written() == before


def test_succession_a_retry_is_the_current_version_and_state_never_goes_back(
    world: StateWorld,
) -> None:
    # Given serial 2 published under ada's lock
    world.tier.workspaces.lock(world.admin, world.workspace.id, None)
    current = _published(world, world.admin, 2)
    before = world.written()
    # When the same serial and content is sent again, it is the current version
    assert publish(world, world.admin, 2) == current
    assert world.written() == before
    # And an older serial, or another lineage, is refused writing nothing
    with pytest.raises(StateConflict, match="never goes backwards"):
        publish(world, world.admin, 1)
    with pytest.raises(StateConflict, match="lineage mismatch"):
        publish(world, world.admin, 3, lineage="another-lineage")
    assert world.written() == before
    # And a forced new lineage is published, recorded as forced
    forced = _published(world, world.admin, 3, lineage="another-lineage", force=True)
    assert forced.forced
    assert world.publication.events[-1].details["forced"] == "true"


def test_another_organizations_workspace_is_not_found_for_publishing(world: StateWorld) -> None:
    # Given another organization's workspace, locked by its admin
    other = world.tier.tenancy.create_organization("someone-else")
    theirs = world.tier.workspaces.create(world.tier.admin(other), "someone-else", "theirs")
    world.tier.workspaces.lock(world.tier.admin(other), theirs.id, None)
    before = world.written()
    # When our admin publishes to it, it is not found, and nothing is written
    with pytest.raises(NotFound):
        publish(world, world.admin, 1, workspace_id=theirs.id)
    assert world.written() == before


# -- a runner ----------------------------------------------------------------------------


def test_the_current_apply_publishes_under_its_lock_and_fence(world: StateWorld) -> None:
    # Given a run applying under its apply lock, and its apply session
    run, session = applying(world)
    fence = world.current().fence
    # When the session publishes
    version = _published(world, session, 1)
    # Then the version is current, with the run's provenance
    assert world.current().current_state_version_id == version.id
    assert version.lock_id == "lock-run"
    assert version.provenance == {
        "run_id": run.id,
        "attempt_id": "att-apply",
        "sandbox_id": "sbx-apply",
        "session_id": "ses-apply",
        "predecessor_id": None,
        "fence": fence,
    }
    # And its engine's lock and unlock calls only confirm the authority
    assert world.tier.workspaces.lock(session, world.workspace.id, "Locked by OpenTofu").locked
    assert world.tier.workspaces.unlock(session, world.workspace.id).lock_id == "lock-run"


def test_a_plan_session_never_locks_or_writes(world: StateWorld) -> None:
    # Given a run planning, and its plan session
    holding_run(world, RunStatus.PLANNING)
    plan = runner(world, phase="plan")
    before = world.written()
    # When it publishes, opens an upload, locks or unlocks
    for attempt in (
        lambda: publish(world, plan, 1),
        lambda: world.state.create(
            plan, world.workspace.id, serial=1, md5="0" * 32, lineage=LINEAGE, state_b64=None
        ),
        lambda: world.tier.workspaces.lock(plan, world.workspace.id, "Locked by OpenTofu"),
        lambda: world.tier.workspaces.unlock(plan, world.workspace.id),
    ):
        with pytest.raises(RunnerAuthorityRefused) as refused:
            attempt()
        # Then each is refused (403) and nothing is written
        assert refused.value.http_status == 403
        assert "plan session" in refused.value.message
    assert world.written() == before


@pytest.mark.parametrize("field", ["attempt_id", "sandbox_id"])
def test_a_session_of_another_attempt_or_sandbox_is_refused(world: StateWorld, field: str) -> None:
    # Given an applying run, and a session naming another attempt or sandbox of it
    _, session = applying(world)
    if field == "attempt_id":
        other = replace(session, attempt_id="att-other")
    else:
        other = replace(session, sandbox_id="sbx-other")
    before = world.written()
    # Then it may neither publish nor lock
    with pytest.raises(RunnerAuthorityRefused):
        publish(world, other, 1)
    with pytest.raises(RunnerAuthorityRefused):
        world.tier.workspaces.lock(other, world.workspace.id, None)
    assert world.written() == before


def test_an_ended_attempt_s_session_is_refused(world: StateWorld) -> None:
    # Given an applying run whose apply attempt has ended
    run, session = applying(world)
    end_attempt(world, run)
    before = world.written()
    # When its session publishes
    with pytest.raises(RunnerAuthorityRefused) as refused:
        publish(world, session, 1)
    # Then it is refused saying so, and nothing is written
    assert "has ended (failed)" in refused.value.message
    assert world.written() == before


def test_a_run_no_longer_applying_cannot_publish(world: StateWorld) -> None:
    run, session = applying(world)
    move_run(world, run, RunStatus.NEEDS_RECOVERY)
    before = world.written()
    with pytest.raises(RunNotApplying) as refused:
        publish(world, session, 1)
    assert refused.value.http_status == 409
    assert world.written() == before


def test_an_apply_session_under_a_stale_fence_is_refused_writing_nothing(
    world: StateWorld,
) -> None:
    # Given an applying run's session, and its lock released and taken again (fence + 1)
    run, session = applying(world)
    stale = retake_run_lock(world, run)
    before = world.written()
    # When the session publishes
    with pytest.raises(StaleFence) as refused:
        publish(world, session, 1)
    # Then it is refused (409) naming the stale fence, and nothing is written
    assert refused.value.http_status == 409
    assert refused.value.fence == stale
    assert world.written() == before


def test_an_attempt_that_ends_after_the_check_refuses_the_write_and_its_artifact(
    world: StateWorld,
) -> None:
    # Given an apply session whose attempt ends while its state is being stored (after
    # its authority was checked, before the write commits)
    run, session = applying(world)
    before = world.stored()
    world.tier.clock.on_next_reading(lambda: end_attempt(world, run))
    # When it publishes
    with pytest.raises(RunnerAuthorityRefused, match="its apply attempt has ended"):
        publish(world, session, 1)
    # Then nothing of it is kept: no version, no pointer move, no artifact
    assert world.stored() == before


# -- upload URLs -------------------------------------------------------------------------


def test_an_upload_url_publishes_once(world: StateWorld) -> None:
    # Given ada's lock and a version declared without its bytes
    world.tier.workspaces.lock(world.admin, world.workspace.id, None)
    pending = open_upload(world, world.admin, 1)
    assert pending.version.status == PENDING
    assert world.current().current_state_version_id is None
    # When its JSON state and its bytes arrive at their URLs
    world.state.upload(pending.json_token, JSON_STATE)
    version = world.state.upload(pending.state_token, raw_state(1))
    # Then it is finalized and current, its JSON state attached
    assert (version.status, version.id) == (FINALIZED, pending.version.id)
    assert version.json_artifact_id is not None
    assert world.current().current_state_version_id == version.id
    assert world.state.download_json(world.admin, version.id) == JSON_STATE
    # And neither URL is good for a second upload, which writes nothing
    before = world.written()
    with pytest.raises(UploadUrlUsed):
        world.state.upload(pending.state_token, raw_state(1))
    with pytest.raises(UploadUrlUsed):
        world.state.upload(pending.json_token, JSON_STATE)
    assert world.written() == before


def test_an_unknown_or_expired_upload_url_is_refused(world: StateWorld) -> None:
    world.tier.workspaces.lock(world.admin, world.workspace.id, None)
    pending = open_upload(world, world.admin, 1)
    with pytest.raises(NotFound):
        world.state.upload("rpu_unknown", raw_state(1))
    with pytest.raises(NotFound):
        world.state.upload("not-an-upload-token", raw_state(1))
    world.tier.clock.advance(timedelta(minutes=5))
    before = world.written()
    with pytest.raises(UploadUrlExpired):
        world.state.upload(pending.state_token, raw_state(1))
    assert world.written() == before


def test_an_upload_opened_during_apply_is_refused_once_the_attempt_closes(
    world: StateWorld,
) -> None:
    # Given an apply session that opened upload URLs
    run, session = applying(world)
    pending = open_upload(world, session, 1)
    # When its attempt closes before the bytes arrive
    end_attempt(world, run)
    before = world.written()
    # Then the upload is refused, and the state does not move
    with pytest.raises(RunnerAuthorityRefused):
        world.state.upload(pending.state_token, raw_state(1))
    assert world.written() == before
    assert world.current().current_state_version_id is None


def test_an_upload_opened_under_a_stale_fence_never_publishes(world: StateWorld) -> None:
    # Given an apply session that opened upload URLs, then its lock retaken (fence + 1)
    run, session = applying(world)
    pending = open_upload(world, session, 1)
    retake_run_lock(world, run)
    before = world.written()
    # Then the upload is refused and the state does not move
    with pytest.raises(WorkspaceLocked, match="no longer locked by this writer"):
        world.state.upload(pending.state_token, raw_state(1))
    assert world.written() == before


def test_bytes_that_do_not_match_their_declaration_are_refused(world: StateWorld) -> None:
    world.tier.workspaces.lock(world.admin, world.workspace.id, None)
    pending = open_upload(world, world.admin, 1)
    before = world.written()
    with pytest.raises(StateRejected, match="MD5"):
        world.state.upload(pending.state_token, raw_state(2))
    assert world.written() == before
    # And the URL is still good for the declared bytes
    assert world.state.upload(pending.state_token, raw_state(1)).status == FINALIZED
