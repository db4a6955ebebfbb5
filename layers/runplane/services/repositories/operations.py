"""The repository seams of the platform's operations: launch controls, live logs, the
records of a run's source provenance, the run-event outbox and the sandboxes launched.

Like the seams in ``repositories/__init__.py``, each names domain types only; the
DynamoDB implementation is in ``store/`` and an in-memory fake that keeps the same
promises in ``tests/fakes_operations.py``, held to the same cases by
tests/integration/test_operations_store_contract.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from runplane.domain.launch_controls import Controls
from runplane.domain.logs import LogChunk
from runplane.domain.sandbox_exits import SandboxRef
from runplane.domain.source_provenance import ConfigurationOrigin, SourceIngestion

Write_co = TypeVar("Write_co", covariant=True)


class LaunchControlStore(Protocol):
    """Each scope's launch controls (the platform's, ``GLOBAL``, or an organization's)
    and how many sandboxes each scope is running.

    - ``read`` gives every scope's controls (``Controls()`` for a scope never set) and,
      with ``counts``, every scope's running sandboxes (0 for one never counted;
      without ``counts`` the second mapping is empty), in one consistent read. A store
      that cannot answer raises whatever it raised: the caller denies (fail closed).
    - ``get`` is one scope's controls, ``Controls()`` if never set; ``running`` its
      running sandboxes, 0 if none was ever counted.
    - ``put`` replaces the scope's controls whole, unconditionally (the last write
      wins), noting who set them and when. It never changes a running count: slots
      are taken and given back with a runner attempt's own writes, on the store
      (``store.sandbox_slots``).
    """

    def read(
        self, scopes: Sequence[str], *, counts: bool
    ) -> tuple[dict[str, Controls], dict[str, int]]: ...

    def get(self, scope: str) -> Controls: ...

    def running(self, scope: str) -> int: ...

    def put(self, scope: str, controls: Controls, *, by: str, at: datetime) -> None: ...


class LogChunkStore(Protocol[Write_co]):
    """The live log chunks of runner attempts: immutable, one per (attempt, number).

    - ``get`` is the chunk stored under that number, or None.
    - ``of_attempt`` holds the attempt's chunks in number order (another attempt's are
      never in it).
    - ``put`` is the chunk's write, not yet made: it commits in the transaction that
      records the chunk's artifact (``ArtifactStore.put``'s ``together``), so a chunk is
      stored exactly when its bytes are. ``Write_co`` is the store's kind of write (a
      transaction on DynamoDB), handed on without being looked into. Committed, it is
      refused with ``Conflict`` (``ChunkTaken`` for a number already stored, checked
      first), then unless the run's part ``attempt_part`` is in one of
      ``open_states``, then unless chunk ``sequence - 1`` ends where this one starts;
      a refused write writes nothing, nor does anything committed with it.
    """

    def get(self, run_id: str, attempt_id: str, sequence: int) -> LogChunk | None: ...

    def of_attempt(self, run_id: str, attempt_id: str) -> list[LogChunk]: ...

    def put(self, chunk: LogChunk, attempt_part: str, open_states: frozenset[str]) -> Write_co: ...


class SourceRecords(Protocol):
    """What a run's source provenance is followed through, read only: configuration
    versions' origins and GitHub source ingestions (both written by their own
    transactions on the store: an upload, an ingestion). The configuration's artifact
    is read through ``ArtifactRecords``.

    - ``configuration_origin`` is the version's origin (a consistent read), or None for
      an unknown version.
    - ``source`` is the ingestion (a consistent read), or None for an unknown one; its
      targets are in the order it recorded them, a missing working directory read as
      ``""``.
    """

    def configuration_origin(self, cv_id: str) -> ConfigurationOrigin | None: ...

    def source(self, source_id: str) -> SourceIngestion | None: ...


class OutboxWrites(Protocol[Write_co]):
    """The outbox's writes: each run event's queue message, put once.

    - ``put`` is the event's write, not yet made: it commits in the transaction of the
      change it announces (a run's move), so an event exists exactly when its change
      committed. ``Write_co`` is the store's kind of write (a transaction on
      DynamoDB), handed on without being looked into. Committed, an event already
      written (same run and event ID) is refused with ``ConcurrentChange``, and
      nothing committed with it is written. An event is never updated.
    """

    def put(
        self, run_id: str, event_id: str, message: Mapping[str, Any], at: datetime
    ) -> Write_co: ...


class OutboxStream(Protocol):
    """How the store's change stream carries the outbox to the relay: one record per
    change of the store, in commit order.

    - ``message_of`` is the queue message an event's put carries, exactly as put; None
      for every other record (an outbox item's removal, any other change).
    - ``position`` is the record's place in its stream: what a retry resumes from.
    """

    def message_of(self, record: Mapping[str, Any]) -> dict[str, Any] | None: ...

    def position(self, record: Mapping[str, Any]) -> str: ...


class SandboxRefs(Protocol):
    """Which attempt each sandbox was launched for, by the launcher's reference to it
    (recorded with the launch, in the attempt's own transaction): ``find`` is the pointer,
    or None for a reference never recorded (or expired out of the store)."""

    def find(self, reference: str) -> SandboxRef | None: ...
