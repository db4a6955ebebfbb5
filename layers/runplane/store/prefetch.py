"""A request's identity map: items read ahead, served to that request's first reads.

A runner's call authenticates with one strongly consistent batch read (its session
and attempt); the same request adds the items the call will read anyway (its run,
its workspace), whose keys its session's binding names. The authorizer hands that
read (a ``ReadAhead``) to the application with the principal; the handler opens the
request's ``IdentityMap`` with it (``store.request_reads``), and the application's
first read of each item takes it from there instead of asking DynamoDB again: it is
the same consistent read, made a few milliseconds earlier in the same request.

Two rules keep that from ever serving a stale item: each item is served at most
once (a second read of it asks DynamoDB), and every item is forgotten as soon as
the request commits (or tries to commit) a write, so no read after a write in the
request can see what was read before it.

This module holds the map itself, the keys of what it holds and how a read ahead
travels through the authorizer's context. A read is served only from the map it is
given (the store's reads take it as ``reads``); which map is the request's is
``store.request_reads``'s.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from runplane.domain.read_ahead import NOTHING_READ, Read, ReadAhead, ReadKind
from runplane.store.models import (
    artifact_key,
    configuration_version_key,
    drift_key,
    run_key,
    run_part_key,
    state_version_key,
    workspace_key,
)

Key = tuple[str, str]
RawItem = dict[str, Any]

# The authorizer context key the items travel under (values there must be strings).
CONTEXT_KEY = "prefetched"


class IdentityMap:
    """The items one request read ahead, by key: each served once to the request's
    first read of it (an absence too, as an empty item), all forgotten when the
    request writes."""

    def __init__(self, items: Mapping[Key, RawItem] = {}, absent: Iterable[Key] = ()) -> None:
        # An absent item is kept as an empty one: every item has its keys.
        self._items: dict[Key, RawItem] = {**{key: {} for key in absent}, **items}

    def take(self, key: Key) -> RawItem | None:
        """The raw item of ``key``, once; None if there is none (read it)."""
        return self.take_known(key)[1]

    def take_known(self, key: Key) -> tuple[bool, RawItem | None]:
        """``(True, item)`` if ``key`` was read ahead, once: its raw item, or None if it
        was read and found absent; ``(False, None)`` if it was not (read it)."""
        if key not in self._items:
            return False, None
        return True, self._items.pop(key) or None

    def forget(self) -> None:
        """Drop every item: the request is writing."""
        self._items.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @contextmanager
    def serving(self, items: Mapping[Key, RawItem], absent: Iterable[Key] = ()) -> Iterator[None]:
        """Serve ``items``, and the absence of ``absent``, to the block's reads as well.

        After the block the map serves what it served before but for what the block
        was served or forgot (by writing): never an item older than a write."""
        outer = self._items
        self._items = {**outer, **{key: {} for key in absent}, **items}
        try:
            yield
        finally:
            served, self._items = self._items, outer
            for key in [key for key in outer if key not in served]:
                del outer[key]


# -- reads by what they are -------------------------------------------------------------


def key_of(read: Read) -> Key:
    """The table key of the item ``read`` names."""
    match read.kind:
        case ReadKind.RUN:
            return run_key(read.id)
        case ReadKind.RUN_PART:
            return run_part_key(read.id, read.name)
        case ReadKind.WORKSPACE:
            return workspace_key(read.id)
        case ReadKind.STATE_VERSION:
            return state_version_key(read.id)
        case ReadKind.ARTIFACT:
            return artifact_key(read.id)
        case ReadKind.DRIFT:
            return drift_key(read.id)
        case ReadKind.CONFIGURATION_VERSION:
            return configuration_version_key(read.id)


def read_ahead(asked: Sequence[Read], found: Mapping[Key, RawItem]) -> ReadAhead:
    """What one read of ``asked`` found in ``found`` (raw items by key), by what each is."""
    return ReadAhead.of(
        {read: found[key_of(read)] for read in asked if found.get(key_of(read))}, asked
    )


def raw(ahead: ReadAhead) -> tuple[dict[Key, RawItem], list[Key]]:
    """What ``ahead`` read, as raw items by key and the keys it found absent."""
    return (
        {key_of(read): dict(item) for read, item in ahead.found.items()},
        [key_of(read) for read in ahead.absent],
    )


# -- through the authorizer's context ---------------------------------------------------


def encode(ahead: ReadAhead) -> dict[str, str]:
    """What ``ahead`` read, as an authorizer context entry (empty when it read nothing).

    A top-level binary attribute (an artifact's wrapped data key, itself ciphertext
    only KMS can open) travels as base64; an item with binary anywhere else does not
    travel, and the call reads it."""
    carried = []
    for read in sorted(ahead.reads()):
        raw = ahead.found.get(read, {})
        try:
            carried.append(json.dumps([read.kind.value, read.id, read.name, _text(raw)]))
        except TypeError:
            continue
    return {CONTEXT_KEY: "[" + ",".join(carried) + "]"} if carried else {}


def decode(context: Mapping[str, Any] | None) -> ReadAhead:
    """What an authorizer context carries (nothing read if it carries nothing)."""
    encoded = (context or {}).get(CONTEXT_KEY)
    if not encoded:
        return NOTHING_READ
    reads = {
        Read(ReadKind(kind), read_id, name): _binary(raw)
        for kind, read_id, name, raw in json.loads(encoded)
    }
    return ReadAhead.of({read: raw for read, raw in reads.items() if raw}, reads)


def _text(raw: Mapping[str, Any]) -> RawItem:
    return {
        name: {"B": base64.b64encode(value["B"]).decode("ascii")}
        if isinstance(value, dict) and isinstance(value.get("B"), bytes | bytearray)
        else value
        for name, value in raw.items()
    }


def _binary(raw: RawItem) -> RawItem:
    # In DynamoDB's attribute value format "B" is always binary.
    return {
        name: {"B": base64.b64decode(value["B"])}
        if isinstance(value, dict) and isinstance(value.get("B"), str)
        else value
        for name, value in raw.items()
    }
