"""Runner authority: a sandbox's session is honoured only while its attempt is open, and
writes state only with the apply authority of its run's current attempt.

Sessions are real: each comes from redeeming the bootstrap handle the run's
workflow step launched the (fake) sandbox with. State is published through the
same service the Cloud API calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from datetime import timedelta

import pytest

from runplane.domain.capabilities import Binding, CapabilityKind, Phase, handle_hash
from runplane.domain.errors import (
    NotFound,
    RunnerAuthorityRefused,
    RunNotApplying,
    SessionRefused,
)
from runplane.domain.identity import Forbidden, Principal, Unauthenticated
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.runner_reports import Applied, Failed
from runplane.services.launch_controls import GLOBAL
from runplane.services.state import PendingUpload
from runplane.store import capabilities as capability_store
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.models import (
    RunnerSessionItem,
    StateVersionItem,
    WorkspaceItem,
    session_key,
    state_version_key,
    workspace_key,
)
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import (
    Arena,
    applying,
    awaiting_approval,
    log_artifact,
    planning,
    report_planned,
    to_applying,
    to_approval,
)
from tests.integration.dynamodb_requests import DynamoDBRequests
from tests.integration.state_publishing import LINEAGE, publish, raw_state

S = RunStatus


def with_state(arena: Arena, name: str) -> tuple[str, str]:
    """A workspace whose current state (serial 1) a person published; its ID and the version's."""
    ws = arena.stack.tenancy.create_workspace(arena.org.id, name)
    admin = arena.admin
    arena.stack.workspaces.lock(admin, ws.id, None)
    version = publish(arena.stack, admin, ws, 1)
    arena.stack.workspaces.unlock(admin, ws.id)
    return ws.id, version.id  # type: ignore[attr-defined]


def try_publish(arena: Arena, who: Principal, ws_id: str, serial: int) -> object:
    return publish(
        arena.stack, who, workspace_store.get_workspace(ws_id, reads=IdentityMap()), serial
    )


def open_upload(arena: Arena, who: Principal, ws_id: str, raw: bytes) -> PendingUpload:
    """A state version declared for ``raw`` whose bytes are still to be uploaded."""
    pending = arena.stack.state.create(
        who,
        ws_id,
        serial=1,
        md5=hashlib.md5(raw, usedforsecurity=False).hexdigest(),
        lineage=LINEAGE,
        state_b64=None,
    )
    assert isinstance(pending, PendingUpload)
    return pending


# -- plan sessions ------------------------------------------------------------------------


def test_a_plan_session_reads_its_pinned_state_but_never_locks_or_writes(arena: Arena) -> None:
    # Given a run planning against a workspace's current state, and its plan sandbox's session
    ws_id, pinned = with_state(arena, "plan-reads")
    _, run_id = planning(arena, "plan-reads", workspace_id=ws_id)
    plan = arena.runner(run_id, "plan")
    state = arena.stack.state

    # Then it reads the pinned predecessor, as its plan needs
    assert state.current(plan, ws_id).id == pinned
    assert state.download(plan, pinned) == raw_state(1)
    before = arena.stack.scan()

    # When it tries to take the lock or publish state
    with pytest.raises(RunnerAuthorityRefused) as refused:
        try_publish(arena, plan, ws_id, 2)
    with pytest.raises(RunnerAuthorityRefused):
        arena.stack.workspaces.lock(plan, ws_id, "Locked by Terraform")

    # Then it is refused (403) and nothing is written
    assert refused.value.http_status == 403
    assert "plan session" in refused.value.message
    assert arena.stack.scan() == before


def test_a_plan_session_is_dead_once_its_plan_is_reported(arena: Arena) -> None:
    # Given a plan sandbox's session, and its run that went on to apply and lost its runner
    ws_id, pinned = with_state(arena, "plan-late")
    _, run_id = planning(arena, "plan-late", workspace_id=ws_id)
    token = arena.runner_token(run_id, "plan")
    stale = arena.stack.identity.authenticate(f"Bearer {token}")
    report_planned(arena, run_id)
    to_approval(arena, run_id)
    to_applying(arena, run_id)
    arena.orchestration.fail(run_id, "apply", "States.Timeout")
    assert arena.runs.get(arena.admin, run_id).status is S.NEEDS_RECOVERY
    before = arena.stack.scan()

    # When the plan sandbox calls again, later
    arena.stack.clock.advance(timedelta(minutes=40))

    # Then its session is refused outright (401) and is recorded revoked
    with pytest.raises(Unauthenticated) as refused:
        arena.stack.identity.authenticate(f"Bearer {token}")
    assert refused.value.http_status == 401
    session = capability_store.get_session(handle_hash(token))
    assert session is not None
    assert session.revoked
    # And even a principal authenticated earlier cannot publish to the held workspace
    with pytest.raises(RunnerAuthorityRefused):
        try_publish(arena, stale, ws_id, 2)
    assert arena.stack.scan() == before
    assert (
        workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id == pinned
    )


# -- closed apply attempts ---------------------------------------------------------------------


def _report_failed(arena: Arena, run_id: str) -> None:
    attempt = run_parts.require(run_id, "attempt#apply").body["attempt_id"]
    arena.orchestration.report_apply(run_id, attempt, Failed(reason="boom"))


def _cancel(arena: Arena, run_id: str) -> None:
    arena.runs.cancel(arena.admin, run_id, arena.launcher)


def _lose(arena: Arena, run_id: str) -> None:
    arena.orchestration.fail(run_id, "apply", "States.HeartbeatTimeout")


CLOSERS: dict[str, Callable[[Arena, str], None]] = {
    "result_reported": _report_failed,
    "canceled": _cancel,
    "runner_lost": _lose,
}


@pytest.mark.parametrize("closer", list(CLOSERS))
def test_a_closed_apply_attempt_s_session_is_refused_everywhere(arena: Arena, closer: str) -> None:
    # Given an applying run and its apply sandbox's session
    ws_id, run_id = applying(arena, f"closed-{closer.replace('_', '-')}")
    token = arena.runner_token(run_id, "apply")
    stale = arena.stack.identity.authenticate(f"Bearer {token}")
    attempt = run_parts.require(run_id, "attempt#apply").body

    # When the attempt is closed (its result, a cancellation, or its loss)
    CLOSERS[closer](arena, run_id)
    before = arena.stack.scan()

    # Then the session is revoked in the closing write, and every call is refused
    session = capability_store.get_session(handle_hash(token))
    assert session is not None
    assert session.revoked
    with pytest.raises(Unauthenticated):
        arena.stack.identity.authenticate(f"Bearer {token}")
    with pytest.raises(SessionRefused) as replay:
        arena.runner_token(run_id, "apply")
    assert replay.value.http_status == 401
    # And the principal it held before cannot lock or publish either
    with pytest.raises(RunnerAuthorityRefused, match="has ended"):
        try_publish(arena, stale, ws_id, 1)
    with pytest.raises(RunnerAuthorityRefused):
        arena.stack.workspaces.unlock(stale, ws_id)
    # And nothing was written by any of the refusals
    assert arena.stack.scan() == before
    assert attempt["attempt_id"] == session.binding.attempt_id


def test_revoking_an_attempt_s_sessions_is_idempotent(arena: Arena) -> None:
    # Given an applying run whose apply session was revoked already
    _, run_id = applying(arena, "revoke-twice")
    token = arena.runner_token(run_id, "apply")
    attempt_id = run_parts.require(run_id, "attempt#apply").body["attempt_id"]
    assert arena.stack.sessions.revoke_attempt(attempt_id) == 1
    first = RunnerSessionItem.get(*session_key(handle_hash(token))).revoked_at

    # When the attempt is closed later (which revokes its sessions again)
    arena.stack.clock.advance(timedelta(minutes=1))
    _cancel(arena, run_id)

    # Then the close committed, and the session keeps its first revocation instant
    assert arena.runs.get(arena.admin, run_id).status is S.APPLY_INTERRUPTED
    assert first is not None
    assert RunnerSessionItem.get(*session_key(handle_hash(token))).revoked_at == first
    assert arena.stack.sessions.revoke_attempt(attempt_id) == 0


# -- apply authority ------------------------------------------------------------------------------


def test_the_current_apply_publishes_with_full_provenance(arena: Arena) -> None:
    # Given an applying run with a predecessor state, and its apply sandbox's session
    ws_id, pinned = with_state(arena, "provenance")
    _, run_id = applying(arena, "provenance", workspace_id=ws_id)
    runner = arena.runner(run_id, "apply")
    attempt = run_parts.require(run_id, "attempt#apply").body

    # When it publishes the successor
    version = try_publish(arena, runner, ws_id, 2)

    # Then the version carries the exact run, attempt, sandbox, predecessor and fence
    assert version.provenance == {  # type: ignore[attr-defined]
        "run_id": run_id,
        "attempt_id": attempt["attempt_id"],
        "sandbox_id": attempt["sandbox_id"],
        "session_id": runner.id,
        "predecessor_id": pinned,
        "fence": attempt["fence"],
    }
    assert version.lock_id == attempt["lock_id"]  # type: ignore[attr-defined]
    current = workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id
    assert current == version.id  # type: ignore[attr-defined]


def test_the_state_check_and_the_apply_result_confirm_the_attempt_s_own_publication(
    arena: Arena,
) -> None:
    # Given an applying run whose apply sandbox published the successor state
    ws_id, _ = with_state(arena, "confirmed")
    _, run_id = applying(arena, "confirmed", workspace_id=ws_id)
    runner = arena.runner(run_id, "apply")
    version = try_publish(arena, runner, ws_id, 2)
    attempt = run_parts.require(run_id, "attempt#apply").body["attempt_id"]

    # When the runner checks the state and reports that it applied
    check = arena.runner_api.state_check(runner)
    status = arena.orchestration.report_apply(
        run_id, attempt, Applied(log_artifact_id=log_artifact(arena, run_id))
    )

    # Then both recognise the version as this attempt's, and the run succeeds
    assert check["state_version_id"] == version.id  # type: ignore[attr-defined]
    assert check["matches"] is True
    assert status == S.SUCCEEDED


@pytest.mark.parametrize("facts", ["carried", "absent"])
def test_a_version_stamped_under_another_fence_is_not_the_attempt_s_for_either_check(
    arena: Arena, facts: str
) -> None:
    # Given an applying run whose current state carries its attempt and sandbox, but
    # another fence than the attempt was granted: so stamped on the version and on the
    # workspace's facts of it, or on a workspace that carries none
    ws_id, _ = with_state(arena, f"other-fence-{facts}")
    _, run_id = applying(arena, f"other-fence-{facts}", workspace_id=ws_id)
    runner = arena.runner(run_id, "apply")
    version = try_publish(arena, runner, ws_id, 2)
    item = StateVersionItem.get(*state_version_key(version.id))  # type: ignore[attr-defined]
    stamped = dict(item.provenance)
    stamped["fence"] = int(stamped["fence"]) + 1
    item.update(actions=[StateVersionItem.provenance.set(stamped)])
    workspace = WorkspaceItem.get(*workspace_key(ws_id))
    carried = {**workspace.current_publication, "fence": stamped["fence"]}
    workspace.update(
        actions=[
            WorkspaceItem.current_publication.set(carried)
            if facts == "carried"
            else WorkspaceItem.current_publication.remove()
        ]
    )
    attempt = run_parts.require(run_id, "attempt#apply").body["attempt_id"]

    # When the runner checks the state and reports that it applied
    check = arena.runner_api.state_check(runner)
    status = arena.orchestration.report_apply(
        run_id, attempt, Applied(log_artifact_id=log_artifact(arena, run_id))
    )

    # Then neither takes the version for this attempt's: no match, and no success
    assert check["matches"] is False
    assert status == S.NEEDS_RECOVERY


@pytest.mark.parametrize("field", ["attempt_id", "sandbox_id"])
def test_a_session_of_another_apply_attempt_or_sandbox_is_refused(arena: Arena, field: str) -> None:
    # Given an applying run, and a session of another apply attempt (or sandbox) of it
    ws_id, run_id = applying(arena, f"other-{field.replace('_', '-')}")
    current = arena.runner(run_id, "apply")
    if field == "attempt_id":
        other = dataclasses.replace(current, attempt_id=arena.stack.ids.new(IdKind.ATTEMPT))
    else:
        other = dataclasses.replace(current, sandbox_id=arena.stack.ids.new(IdKind.SANDBOX))
    earlier = Binding(run_id, other.attempt_id or "", Phase.APPLY, other.sandbox_id or "")
    minted = arena.stack.capabilities.mint(
        CapabilityKind.BOOTSTRAP,
        earlier,
        lifetime=timedelta(minutes=5),
        organization_id=arena.org.id,
    )
    grant = arena.stack.sessions.start(minted.handle, earlier)
    before = arena.stack.scan()

    # Then its session does not authenticate (its attempt is not the run's open one)
    with pytest.raises(Unauthenticated):
        arena.stack.identity.authenticate(f"Bearer {grant.token}")
    # And a principal naming it is refused by the state service itself, writing nothing
    with pytest.raises(RunnerAuthorityRefused) as refused:
        try_publish(arena, other, ws_id, 1)
    assert refused.value.http_status == 403
    assert arena.stack.scan() == before


def test_an_apply_session_cannot_publish_before_its_start_is_proven(arena: Arena) -> None:
    # Given an approved run whose apply sandbox launched but has not redeemed its start
    ws_id, run_id = awaiting_approval(arena, "not-started")
    arena.runs.decide(arena.admin, run_id, "approve", None)
    arena.orchestration.start_runner(run_id, "apply", "token-apply")
    runner = arena.runner(run_id, "apply")
    before = arena.stack.scan()

    # When it publishes state
    with pytest.raises(RunNotApplying) as refused:
        try_publish(arena, runner, ws_id, 1)

    # Then it is refused (409): the run is not applying; nothing is written
    assert refused.value.http_status == 409
    assert arena.stack.scan() == before


def test_an_upload_opened_during_apply_is_refused_once_the_attempt_closes(arena: Arena) -> None:
    # Given an apply session that opened upload URLs for a state version
    ws_id, run_id = applying(arena, "upload-late")
    raw = raw_state(1)
    pending = open_upload(arena, arena.runner(run_id, "apply"), ws_id, raw)

    # When the run is canceled before the bytes arrive
    _cancel(arena, run_id)

    # Then the upload is refused and the workspace's state does not move
    with pytest.raises(RunnerAuthorityRefused):
        arena.stack.state.upload(pending.state_token, raw)
    assert (
        workspace_store.get_workspace(ws_id, reads=IdentityMap()).current_state_version_id is None
    )


# -- what a runner session can read -------------------------------------------------------------


def test_a_runner_session_reads_only_what_its_run_needs(arena: Arena) -> None:
    # Given a planning run pinned to its workspace's state, and another workspace's state
    ws_id, pinned = with_state(arena, "reads")
    other_ws, other_version = with_state(arena, "reads-other")
    _, run_id = planning(arena, "reads", workspace_id=ws_id)
    runner = arena.runner(run_id, "plan")
    stack = arena.stack

    # Then organization-level reads are refused (403)
    for org_read in (
        lambda: arena.policies.list(runner),
        lambda: arena.policies.get(runner, "any"),
        lambda: stack.workspaces.read_organization(runner, "acme"),
        lambda: arena.orchestration._launch_controls.get(runner, "organization"),
        lambda: arena.runs.review(runner, run_id),
        lambda: stack.identity.create_token(runner, "mine", "reader"),
    ):
        with pytest.raises(Forbidden):
            org_read()
    # And another workspace's state does not exist for it (404)
    with pytest.raises(NotFound):
        stack.state.current(runner, other_ws)
    with pytest.raises(NotFound):
        stack.state.download(runner, other_version)
    # And its own workspace's history is exactly the pinned predecessor
    assert [v.id for v in stack.state.history(runner, ws_id)] == [pinned]
    # And the platform's controls are refused too
    with pytest.raises(Forbidden):
        arena.orchestration._launch_controls.get(runner, GLOBAL)


def test_a_runner_does_not_see_state_published_after_its_run_pinned(arena: Arena) -> None:
    # Given a plan-only run pinned to serial 1, and a person publishing serial 2 meanwhile
    ws_id, pinned = with_state(arena, "moved-on")
    _, run_id = planning(arena, "moved-on", workspace_id=ws_id, kind=RunKind.PLAN_ONLY)
    runner = arena.runner(run_id, "plan")
    admin = arena.admin
    arena.stack.workspaces.lock(admin, ws_id, None)
    later = try_publish(arena, admin, ws_id, 2)
    arena.stack.workspaces.unlock(admin, ws_id)

    # Then the plan still reads the state its run pinned, and not the later one
    assert arena.stack.state.current(runner, ws_id).id == pinned
    with pytest.raises(NotFound):
        arena.stack.state.get(runner, later.id)  # type: ignore[attr-defined]


def test_a_runner_reads_its_run_s_pin_once_per_attempt(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a planning run's runner that has read its workspace's current state once
    ws_id, pinned = with_state(arena, "pin-once")
    _, run_id = planning(arena, "pin-once", workspace_id=ws_id, kind=RunKind.PLAN_ONLY)
    runner = arena.runner(run_id, "plan")
    assert arena.stack.state.current(runner, ws_id).id == pinned
    requests = DynamoDBRequests(monkeypatch)

    # When the engine's backend asks again
    again = arena.stack.state.current(runner, ws_id)

    # Then it gets the same pinned version, reading the version only (the workspace
    # item says nothing a runner sees: it is not read)
    assert again.id == pinned
    assert requests.operations == ["GetItem"]


def test_closing_an_attempt_revokes_the_sessions_it_noted(arena: Arena) -> None:
    # Given an applying run whose sandbox started its session
    _, run_id = applying(arena, "noted-session")
    token = arena.runner_token(run_id, "apply")
    attempt = run_parts.require(run_id, "attempt#apply")
    assert attempt.session_keys == {handle_hash(token)}

    # When the attempt closes (its run is canceled)
    _cancel(arena, run_id)

    # Then the session the attempt noted is revoked
    assert RunnerSessionItem.get(*session_key(handle_hash(token))).revoked_at is not None


def test_a_session_for_an_attempt_that_closed_is_refused_and_writes_nothing(
    arena: Arena,
) -> None:
    # Given a planning run's sandbox holding its bootstrap handle, and its attempt closed
    # after the handle was read but before it was redeemed (the run was canceled)
    _, run_id = planning(arena, "late-session")
    attempt = run_parts.require(run_id, "attempt#plan").body
    request = arena.launcher.requests[attempt["sandbox_id"]]
    record = capability_store.get_capability(handle_hash(request.bootstrap))
    binding = Binding(run_id, attempt["attempt_id"], Phase.PLAN, attempt["sandbox_id"])
    _cancel(arena, run_id)
    before = arena.stack.scan()

    # When the session is started from that handle
    with pytest.raises(SessionRefused, match="attempt has ended"):
        arena.stack.sessions.start(request.bootstrap, binding, record)

    # Then nothing was written: the handle is not redeemed and no session exists
    assert arena.stack.scan() == before


def test_an_attempt_closed_a_day_after_it_began_closes_without_revoking(
    arena: Arena,
) -> None:
    # Given an applying run whose sandbox started its session, a day ago
    _, run_id = applying(arena, "day-old-session")
    token = arena.runner_token(run_id, "apply")
    arena.stack.clock.advance(timedelta(days=1))

    # When the attempt closes (its session may have expired out of the table by now)
    _cancel(arena, run_id)

    # Then the close committed without touching the session, refused all the same
    assert arena.runs.get(arena.admin, run_id).status is S.APPLY_INTERRUPTED
    assert RunnerSessionItem.get(*session_key(handle_hash(token))).revoked_at is None
    with pytest.raises(SessionRefused):
        arena.stack.sessions.authenticate_open(token)
