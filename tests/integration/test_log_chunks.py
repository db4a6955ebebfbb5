"""Live log chunks on moto: stored once per (attempt, sequence), in order, only while the
attempt runs, encrypted; refusals write nothing. Bounds, paging and who may read a log
are the service tier's (tests/service/test_logs.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runplane.domain.capabilities import Binding, CapabilityKind, Phase
from runplane.domain.errors import Conflict
from runplane.domain.identity import Principal
from runplane.domain.runner_reports import Failed
from runplane.services.logs import RunLogs
from runplane.store import run_parts
from tests.integration.arena import Arena, planning
from tests.integration.dynamodb_requests import DynamoDBRequests


def runner_of(arena: Arena, run_id: str) -> Principal:
    """The plan attempt's runner session, as the authorizer would present it."""
    attempt = run_parts.require(run_id, "attempt#plan").body
    binding = Binding(run_id, attempt["attempt_id"], Phase.PLAN, attempt["sandbox_id"])
    stack = arena.stack
    minted = stack.capabilities.mint(
        CapabilityKind.BOOTSTRAP,
        binding,
        lifetime=timedelta(minutes=15),
        organization_id=arena.org.id,
    )
    grant = stack.sessions.start(minted.handle, binding)
    return stack.identity.authenticate(f"Bearer {grant.token}")


def logs_of(arena: Arena) -> RunLogs:
    return arena.stack.services.logs


def test_a_resent_chunk_is_stored_once_and_other_bytes_under_its_number_are_refused(
    arena: Arena,
) -> None:
    # Given a running plan and its runner session
    _, run_id = planning(arena, "resend")
    runner, logs = runner_of(arena, run_id), logs_of(arena)

    # When chunk 0 is sent, resent (its answer was lost), and chunk 1 follows
    first = logs.store_chunk(runner, 0, 0, b"Initializing...\n")
    again = logs.store_chunk(runner, 0, 0, b"Initializing...\n")
    before = arena.stack.scan(), arena.stack.bucket_keys()
    with pytest.raises(Conflict):
        logs.store_chunk(runner, 0, 0, b"something else!\n")
    after = arena.stack.scan(), arena.stack.bucket_keys()
    logs.store_chunk(runner, 1, 16, b"Plan: 1 to add\n")

    # Then the resend was acknowledged without a second copy, the conflict wrote nothing
    assert first == {"sequence": 0, "next_offset": 16, "replayed": False}
    assert again == {"sequence": 0, "next_offset": 16, "replayed": True}
    assert before == after
    # And a reader sees the live text, not yet complete
    read = logs.read(arena.admin, run_id, Phase.PLAN)
    assert (read.data, read.complete, read.source) == (
        b"Initializing...\nPlan: 1 to add\n",
        False,
        "live",
    )
    # And reads from an offset return the rest of it
    assert logs.read(arena.admin, run_id, Phase.PLAN, offset=16).data == b"Plan: 1 to add\n"


def test_a_new_chunk_costs_one_write_and_no_read(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a running plan and its runner session
    _, run_id = planning(arena, "cheap")
    runner, logs = runner_of(arena, run_id), logs_of(arena)
    requests = DynamoDBRequests(monkeypatch)

    # When a new chunk is stored
    stored = logs.store_chunk(runner, 0, 0, b"Initializing...\n")

    # Then nothing was read (authenticating the session read its attempt): the chunk
    # and its artifact's record were written in one transaction conditioned on both
    assert stored == {"sequence": 0, "next_offset": 16, "replayed": False}
    assert requests.operations == ["TransactWriteItems"]
    assert logs.read(arena.admin, run_id, Phase.PLAN).data == b"Initializing...\n"


def test_a_chunk_that_does_not_follow_its_predecessor_writes_nothing(arena: Arena) -> None:
    # Given a running plan with chunk 0 stored
    _, run_id = planning(arena, "gap")
    runner, logs = runner_of(arena, run_id), logs_of(arena)
    logs.store_chunk(runner, 0, 0, b"0123456789")
    before = arena.stack.scan(), arena.stack.bucket_keys()

    # When chunks arrive with a gap, overlapping, or ahead of a missing one
    refusals = []
    for sequence, offset in ((1, 11), (1, 9), (3, 10)):
        with pytest.raises(Conflict) as refused:
            logs.store_chunk(runner, sequence, offset, b"abc")
        refusals.append(refused.value.message)

    # Then each is refused, naming where it should start, and nothing was written
    assert refusals[0] == "live log chunk 1 starts at byte 11, but chunk 0 ends at byte 10"
    assert refusals[2] == "live log chunk 3 starts at byte 10, but chunk 2 is missing"
    assert (arena.stack.scan(), arena.stack.bucket_keys()) == before


def test_after_the_attempt_ended_chunks_are_refused_and_the_log_is_complete(
    arena: Arena,
) -> None:
    # Given a plan whose runner streamed a line, then reported its result (no final log)
    _, run_id = planning(arena, "ended")
    runner, logs = runner_of(arena, run_id), logs_of(arena)
    logs.store_chunk(runner, 0, 0, b"Error: boom\n")
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]
    arena.orchestration.report_plan(run_id, attempt, Failed(reason="boom"))
    before = arena.stack.scan(), arena.stack.bucket_keys()

    # When a late chunk arrives
    with pytest.raises(Conflict):
        logs.store_chunk(runner, 1, 12, b"late\n")

    # Then nothing was written, and the streamed log reads as complete, ending there
    assert (arena.stack.scan(), arena.stack.bucket_keys()) == before
    read = logs.read(arena.admin, run_id, Phase.PLAN)
    assert (read.data, read.complete, read.at_end) == (b"Error: boom\n", True, True)


def test_a_chunk_resent_after_its_attempt_ended_is_acknowledged_and_writes_nothing(
    arena: Arena,
) -> None:
    # Given a plan whose runner stored chunk 0, then reported its result
    _, run_id = planning(arena, "late-resend")
    runner, logs = runner_of(arena, run_id), logs_of(arena)
    logs.store_chunk(runner, 0, 0, b"Error: boom\n")
    attempt = run_parts.require(run_id, "attempt#plan").body["attempt_id"]
    arena.orchestration.report_plan(run_id, attempt, Failed(reason="boom"))
    before = arena.stack.scan(), arena.stack.bucket_keys()

    # When chunk 0 is resent (its answer was lost), and other bytes under its number
    again = logs.store_chunk(runner, 0, 0, b"Error: boom\n")
    with pytest.raises(Conflict):
        logs.store_chunk(runner, 0, 0, b"Error: bang\n")

    # Then the resend is acknowledged, the conflict refused, and nothing was written
    assert again == {"sequence": 0, "next_offset": 12, "replayed": True}
    assert (arena.stack.scan(), arena.stack.bucket_keys()) == before
