"""Items read with a request's authentication, served to that request's first reads.

A runner's call authenticates with one strongly consistent batch read (its session
and attempt); the same request adds the items the call will read anyway (its run,
its workspace), whose keys its session's binding names. The authorizer hands those
raw items to the application with the principal, and the application's first read
of each takes it from here instead of asking DynamoDB again: it is the same
consistent read, made a few milliseconds earlier in the same request.

Two rules keep that from ever serving a stale item: each item is served at most
once (a second read of it asks DynamoDB), and every item is forgotten as soon as
the request commits (or tries to commit) a write, so no read after a write in the
request can see what was read before it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

Key = tuple[str, str]
RawItem = dict[str, Any]

# The authorizer context key the items travel under (values there must be strings).
CONTEXT_KEY = "prefetched"

_served: ContextVar[dict[Key, RawItem] | None] = ContextVar("prefetched", default=None)


def take(key: Key) -> RawItem | None:
    """The prefetched raw item of ``key``, once; None if there is none (read it)."""
    return take_known(key)[1]


def take_known(key: Key) -> tuple[bool, RawItem | None]:
    """``(True, item)`` if ``key`` was read ahead, once: its raw item, or None if it was
    read and found absent; ``(False, None)`` if it was not (read it)."""
    items = _served.get()
    if not items or key not in items:
        return False, None
    # An absent item is kept as an empty one: every item has its keys.
    return True, items.pop(key) or None


def as_read(keys: Iterable[Key], found: Mapping[Key, RawItem]) -> dict[Key, RawItem]:
    """Each of ``keys`` as one read found it: its item, or an empty one where it found
    none (how an absence travels and is served)."""
    return {**{key: {} for key in keys}, **found}


def forget() -> None:
    """Drop every prefetched item: the request is writing."""
    items = _served.get()
    if items:
        items.clear()


@contextmanager
def serving(items: Mapping[Key, RawItem], absent: Iterable[Key] = ()) -> Iterator[None]:
    """Serve ``items``, and the absence of ``absent``, to the reads made inside the block
    (this request's). An absence is served to a batch read and to the single reads that
    ask with ``take_known`` (an empty item stands for it, as an authentication's read
    carries one); a single read that asks with ``take`` reads it."""
    outer = _served.get()
    served = {**(outer or {}), **{key: {} for key in absent}, **items}
    token = _served.set(served)
    try:
        yield
    finally:
        _served.reset(token)
        if outer is not None:
            # Inside an enclosing block: what this one served or forgot (by writing)
            # is gone for that one too, so it never serves an item older than a write.
            for key in [key for key in outer if key not in served]:
                del outer[key]


def encode(items: Mapping[Key, RawItem]) -> dict[str, str]:
    """The items as an authorizer context entry (empty when there are none).

    A top-level binary attribute (an artifact's wrapped data key, itself ciphertext
    only KMS can open) travels as base64; an item with binary anywhere else does not
    travel, and the call reads it."""
    carried = []
    for (pk, sk), raw in items.items():
        try:
            carried.append(json.dumps([pk, sk, _text(raw)]))
        except TypeError:
            continue
    return {CONTEXT_KEY: "[" + ",".join(carried) + "]"} if carried else {}


def decode(context: Mapping[str, Any] | None) -> dict[Key, RawItem]:
    """The items an authorizer context carries (none if it carries none)."""
    encoded = (context or {}).get(CONTEXT_KEY)
    if not encoded:
        return {}
    return {(pk, sk): _binary(raw) for pk, sk, raw in json.loads(encoded)}


def _text(raw: RawItem) -> RawItem:
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
