"""The operations seams' contract: the same cases against the DynamoDB store (on moto)
and the in-memory fakes the service tier uses (tests/service), so the fakes cannot
drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.errors import ConcurrentChange, Conflict
from runplane.domain.launch_controls import GLOBAL, Controls
from runplane.domain.logs import LogChunk
from runplane.domain.parts import OPEN_ATTEMPT, AttemptState, RunPart
from runplane.domain.source_provenance import ConfigurationOrigin, SourceIngestion, SourceTarget
from runplane.services.repositories.operations import (
    LaunchControlStore,
    LogChunkStore,
    OutboxStream,
    OutboxWrites,
    SourceRecords,
)
from runplane.store import run_parts, sandbox_slots
from runplane.store.github import DynamoSourceRecords
from runplane.store.launch_controls import DynamoLaunchControls
from runplane.store.log_chunks import DynamoLogChunks
from runplane.store.models import (
    ConfigurationVersionItem,
    SourceIngestionItem,
    configuration_version_key,
    source_key,
)
from runplane.store.outbox import DynamoEventOutbox
from tests.fakes_operations import (
    InMemoryEventOutbox,
    InMemoryLaunchControls,
    InMemoryLogChunks,
    InMemorySourceRecords,
)
from tests.integration.conftest import Stack
from tests.integration.outbox import inserted_records

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


# -- source records -----------------------------------------------------------------------


@dataclass
class Sources:
    records: SourceRecords
    add_origin: Callable[[ConfigurationOrigin], None]
    add_source: Callable[[SourceIngestion, list[dict[str, Any]]], None]
    """Records the ingestion with its targets as the ingestion writes them."""


def _save_origin(origin: ConfigurationOrigin) -> None:
    # As an upload (or an ingestion) leaves a configuration version's item.
    ConfigurationVersionItem(
        *configuration_version_key(origin.id),
        cv_id=origin.id,
        org_id=origin.organization_id,
        workspace_id=origin.workspace_id,
        status="uploaded",
        upload_id=f"upl-{origin.id}",
        artifact_id=origin.artifact_id,
        created_at=AT,
        source_id=origin.source_id,
    ).save()


def _save_source(source: SourceIngestion, targets: list[dict[str, Any]]) -> None:
    # As services/github.py's ingestion leaves a source ingestion's item.
    SourceIngestionItem(
        *source_key(source.id),
        source_id=source.id,
        org_id=source.organization_id,
        delivery_id=source.delivery_id,
        event=source.event,
        repository=source.repository,
        branch=source.branch,
        ref=source.ref,
        commit_sha=source.commit_sha,
        installation_id=42,
        pull_request=source.pull_request,
        sender=source.sender,
        commit_message=source.commit_message,
        pull_request_title=source.pull_request_title,
        pull_request_author=source.pull_request_author,
        status=source.status,
        workflow_id=source.workflow_id,
        archive_sha256=source.archive_sha256,
        targets=targets,
        created_at=AT,
        updated_at=AT,
    ).save()


@pytest.fixture(params=["dynamodb", "memory"])
def sources(request: pytest.FixtureRequest) -> Sources:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return Sources(DynamoSourceRecords(), _save_origin, _save_source)
    fake = InMemorySourceRecords()
    return Sources(fake, fake.add_origin, lambda source, _targets: fake.add_source(source))


def _ingestion(**changes: Any) -> SourceIngestion:
    fields: dict[str, Any] = {
        "id": "src-1",
        "organization_id": "org-acme",
        "status": "ready",
        "delivery_id": "dlv-1",
        "workflow_id": "wf-1",
        "event": "pull_request",
        "repository": "acme/network",
        "ref": "refs/pull/7/head",
        "branch": "feature",
        "pull_request": 7,
        "commit_sha": "a" * 40,
        "commit_message": "Add a subnet",
        "sender": "ada",
        "pull_request_title": "Subnets",
        "pull_request_author": "ada",
        "archive_sha256": "b" * 64,
        "targets": (
            SourceTarget("cv-1", "art-1", "envs/a"),
            SourceTarget("cv-2", "art-2", ""),
        ),
    }
    return SourceIngestion(**(fields | changes))


def test_origins_and_ingestions_read_back_whole(sources: Sources) -> None:
    # Given a configuration version from a source ingestion, and an uploaded one
    from_source = ConfigurationOrigin("cv-1", "org-acme", "ws-1", "art-1", "src-1")
    uploaded = ConfigurationOrigin("cv-3", "org-acme", "ws-1", None, None)
    sources.add_origin(from_source)
    sources.add_origin(uploaded)
    # And the ingestion, its second target written without a working directory
    sources.add_source(
        _ingestion(),
        [
            {
                "workspace_id": "ws-1",
                "working_directory": "envs/a",
                "configuration_version_id": "cv-1",
                "configuration_artifact_id": "art-1",
                "run_id": None,
            },
            {"configuration_version_id": "cv-2", "configuration_artifact_id": "art-2"},
        ],
    )
    # Then each reads back whole, the targets in the order recorded
    assert sources.records.configuration_origin("cv-1") == from_source
    assert sources.records.configuration_origin("cv-3") == uploaded
    assert sources.records.source("src-1") == _ingestion()


def test_unknown_origins_and_ingestions_read_as_none(sources: Sources) -> None:
    assert sources.records.configuration_origin("cv-none") is None
    assert sources.records.source("src-none") is None


def test_an_ingestion_of_a_push_has_no_pull_request(sources: Sources) -> None:
    # Given a push's ingestion, still pending, with no targets
    push = _ingestion(
        event="push",
        pull_request=None,
        pull_request_title=None,
        pull_request_author=None,
        status="pending",
        targets=(),
        archive_sha256=None,
    )
    sources.add_source(push, [])
    # Then it reads back with none of a pull request's fields
    assert sources.records.source("src-1") == push


# -- the run-event outbox -----------------------------------------------------------------


@dataclass
class Outbox:
    writes: OutboxWrites[Any]
    stream: OutboxStream
    records: Callable[[], list[dict[str, Any]]]
    """The stream's records so far, in commit order."""
    other_change: Callable[[], dict[str, Any]]
    """A record of a change that is no event."""


def _other_insert() -> dict[str, Any]:
    # The stream record of a run part's insertion, in the shape AWS hands the relay.
    image = {"PK": {"S": "RUN#run-1"}, "SK": {"S": "PART#attempt#plan"}, "state": {"S": "x"}}
    return {
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"Keys": image, "NewImage": image, "SequenceNumber": "100"},
    }


@pytest.fixture(params=["dynamodb", "memory"])
def outbox(request: pytest.FixtureRequest) -> Outbox:
    if request.param == "dynamodb":
        stack: Stack = request.getfixturevalue("stack")  # moto, with the table
        table = DynamoEventOutbox()
        return Outbox(table, table, lambda: inserted_records(stack.scan()), _other_insert)
    fake = InMemoryEventOutbox()

    def other() -> dict[str, Any]:
        fake.other_change()
        return fake.stream[-1]

    return Outbox(fake, fake, lambda: list(fake.stream), other)


def _message(event_id: str) -> dict[str, Any]:
    return {"kind": "run_event", "event": {"id": event_id, "type": "applied", "n": [1, 2]}}


def test_events_put_are_carried_in_commit_order_as_put(outbox: Outbox) -> None:
    # When three events are put, one after another
    for n, event_id in enumerate(["run-1.0000000003", "run-1.0000000002", "run-2.drift"]):
        run_id = event_id.split(".")[0]
        outbox.writes.put(run_id, event_id, _message(event_id), AT + timedelta(seconds=n)).commit()
    # Then the stream carries each message once, as put, in commit order
    records = outbox.records()
    assert [outbox.stream.message_of(r) for r in records] == [
        _message("run-1.0000000003"),
        _message("run-1.0000000002"),
        _message("run-2.drift"),
    ]
    # And each record has its own position
    assert len({outbox.stream.position(r) for r in records}) == 3


def test_an_event_is_put_once(outbox: Outbox) -> None:
    # Given an event put
    outbox.writes.put("run-1", "run-1.0000000003", _message("first"), AT).commit()
    # When it is put again, Then it is refused, and the stream still carries the first only
    with pytest.raises(ConcurrentChange):
        outbox.writes.put("run-1", "run-1.0000000003", _message("again"), AT).commit()
    assert [outbox.stream.message_of(r) for r in outbox.records()] == [_message("first")]


def test_a_change_that_is_no_event_carries_no_message(outbox: Outbox) -> None:
    # When a record of another change is read, Then it carries no message
    assert outbox.stream.message_of(outbox.other_change()) is None
