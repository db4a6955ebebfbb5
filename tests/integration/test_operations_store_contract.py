"""The operations seams' contract: the same cases against the DynamoDB store (on moto)
and the in-memory fakes the service tier uses (tests/service), so the fakes cannot
drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.errors import Conflict
from runplane.domain.launch_controls import GLOBAL, Controls
from runplane.domain.logs import LogChunk
from runplane.domain.parts import OPEN_ATTEMPT, AttemptState, RunPart
from runplane.services.repositories.operations import LaunchControlStore, LogChunkStore
from runplane.store import run_parts, sandbox_slots
from runplane.store.launch_controls import DynamoLaunchControls
from runplane.store.log_chunks import DynamoLogChunks
from tests.fakes_operations import InMemoryLaunchControls, InMemoryLogChunks

AT = datetime(2026, 1, 1, tzinfo=UTC)

# -- launch controls ----------------------------------------------------------------------

Occupy = Callable[[str, int], None]
"""Makes a scope run that many more sandboxes (on the table: slots taken)."""


@pytest.fixture(params=["dynamodb", "memory"])
def launch_controls(request: pytest.FixtureRequest) -> tuple[LaunchControlStore, Occupy]:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table

        def take(scope: str, count: int) -> None:
            for _ in range(count):
                sandbox_slots.take(scope, None, scope).commit()

        return DynamoLaunchControls(), take
    fake = InMemoryLaunchControls()
    return fake, lambda scope, count: fake.running_sandboxes(scope, fake.running(scope) + count)


def test_scopes_never_set_read_as_allowed_with_nothing_running(
    launch_controls: tuple[LaunchControlStore, Occupy],
) -> None:
    store, _ = launch_controls
    # When scopes nobody ever set are read, with and without counts
    controls, running = store.read([GLOBAL, "org-1"], counts=True)
    without, none = store.read([GLOBAL, "org-1"], counts=False)
    # Then each reads as the default controls, running nothing
    assert controls == without == {GLOBAL: Controls(), "org-1": Controls()}
    assert running == {GLOBAL: 0, "org-1": 0}
    assert none == {}
    assert (store.get("org-1"), store.running("org-1")) == (Controls(), 0)


def test_controls_put_read_back_whole_and_replace_the_previous_ones(
    launch_controls: tuple[LaunchControlStore, Occupy],
) -> None:
    store, _ = launch_controls
    # Given an organization's controls with every field set
    full = Controls(
        launches_enabled=False,
        suspended=True,
        allowed_regions=("eu-west-1", "us-east-1"),
        runner_releases=("r-2", "r-1"),
        policy_runtimes=("rego-1",),
        max_sandboxes=3,
    )
    store.put("org-1", full, by="user:ada", at=AT)
    # Then they read back whole, in the order given, for that scope only
    assert store.get("org-1") == full
    assert store.read(["org-1", GLOBAL], counts=False)[0] == {"org-1": full, GLOBAL: Controls()}
    # When they are replaced by controls with fewer fields set
    store.put("org-1", Controls(max_sandboxes=None), by="user:bob", at=AT + timedelta(1))
    # Then the last write wins whole: nothing of the first is left
    assert store.get("org-1") == Controls()


def test_running_counts_are_per_scope_and_untouched_by_a_put(
    launch_controls: tuple[LaunchControlStore, Occupy],
) -> None:
    store, occupy = launch_controls
    # Given the platform running three sandboxes and an organization one
    occupy(GLOBAL, 3)
    occupy("org-1", 1)
    # When the organization's controls are set
    store.put("org-1", Controls(max_sandboxes=1), by="user:ada", at=AT)
    # Then each scope's count reads back as taken, in one read and one by one
    assert store.read([GLOBAL, "org-1", "org-2"], counts=True)[1] == {
        GLOBAL: 3,
        "org-1": 1,
        "org-2": 0,
    }
    assert (store.running(GLOBAL), store.running("org-1")) == (3, 1)


# -- live log chunks ----------------------------------------------------------------------


@dataclass
class Chunks:
    store: LogChunkStore[Any]
    attempt: Callable[[str, str], None]
    """Records the run's plan attempt in that state."""


@pytest.fixture(params=["dynamodb", "memory"])
def chunks(request: pytest.FixtureRequest) -> Chunks:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table

        def record(run_id: str, state: str) -> None:
            run_parts.put(run_id, PLAN_ATTEMPT, state=state, body={}, now=AT).commit()

        return Chunks(DynamoLogChunks(), record)
    parts: dict[str, dict[str, RunPart]] = {}

    def remember(run_id: str, state: str) -> None:
        part = RunPart(run_id, PLAN_ATTEMPT, state, {}, None, AT, AT, frozenset())
        parts.setdefault(run_id, {})[PLAN_ATTEMPT] = part

    return Chunks(InMemoryLogChunks(lambda run_id: parts.get(run_id, {})), remember)


PLAN_ATTEMPT = "attempt#plan"


def _chunk(sequence: int, offset: int, size: int, run_id: str = "run-1") -> LogChunk:
    return LogChunk(
        run_id=run_id,
        organization_id="org-acme",
        attempt_id="att-1",
        phase="plan",
        sequence=sequence,
        offset=offset,
        size=size,
        sha256=f"{sequence:064x}",
        artifact_id=f"art-{run_id}-{sequence}",
        created_at=AT,
    )


def _put(chunks: Chunks, chunk: LogChunk) -> None:
    chunks.store.put(chunk, PLAN_ATTEMPT, OPEN_ATTEMPT).commit()


def test_chunks_of_an_open_attempt_read_back_in_number_order(chunks: Chunks) -> None:
    # Given an open plan attempt, and another run's
    chunks.attempt("run-1", AttemptState.STARTED)
    chunks.attempt("run-2", AttemptState.STARTED)
    # When contiguous chunks are put, and one of the other run
    for sequence, offset, size in [(0, 0, 10), (1, 10, 5), (2, 15, 7)]:
        _put(chunks, _chunk(sequence, offset, size))
    _put(chunks, _chunk(0, 0, 3, run_id="run-2"))
    # Then each reads back whole, the attempt's in number order and only its own
    assert chunks.store.get("run-1", "att-1", 1) == _chunk(1, 10, 5)
    assert [c.sequence for c in chunks.store.of_attempt("run-1", "att-1")] == [0, 1, 2]
    assert chunks.store.of_attempt("run-2", "att-1") == [_chunk(0, 0, 3, run_id="run-2")]
    # And unknown chunks or attempts read as absent
    assert chunks.store.get("run-1", "att-1", 3) is None
    assert chunks.store.of_attempt("run-1", "att-other") == []


def test_a_chunk_number_is_stored_once(chunks: Chunks) -> None:
    # Given chunk 0 of an open attempt
    chunks.attempt("run-1", AttemptState.STARTED)
    _put(chunks, _chunk(0, 0, 10))
    # When chunk 0 is put again, with other bytes, Then it is refused
    with pytest.raises(Conflict):
        _put(chunks, _chunk(0, 0, 4))
    # And the first one stands
    assert chunks.store.of_attempt("run-1", "att-1") == [_chunk(0, 0, 10)]


def test_a_chunk_that_does_not_follow_its_predecessor_is_refused(chunks: Chunks) -> None:
    # Given chunk 0 of an open attempt, ending at byte 10
    chunks.attempt("run-1", AttemptState.STARTED)
    _put(chunks, _chunk(0, 0, 10))
    # When a chunk leaves a gap, overlaps, or skips a number, Then it is refused
    for chunk in (_chunk(1, 11, 2), _chunk(1, 9, 2), _chunk(2, 10, 2)):
        with pytest.raises(Conflict):
            _put(chunks, chunk)
    # And nothing of them was stored
    assert chunks.store.of_attempt("run-1", "att-1") == [_chunk(0, 0, 10)]


def test_a_chunk_of_an_ended_or_unknown_attempt_is_refused(chunks: Chunks) -> None:
    # Given an attempt that ended, and a run with no attempt
    chunks.attempt("run-1", AttemptState.FAILED)
    # When a first chunk is put for either, Then it is refused writing nothing
    for run_id in ("run-1", "run-none"):
        with pytest.raises(Conflict):
            _put(chunks, _chunk(0, 0, 10, run_id=run_id))
        assert chunks.store.of_attempt(run_id, "att-1") == []
