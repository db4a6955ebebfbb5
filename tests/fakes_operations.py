"""In-memory fakes of the operations seams (runplane.services.repositories.operations),
keeping the promises the DynamoDB implementations keep (held to the same cases by
tests/integration/test_operations_store_contract.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runplane.domain.errors import ConcurrentChange, Conflict
from runplane.domain.launch_controls import Controls
from runplane.domain.logs import LogChunk
from runplane.domain.parts import RunPart
from runplane.domain.sandbox_exits import SandboxRef
from runplane.domain.source_provenance import ConfigurationOrigin, SourceIngestion


class ControlsUnreadable(Exception):
    """The fake's store cannot answer (a throttled or unreachable table)."""


class InMemoryLaunchControls:
    """``LaunchControlStore`` in memory. ``running_sandboxes`` sets a scope's count
    (on the table, a runner attempt's own writes take and give back slots), and
    ``unreadable`` makes every read fail."""

    def __init__(self) -> None:
        self._controls: dict[str, Controls] = {}
        self._running: dict[str, int] = {}
        self.unreadable = False
        # Who set each scope's controls, and when: what the table's item notes.
        self.set_by: dict[str, tuple[str, datetime]] = {}

    def running_sandboxes(self, scope: str, count: int) -> None:
        self._running[scope] = count

    def read(
        self, scopes: Sequence[str], *, counts: bool
    ) -> tuple[dict[str, Controls], dict[str, int]]:
        self._readable()
        controls = {scope: self._controls.get(scope, Controls()) for scope in scopes}
        running = {scope: self._running.get(scope, 0) for scope in scopes} if counts else {}
        return controls, running

    def get(self, scope: str) -> Controls:
        self._readable()
        return self._controls.get(scope, Controls())

    def running(self, scope: str) -> int:
        self._readable()
        return self._running.get(scope, 0)

    def put(self, scope: str, controls: Controls, *, by: str, at: datetime) -> None:
        self._controls[scope] = controls
        self.set_by[scope] = (by, at)

    def _readable(self) -> None:
        if self.unreadable:
            raise ControlsUnreadable("launch controls unavailable")


class InMemoryLogChunks:
    """``LogChunkStore`` in memory, reading a run's parts (an attempt's state) through
    ``parts`` (the fake run ledger's, in the service tier). Its writes are
    ``ChunkWrite``s, committed alone: in memory nothing else records an artifact."""

    def __init__(self, parts: Callable[[str], Mapping[str, RunPart]]) -> None:
        self._parts = parts
        self.chunks: dict[tuple[str, str, int], LogChunk] = {}

    def get(self, run_id: str, attempt_id: str, sequence: int) -> LogChunk | None:
        return self.chunks.get((run_id, attempt_id, sequence))

    def of_attempt(self, run_id: str, attempt_id: str) -> list[LogChunk]:
        return [
            chunk for key, chunk in sorted(self.chunks.items()) if key[:2] == (run_id, attempt_id)
        ]

    def put(self, chunk: LogChunk, attempt_part: str, open_states: frozenset[str]) -> ChunkWrite:
        return ChunkWrite(self, chunk, attempt_part, open_states)

    def commit(self, write: ChunkWrite) -> None:
        chunk = write.chunk
        key = (chunk.run_id, chunk.attempt_id, chunk.sequence)
        # The table's transaction reports its refused conditions in this order.
        if key in self.chunks:
            raise Conflict(f"live log chunk {chunk.sequence} was already stored")
        attempt = self._parts(chunk.run_id).get(write.attempt_part)
        if attempt is None or attempt.state not in write.open_states:
            raise Conflict(f"the {chunk.phase} attempt of run {chunk.run_id} is not running")
        if chunk.sequence > 0:
            previous = self.chunks.get((chunk.run_id, chunk.attempt_id, chunk.sequence - 1))
            if previous is None or previous.end != chunk.offset:
                raise Conflict(f"live log chunk {chunk.sequence} does not follow its predecessor")
        self.chunks[key] = chunk


@dataclass(frozen=True)
class ChunkWrite:
    """A chunk's put, not yet made (what ``InMemoryLogChunks.put`` gives)."""

    store: InMemoryLogChunks
    chunk: LogChunk
    attempt_part: str
    open_states: frozenset[str]

    def commit(self) -> None:
        self.store.commit(self)


class InMemorySourceRecords:
    """``SourceRecords`` in memory: configuration versions' origins and source
    ingestions, as their own writes (an upload, an ingestion) would have left them."""

    def __init__(self) -> None:
        self.origins: dict[str, ConfigurationOrigin] = {}
        self.sources: dict[str, SourceIngestion] = {}

    def add_origin(self, origin: ConfigurationOrigin) -> None:
        self.origins[origin.id] = origin

    def add_source(self, source: SourceIngestion) -> None:
        self.sources[source.id] = source

    def configuration_origin(self, cv_id: str) -> ConfigurationOrigin | None:
        return self.origins.get(cv_id)

    def source(self, source_id: str) -> SourceIngestion | None:
        return self.sources.get(source_id)


EVENT_PUT = "event_put"


class InMemoryEventOutbox:
    """``OutboxWrites`` and ``OutboxStream`` in memory. A committed put adds the event
    and appends its record to ``stream`` (in commit order), as the table's stream
    carries an outbox item's insertion; ``other_change`` appends a record of any other
    change. Its writes are ``EventPut``s, committed alone."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.stream: list[dict[str, Any]] = []

    def put(self, run_id: str, event_id: str, message: Mapping[str, Any], at: datetime) -> EventPut:
        # Stored as the table stores it: JSON, so what comes back is what a reader gets.
        return EventPut(self, run_id, event_id, json.dumps(dict(message), sort_keys=True), at)

    def commit(self, put: EventPut) -> None:
        key = (put.run_id, put.event_id)
        if key in self.events:
            raise ConcurrentChange(f"run {put.run_id}: event {put.event_id} was written already")
        self.events[key] = json.loads(put.message)
        self._append({"change": EVENT_PUT, "message": put.message})

    def other_change(self) -> None:
        self._append({"change": "other"})

    def message_of(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        if record.get("change") != EVENT_PUT:
            return None
        message = json.loads(record["message"])
        return message if isinstance(message, dict) else None

    def position(self, record: Mapping[str, Any]) -> str:
        return str(record["position"])

    def _append(self, record: dict[str, Any]) -> None:
        self.stream.append({**record, "position": str(100 + len(self.stream))})


@dataclass(frozen=True)
class EventPut:
    """An event's put, not yet made (what ``InMemoryEventOutbox.put`` gives)."""

    outbox: InMemoryEventOutbox
    run_id: str
    event_id: str
    message: str
    at: datetime

    def commit(self) -> None:
        self.outbox.commit(self)


@dataclass
class InMemorySandboxRefs:
    """``SandboxRefs`` in a dict by reference; ``record`` is the launch's write."""

    refs: dict[str, SandboxRef] = field(default_factory=dict)

    def record(self, ref: SandboxRef) -> None:
        self.refs[ref.reference] = ref

    def find(self, reference: str) -> SandboxRef | None:
        return self.refs.get(reference)
