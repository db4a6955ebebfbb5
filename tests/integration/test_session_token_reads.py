"""A runner session's token names what its calls read, so a process that never saw the
session reads the session, its attempt and those items in one request."""

from __future__ import annotations

import pytest

from runplane.domain.read_ahead import Read
from runplane.domain.session_tokens import hints_of
from runplane.store import prefetch, run_parts
from runplane.store import state_versions as state_store
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST
from tests.integration.arena import Arena, planning
from tests.integration.dynamodb_requests import DynamoDBRequests
from tests.integration.test_runner_authority import with_state

FIRST_READS = "GET /api/v2/runner/first-reads"


def _state_artifact(version_id: str) -> str:
    artifact_id = state_store.get(version_id, reads=IdentityMap()).artifact_id
    assert artifact_id is not None
    return artifact_id


def test_a_plan_s_first_call_in_a_process_that_never_saw_its_session_is_one_request(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run planning on its workspace's current state, whose sandbox started its
    # session (its launch naming the pinned version, as the runner passes it on)
    ws_id, pinned = with_state(arena, "named-first-reads")
    _, run_id = planning(arena, "named-first-reads", workspace_id=ws_id)
    token = arena.runner_token(run_id, "plan")
    elsewhere = arena.stack.rewired()
    requests = DynamoDBRequests(monkeypatch)

    # When its engine's first reads are authenticated and answered by another process,
    # its read handed over as the authorizer's context carries it
    principal, read = elsewhere.identity.authenticate_request(f"Bearer {token}", FIRST_READS)
    carried = prefetch.decode(prefetch.encode(read))
    with REQUEST.opened(carried):
        start = elsewhere.workspaces.engine_start(principal)

    # Then the session, its attempt, its run, its workspace, the pinned version and that
    # version's artifact record were one request, and the first reads asked for nothing
    # more but the organization's name (which a process reads once, then remembers)
    assert (principal.run_id, principal.workspace_id, start.workspace.id) == (
        run_id,
        ws_id,
        ws_id,
    )
    assert requests.operations == ["BatchGetItem", "GetItem"]
    assert {
        Read.run(run_id),
        Read.workspace(ws_id),
        Read.state_version(pinned),
        Read.artifact(_state_artifact(pinned)),
    } <= set(read.found)


def test_a_start_naming_another_state_version_names_only_the_run_s_pin(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run planning on its workspace's state, and another workspace's version
    ws_id, pinned = with_state(arena, "named-pin")
    _, other = with_state(arena, "named-pin-other")
    _, run_id = planning(arena, "named-pin", workspace_id=ws_id)
    attempt = run_parts.require(run_id, "attempt#plan").body
    launched = arena.launcher.requests[attempt["sandbox_id"]]

    # When its sandbox starts its session naming that other version
    started = arena.runner_api.start(
        launched.bootstrap,
        run_id=run_id,
        attempt_id=attempt["attempt_id"],
        phase="plan",
        sandbox_id=attempt["sandbox_id"],
        inputs=launched.inputs,
        state_version=other,
    )

    # Then its token names the version its run pinned, and no artifact
    hints = hints_of(started["token"])
    assert hints is not None
    assert (hints.run_id, hints.workspace_id, hints.pinned_sv_id) == (run_id, ws_id, pinned)
    assert hints.state_artifact_id is None
    # And it authenticates, anywhere, in one request
    requests = DynamoDBRequests(monkeypatch)
    principal, _ = arena.stack.rewired().identity.authenticate_request(f"Bearer {started['token']}")
    assert principal.workspace_id == ws_id
    assert requests.operations == ["BatchGetItem"]
