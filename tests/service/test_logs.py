"""Run logs over the in-memory stores: reading a phase's log by byte offset, live and
final, who may read it, and chunks refused before anything is stored (storing a chunk
commits it with its artifact's record in one transaction on the table:
tests/integration/test_log_chunks.py)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import pytest

from runplane.domain.artifacts import ArtifactKind
from runplane.domain.capabilities import Phase
from runplane.domain.entities import Run
from runplane.domain.errors import ArtifactTooLarge, InvalidInput, NotFound
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.logs import LIVE_LOG_BYTES, MAX_CHUNK_BYTES, MAX_CHUNKS, LogChunk
from runplane.domain.parts import OPEN_ATTEMPT, AttemptState
from runplane.domain.run import RunStatus
from runplane.services.artifacts import ArtifactStore
from runplane.services.logs import RunLogs
from tests.fakes import InMemoryArtifactRecords, InMemoryObjects, LocalDataKeys
from tests.fakes_operations import InMemoryLogChunks
from tests.service.conftest import Tier
from tests.service.scenarios import open_attempt, run_at

ORG = "org-acme"
PLAN_ATTEMPT = "attempt#plan"


@dataclass
class Logs:
    tier: Tier
    objects: InMemoryObjects
    artifacts: ArtifactStore
    chunks: InMemoryLogChunks
    logs: RunLogs
    run: Run

    def stream(self, *pieces: bytes) -> None:
        """The plan's runner streamed ``pieces`` as chunks 0, 1, ... (each its artifact)."""
        streamed = self.chunks.of_attempt(self.run.id, "att-plan")
        offset, start = sum(c.size for c in streamed), len(streamed)
        for sequence, piece in enumerate(pieces, start):
            artifact = self.artifacts.put(ORG, ArtifactKind.LOGS, [piece])
            chunk = LogChunk(
                run_id=self.run.id,
                organization_id=ORG,
                attempt_id="att-plan",
                phase="plan",
                sequence=sequence,
                offset=offset,
                size=len(piece),
                sha256=hashlib.sha256(piece).hexdigest(),
                artifact_id=artifact.id,
                created_at=self.tier.clock.now(),
            )
            self.chunks.put(chunk, PLAN_ATTEMPT, OPEN_ATTEMPT).commit()
            offset += len(piece)

    def end_attempt(
        self, final_log: bytes | None = None, kind: ArtifactKind = ArtifactKind.LOGS
    ) -> None:
        """The plan attempt ended, having uploaded ``final_log`` (if any)."""
        attempt = self.tier.run_reader.parts(self.run.id)[PLAN_ATTEMPT]
        body = dict(attempt.body)
        if final_log is not None:
            body["log_artifact_id"] = self.artifacts.put(ORG, kind, [final_log]).id
        ended = replace(attempt, state=AttemptState.FAILED, body=body)
        self.tier.run_reader.set_part(ended)


@pytest.fixture
def given(tier: Tier) -> Logs:
    objects = InMemoryObjects()
    artifacts = ArtifactStore(
        tier.clock, tier.ids, objects, LocalDataKeys(), records=InMemoryArtifactRecords()
    )
    chunks = InMemoryLogChunks(tier.run_reader.parts)
    logs = RunLogs(tier.clock, artifacts, tier.runs, reader=tier.run_reader, chunks=chunks)
    run = run_at(tier, RunStatus.PLANNING)
    open_attempt(tier, run, "plan", "arn:task/plan", ORG, "ses-plan")
    return Logs(tier, objects, artifacts, chunks, logs, run)


def _person(*permissions: Permission, org: str = ORG) -> Principal:
    return Principal(
        kind=PrincipalKind.USER,
        id="ada",
        organization_id=org,
        permissions=frozenset(permissions or Permission),
        display="ada",
    )


ADA = _person()


def test_a_live_log_reads_whole_and_from_any_offset(given: Logs) -> None:
    # Given a running plan that streamed two chunks
    given.stream(b"Initializing...\n", b"Plan: 1 to add\n")
    # When it is read whole
    read = given.logs.read(ADA, given.run.id, Phase.PLAN)
    # Then it is the streamed text, live and not complete
    assert (read.data, read.source, read.complete, read.at_end) == (
        b"Initializing...\nPlan: 1 to add\n",
        "live",
        False,
        False,
    )
    assert (read.offset, read.next_offset, read.length) == (0, 31, 31)
    # And a read from an offset inside a chunk returns the rest
    assert (
        given.logs.read(ADA, given.run.id, Phase.PLAN, offset=12).data == b"...\nPlan: 1 to add\n"
    )
    # And a read past the end returns nothing, at the end of what there is
    past = given.logs.read(ADA, given.run.id, Phase.PLAN, offset=40)
    assert (past.data, past.next_offset, past.length) == (b"", 40, 31)


def test_a_log_is_paged_by_limit_and_next_offset(given: Logs) -> None:
    # Given a streamed log, then its attempt ended (no final log uploaded)
    given.stream(b"abcdef", b"ghij", b"klmnopq")
    given.end_attempt()
    # When it is read page by page, each from the last page's next offset
    pages, offset = [], 0
    while True:
        read = given.logs.read(ADA, given.run.id, Phase.PLAN, offset=offset, limit=4)
        pages.append(read.data)
        offset = read.next_offset
        if read.at_end:
            break
    # Then the pages add up to the log, across chunk boundaries, ending complete
    assert pages == [b"abcd", b"efgh", b"ijkl", b"mnop", b"q"]
    assert (read.complete, read.length) == (True, 17)


def test_a_live_page_never_ends_inside_a_character(given: Logs) -> None:
    # Given a live log whose fourth and fifth bytes are one two-byte character
    text = "abcé-fin".encode()
    given.stream(text)
    # When four bytes are read, Then the page stops before the character
    first = given.logs.read(ADA, given.run.id, Phase.PLAN, limit=4)
    assert (first.data, first.next_offset) == (b"abc", 3)
    # And the next page starts with it
    assert given.logs.read(ADA, given.run.id, Phase.PLAN, offset=3, limit=4).data == "é-f".encode()


def test_once_the_final_log_is_uploaded_it_is_read_instead(given: Logs) -> None:
    # Given a streamed head, then a final log starting with it uploaded as the attempt ended
    given.stream(b"Initializing...\n")
    given.end_attempt(final_log=b"Initializing...\nError: boom\n")
    # When it is read from an offset into the streamed head
    read = given.logs.read(ADA, given.run.id, Phase.PLAN, offset=16)
    # Then the rest comes from the final log, complete
    assert (read.data, read.source, read.at_end) == (b"Error: boom\n", "final", True)


def test_a_final_log_that_is_not_a_log_artifact_is_not_served(given: Logs) -> None:
    # Given an attempt whose final log names an artifact of another kind
    given.end_attempt(final_log=b"{}", kind=ArtifactKind.PLAN_JSON)
    # When it is read, Then it is not found
    with pytest.raises(NotFound):
        given.logs.read(ADA, given.run.id, Phase.PLAN)


def test_a_phase_that_has_not_started_has_no_log(given: Logs) -> None:
    # Given a planning run (no apply attempt)
    # When its apply log is read, Then it is not found
    with pytest.raises(NotFound, match="apply log"):
        given.logs.read(ADA, given.run.id, Phase.APPLY)


def test_another_organization_or_someone_without_run_read_cannot_read_it(given: Logs) -> None:
    # Given a streamed log
    given.stream(b"secret plan\n")
    # When someone of another organization reads it, Then it is not found, as an unknown run
    with pytest.raises(NotFound):
        given.logs.read(_person(org="org-other"), given.run.id, Phase.PLAN)
    with pytest.raises(NotFound):
        given.logs.read(ADA, "run-unknown", Phase.PLAN)
    # And someone of its organization without run:read is refused
    with pytest.raises(Forbidden):
        given.logs.read(_person(Permission.WORKSPACE_READ), given.run.id, Phase.PLAN)


def test_bad_offsets_and_limits_are_refused(given: Logs) -> None:
    for offset, limit in [(-1, None), (0, 3), (0, 3 * 1024 * 1024)]:
        with pytest.raises(InvalidInput):
            given.logs.read(ADA, given.run.id, Phase.PLAN, offset=offset, limit=limit)


def _runner(run: Run) -> Principal:
    return Principal(
        kind=PrincipalKind.RUNNER,
        id="ses-plan",
        organization_id=ORG,
        permissions=frozenset(),
        display="runner",
        run_id=run.id,
        workspace_id=run.workspace_id,
        attempt_id="att-plan",
        sandbox_id="sbx-plan",
        phase="plan",
    )


def test_chunk_bounds_are_refused_before_anything_is_stored(given: Logs) -> None:
    # Given the plan's runner session
    runner = _runner(given.run)
    # When chunks outside the bounds are sent, Then each is refused
    with pytest.raises(ArtifactTooLarge):
        given.logs.store_chunk(runner, 0, 0, b"x" * (MAX_CHUNK_BYTES + 1))
    with pytest.raises(ArtifactTooLarge):
        given.logs.store_chunk(runner, 1, LIVE_LOG_BYTES - 1, b"xy")
    with pytest.raises(InvalidInput):
        given.logs.store_chunk(runner, MAX_CHUNKS, 0, b"x")
    with pytest.raises(InvalidInput):
        given.logs.store_chunk(runner, 0, 5, b"x")
    with pytest.raises(InvalidInput):
        given.logs.store_chunk(runner, 0, 0, b"")
    # And a person cannot send chunks at all (only a runner session can)
    with pytest.raises(Forbidden):
        given.logs.store_chunk(ADA, 0, 0, b"x")
    # And nothing was stored
    assert given.chunks.chunks == {}
    assert given.objects.bodies == {}
