"""A runner's call reads what its authentication read along with its session (its run,
attempt and workspace in the same consistent request), and never an item read before
a write the call made."""

from __future__ import annotations

import pytest

from runplane.domain.errors import NotFound
from runplane.domain.identity import Principal
from runplane.domain.read_ahead import Read, ReadAhead
from runplane.store import prefetch, run_batch
from runplane.store import workspaces as workspace_store
from runplane.store.models import run_key
from runplane.store.prefetch import IdentityMap
from runplane.store.request_reads import REQUEST
from runplane.store.unit_of_work import DynamoUnitOfWork
from tests.integration.arena import Arena, applying
from tests.integration.dynamodb_requests import DynamoDBRequests
from tests.integration.test_runner_authority import with_state


def authorized(arena: Arena, token: str) -> tuple[Principal, ReadAhead]:
    """What the authorizer hands the application: the principal and, through its
    context (text), the items its read fetched."""
    principal, read = arena.stack.identity.authenticate_request(f"Bearer {token}")
    return principal, prefetch.decode(prefetch.encode(read))


def test_a_runner_s_lock_call_is_its_authentication_read_alone(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox that has made a call before (its session and
    # its run's workspace are known to this process)
    ws_id, run_id = applying(arena, "prefetched-lock")
    token = arena.runner_token(run_id, "apply")
    authorized(arena, token)
    requests = DynamoDBRequests(monkeypatch)

    # When the engine locks the workspace: authenticated, then served
    principal, read = authorized(arena, token)
    with REQUEST.opened(read):
        locked = arena.stack.workspaces.lock(principal, ws_id, "Locked by Terraform")

    # Then the session, its attempt, its run and its workspace were one request, and
    # the lock's checks (workspace, run, apply attempt) asked for nothing more
    assert locked.lock_run_id == run_id
    assert requests.operations == ["BatchGetItem"]


def test_a_runner_s_workspace_read_by_name_is_its_authentication_read_alone(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox that has read its workspace by name before
    ws_id, run_id = applying(arena, "prefetched-name")
    token = arena.runner_token(run_id, "apply")
    principal, read = authorized(arena, token)
    with REQUEST.opened(read):
        arena.stack.workspaces.by_name(principal, arena.org.name, "prefetched-name")
    requests = DynamoDBRequests(monkeypatch)

    # When the engine's backend reads it again
    principal, read = authorized(arena, token)
    with REQUEST.opened(read):
        found = arena.stack.workspaces.by_name(principal, arena.org.name, "prefetched-name")

    # Then that is the authentication's one request
    assert found.id == ws_id
    assert requests.operations == ["BatchGetItem"]


def test_an_item_read_with_the_authentication_is_served_once_and_never_after_a_write(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace's item as a request's authentication read it
    ws_id, run_id = applying(arena, "prefetched-write")
    key = Read.workspace(ws_id)
    token = arena.runner_token(run_id, "apply")
    authorized(arena, token)
    _, read = authorized(arena, token)
    assert key in read.found
    requests = DynamoDBRequests(monkeypatch)

    with REQUEST.opened(read) as reads:
        # When the request reads it, changes it, then reads it again
        first = workspace_store.get_workspace(ws_id, reads=reads)
        workspace_store.update_settings(ws_id, description="changed").commit()
        second = workspace_store.get_workspace(ws_id, reads=reads)
        # and reads it once more after the write
        third = workspace_store.get_workspace(ws_id, reads=reads)

    # Then the first read was served, and each read after the write asked DynamoDB
    # and saw the write
    assert first.description != "changed"
    assert second.description == "changed"
    assert third.description == "changed"
    assert requests.operations == ["TransactWriteItems", "GetItem", "GetItem"]


def test_an_item_read_with_the_authentication_is_served_to_one_read_only(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace's item as a request's authentication read it
    ws_id, run_id = applying(arena, "prefetched-once")
    token = arena.runner_token(run_id, "apply")
    authorized(arena, token)
    _, read = authorized(arena, token)
    requests = DynamoDBRequests(monkeypatch)

    # When the request reads it twice
    with REQUEST.opened(read) as reads:
        workspace_store.get_workspace(ws_id, reads=reads)
        workspace_store.get_workspace(ws_id, reads=reads)

    # Then only the second read asked DynamoDB
    assert requests.operations == ["GetItem"]


def test_a_runner_s_current_state_call_is_its_authentication_read_alone(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a planning run's sandbox on a workspace with state, which has made two
    # calls (the second tells this process which version its run pinned)
    ws_id, sv_id = with_state(arena, "prefetched-state")
    _, run_id = applying(arena, "prefetched-state", ws_id)
    token = arena.runner_token(run_id, "apply")
    authorized(arena, token)
    authorized(arena, token)
    requests = DynamoDBRequests(monkeypatch)

    # When the engine's backend asks for the current state, then reads that version
    # (each its own call)
    principal, read = authorized(arena, token)
    with REQUEST.opened(read):
        current = arena.stack.state.current(principal, ws_id)
    principal, read = authorized(arena, token)
    with REQUEST.opened(read):
        version = arena.stack.state.get(principal, sv_id)

    # Then each call was its authentication's one request: the pinned version came
    # with the session
    assert current.id == sv_id
    assert version.id == sv_id
    assert requests.operations == ["BatchGetItem", "BatchGetItem"]


def test_a_runner_s_state_download_is_its_authentication_read_alone(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox on a workspace with state, which has made three
    # calls (the second names the pinned version, the third its state's artifact)
    ws_id, sv_id = with_state(arena, "prefetched-download")
    _, run_id = applying(arena, "prefetched-download", ws_id)
    token = arena.runner_token(run_id, "apply")
    for _ in range(3):
        authorized(arena, token)
    expected = arena.stack.state.download(authorized(arena, token)[0], sv_id)
    requests = DynamoDBRequests(monkeypatch)

    # When the engine's backend downloads that state (its own call)
    principal, read = authorized(arena, token)
    with REQUEST.opened(read):
        body = arena.stack.state.download(principal, sv_id)

    # Then it got the state, and the call's one DynamoDB request was its
    # authentication: the version and its artifact record (whose wrapped key travels
    # in the authorizer's context as text) came with the session
    assert body == expected
    assert requests.operations == ["BatchGetItem"]


def test_a_binary_attribute_travels_in_the_context_and_comes_back_as_bytes() -> None:
    # Given an artifact record read with a top-level binary attribute, one with binary
    # nested, and one found absent
    wrapped = {"pk": {"S": "ART#a"}, "wrapped_key": {"B": b"\x00\xffkey"}}
    nested = {"pk": {"S": "ART#b"}, "nested": {"M": {"k": {"B": b"\x01"}}}}
    ahead = ReadAhead.of(
        {Read.artifact("a"): wrapped, Read.artifact("b"): nested},
        [Read.artifact("a"), Read.artifact("b"), Read.artifact("c")],
    )

    # When they are carried through the authorizer's context
    carried = prefetch.encode(ahead)

    # Then the context is text, the first comes back byte for byte, the absence as an
    # absence, and the second does not travel (the call reads it)
    assert all(isinstance(value, str) for value in carried.values())
    back = prefetch.decode(carried)
    assert dict(back.found) == {Read.artifact("a"): wrapped}
    assert back.absent == {Read.artifact("c")}


def test_a_sandbox_s_first_call_reads_its_session_and_attempt_together(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an applying run's sandbox that has just started its session in this process
    _, run_id = applying(arena, "first-call")
    token = arena.runner_token(run_id, "apply")
    requests = DynamoDBRequests(monkeypatch)

    # When its first call authenticates
    principal, read = authorized(arena, token)

    # Then the session, its attempt and its run came in one request: the session's
    # start told this process which attempt its binding names
    assert principal.run_id == run_id
    assert requests.operations == ["BatchGetItem"]
    assert Read.run(run_id) in read.found


def test_an_item_read_ahead_and_absent_is_absent_to_a_batch_read_and_asked_by_a_single_one(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run read ahead with a part it does not have and a workspace that does
    # not exist
    _, run_id = applying(arena, "absent-ahead")
    requests = DynamoDBRequests(monkeypatch)
    with run_batch.reading_ahead(run_id, ["attempt#none"], workspace_id="ws-not-yet"):
        # When a batch read asks for the run and that part
        run, parts = run_batch.run_and_parts(run_id, ["attempt#none"], reads=REQUEST.reads())
        after_batch = list(requests.operations)
        # And a single read asks for the workspace
        with pytest.raises(NotFound):
            workspace_store.get_workspace("ws-not-yet", reads=REQUEST.reads())
    sent = list(requests.operations)

    # Then the batch read was served the run and the part's absence without asking
    assert run.id == run_id
    assert parts == {"attempt#none": None}
    assert after_batch == ["BatchGetItem"]
    # And the single read asked DynamoDB (an absence is served to batch reads only)
    assert sent == ["BatchGetItem", "GetItem"]


def test_a_unit_of_work_reads_from_the_identity_map_it_owns_and_forgets_it_when_it_writes(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a request's identity map holding the run and workspace its authentication
    # read, handed to a unit of work (no request scope is open: the unit has it alone)
    ws_id, run_id = applying(arena, "unit-owns-map")
    token = arena.runner_token(run_id, "apply")
    authorized(arena, token)
    _, read = authorized(arena, token)
    assert {Read.run(run_id), Read.workspace(ws_id)} <= set(read.found)
    reads = IdentityMap(*prefetch.raw(read))
    requests = DynamoDBRequests(monkeypatch)

    with DynamoUnitOfWork(
        arena.stack.records, arena.stack.lifecycle.mover.move, reads=reads
    ) as uow:
        # When the unit reads the workspace, then commits a write
        workspace = uow.writer.workspace(ws_id)
        served = list(requests.operations)
        uow.audit.record(
            organization_id=arena.org.id,
            subject_id=ws_id,
            event_id="evt-unit-owns-map",
            type="workspace.noted",
            actor="test",
            at=arena.stack.clock.now(),
            details={},
        )
        uow.commit()
        # and reads the run after its write
        run = uow.runs.get(run_id)

    # Then the workspace was served from the unit's map, and after the write the map
    # served nothing: the run was read from the table
    assert workspace.id == ws_id
    assert served == []
    assert run.id == run_id
    assert requests.operations == ["TransactWriteItems", "GetItem"]
    assert reads.take_known(run_key(run_id)) == (False, None)
