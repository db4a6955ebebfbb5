"""Live log chunks: immutable items, one per (attempt, sequence), in order and contiguous.

A chunk is put only if no chunk has its number (a retried send cannot duplicate it),
only if it starts exactly where the previous chunk of its attempt ends, and only while
the attempt is open: all three are conditions of one transaction.
"""

from __future__ import annotations

from runplane.domain.errors import Conflict
from runplane.domain.logs import LogChunk
from runplane.domain.parts import RunPart
from runplane.store import batch, run_parts
from runplane.store.models import (
    LOG_CHUNK_PREFIX,
    LogChunkItem,
    RunPartItem,
    log_chunk_key,
    run_part_key,
)
from runplane.store.prefetch import IdentityMap
from runplane.store.transaction import Item, Transaction


class ChunkTaken(Conflict):
    """A chunk with this number is stored already (a resend, or a conflicting one)."""

    code = "LOG_CHUNK_EXISTS"

    def __init__(self, sequence: int) -> None:
        super().__init__(f"live log chunk {sequence} was already stored")
        self.sequence = sequence


def _to_chunk(item: LogChunkItem) -> LogChunk:
    """The chunk an item holds (the inverse of ``_item``)."""
    return LogChunk(
        run_id=item.run_id,
        organization_id=item.org_id,
        attempt_id=item.attempt_id,
        phase=item.phase,
        sequence=int(item.sequence),
        offset=int(item.offset),
        size=int(item.size),
        sha256=item.sha256,
        artifact_id=item.artifact_id,
        created_at=item.created_at,
    )


def _item(chunk: LogChunk) -> LogChunkItem:
    """The item holding ``chunk`` (the inverse of ``_to_chunk``), with its end offset
    for the next chunk's condition."""
    return LogChunkItem(
        *log_chunk_key(chunk.run_id, chunk.attempt_id, chunk.sequence),
        run_id=chunk.run_id,
        org_id=chunk.organization_id,
        attempt_id=chunk.attempt_id,
        phase=chunk.phase,
        sequence=chunk.sequence,
        offset=chunk.offset,
        size=chunk.size,
        end=chunk.end,
        sha256=chunk.sha256,
        artifact_id=chunk.artifact_id,
        created_at=chunk.created_at,
    )


def get(run_id: str, attempt_id: str, sequence: int) -> LogChunk | None:
    try:
        item = LogChunkItem.get(*log_chunk_key(run_id, attempt_id, sequence), consistent_read=True)
    except LogChunkItem.DoesNotExist:
        return None
    return _to_chunk(item)


def get_with_part(
    run_id: str, attempt_id: str, sequence: int, part: str, *, reads: IdentityMap
) -> tuple[LogChunk | None, RunPart | None]:
    """A chunk and one part of its run (its attempt) in one consistent request (those
    ``reads`` holds served from it)."""
    chunk_key, part_key = log_chunk_key(run_id, attempt_id, sequence), run_part_key(run_id, part)
    found = batch.get_many([chunk_key, part_key], reads=reads)
    raw_chunk, raw_part = found.get(chunk_key), found.get(part_key)
    return (
        _to_chunk(LogChunkItem.from_raw_data(raw_chunk)) if raw_chunk else None,
        run_parts.from_raw(raw_part) if raw_part else None,
    )


def of_attempt(run_id: str, attempt_id: str) -> list[LogChunk]:
    """The attempt's chunks in sequence order."""
    pk, _ = log_chunk_key(run_id, attempt_id, 0)
    items = LogChunkItem.query(
        pk,
        LogChunkItem.sk.startswith(f"{LOG_CHUNK_PREFIX}{attempt_id}#"),
        consistent_read=True,
    )
    return [_to_chunk(item) for item in items]


def put(chunk: LogChunk, attempt_part: str, open_states: frozenset[str]) -> Transaction:
    """The chunk, if its number is free, it follows its predecessor and the attempt is open."""

    def out_of_order(current: Item | None) -> Exception:
        ends = "is missing" if current is None else f"ends at byte {current.get('end')}"
        return Conflict(
            f"live log chunk {chunk.sequence} starts at byte {chunk.offset}, but chunk "
            f"{chunk.sequence - 1} {ends}"
        )

    def closed(current: Item | None) -> Exception:
        state = current.get("state") if current else "missing"
        return Conflict(f"the {chunk.phase} attempt of run {chunk.run_id} is {state}, not running")

    item = _item(chunk)
    writes = Transaction().put_new(item, on_refused=lambda _: ChunkTaken(chunk.sequence))
    writes.check(
        RunPartItem,
        run_part_key(chunk.run_id, attempt_part),
        RunPartItem.state.is_in(*sorted(open_states)),
        closed,
    )
    if chunk.sequence > 0:
        writes.check(
            LogChunkItem,
            log_chunk_key(chunk.run_id, chunk.attempt_id, chunk.sequence - 1),
            LogChunkItem.end == chunk.offset,
            out_of_order,
        )
    return writes


class DynamoLogChunks:
    """``LogChunkStore`` on the table (``services.repositories.operations``); its
    writes are transactions."""

    def get(self, run_id: str, attempt_id: str, sequence: int) -> LogChunk | None:
        return get(run_id, attempt_id, sequence)

    def of_attempt(self, run_id: str, attempt_id: str) -> list[LogChunk]:
        return of_attempt(run_id, attempt_id)

    def put(self, chunk: LogChunk, attempt_part: str, open_states: frozenset[str]) -> Transaction:
        return put(chunk, attempt_part, open_states)
