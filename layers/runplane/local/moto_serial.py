"""Make each moto request atomic, as each AWS request is.

moto's backends are not thread-safe: concurrent conditional writes to one
DynamoDB item can both "win" or crash mid-iteration. Serializing request
handling per service restores DynamoDB's per-request atomicity while races
*between* requests stay real. One lock per service, never one across
services: a Step Functions request runs Lambda handlers that call DynamoDB.

moto also remembers every model object it ever built (``instances_tracked``, for
its own reset), and each DynamoDB transaction deep-copies every table to roll
back with: kept forever, those copies grew the embedded stack by megabytes per
run. After each request the remembered objects are dropped; the backends keep
what is live.

Copying every table on every transaction also makes each one cost as much as
the whole table (most of the embedded stack's CPU once a few hundred runs
exist). Since requests are serialized, a transaction here saves only the items
it names and puts exactly those back if it is cancelled: the same all-or-nothing
outcome, at the cost of the items it touches. moto applies a transaction's writes
one by one, and each appends a stream record: a cancelled transaction also drops
the records it appended, as DynamoDB's stream never shows a cancelled write.

DynamoDB Streams reads the DynamoDB backend's shards, so it is served under the
DynamoDB lock (it calls no other service); its requests are counted apart.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from runplane.local import moto_index_window

_PATCHED: dict[str, threading.RLock] = {}
_GUARD = threading.Lock()
# Requests served per service and action, for benchmarks (cost per run).
REQUEST_COUNTS: dict[str, Counter[str]] = {}
# Told after every DynamoDB write is served (the stream relay wakes on it).
WRITE_LISTENERS: list[Callable[[], None]] = []
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


def _handler_class(service: str) -> type[Any]:
    if service == "dynamodb":
        from moto.dynamodb.responses import DynamoHandler

        return DynamoHandler  # type: ignore[no-any-return, unused-ignore]
    if service == "dynamodbstreams":
        from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

        return DynamoDBStreamsHandler  # type: ignore[no-any-return, unused-ignore]
    if service == "sqs":
        # The embedded stack queues in process; tests that run SQS consumers on
        # threads (tests/integration/test_delivery_slots.py) need its atomicity.
        from moto.sqs.responses import SQSResponse

        return SQSResponse
    raise ValueError(f"no request serialization is defined for {service}")


def serialize_requests(service: str) -> threading.RLock:
    """Serialize ``service``'s request handling (idempotent); returns its lock."""
    shared = serialize_requests("dynamodb") if service == "dynamodbstreams" else None
    with _GUARD:
        if service in _PATCHED:
            return _PATCHED[service]
        handler = _handler_class(service)
        lock = shared or threading.RLock()
        original: Callable[..., Any] = handler.call_action

        counts: Counter[str] = REQUEST_COUNTS.setdefault(service, Counter())

        @functools.wraps(original)
        def call_action(self: Any) -> Any:
            action = str(self._get_action())
            with lock:
                counts[action] += 1
                try:
                    return original(self)
                finally:
                    forget_tracked_instances()
                    if action in _WRITES:
                        for listener in list(WRITE_LISTENERS):
                            listener()

        handler.call_action = call_action
        _roll_back_only_touched_items()
        _PATCHED[service] = lock
        return lock


class _TablesKept:
    """Stands in for the ``copy`` module inside moto's DynamoDB backend: while a
    transaction runs, its whole-table backup copies are skipped (see below)."""

    skipping = False

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        from moto.dynamodb.models.table import Table

        if self.skipping and isinstance(value, Table):
            return value
        return copy.deepcopy(value, memo)


def _roll_back_only_touched_items() -> None:
    import moto.dynamodb.models as backend_module
    from moto.dynamodb.models import DynamoDBBackend

    if isinstance(getattr(backend_module, "copy", None), _TablesKept):
        return
    kept = _TablesKept()
    setattr(backend_module, "copy", kept)  # noqa: B010 (moto does not export it)
    original: Callable[..., Any] = DynamoDBBackend.transact_write_items

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = [_saved_item(self, entry) for entry in transact_items]
        streams = _stream_ends(self, transact_items)
        kept.skipping = True
        try:
            original(self, transact_items)
        except BaseException:
            for found in reversed(saved):
                if found is not None:
                    _put_back(*found)
            for shard, end in streams:
                del shard.items[max(0, end - shard.starting_sequence_number) :]
            raise
        finally:
            kept.skipping = False

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def _stream_ends(backend: Any, transact_items: list[dict[str, Any]]) -> list[tuple[Any, int]]:
    """Each touched table's stream shard, with the sequence number its next record gets."""
    ends: dict[int, tuple[Any, int]] = {}
    for entry in transact_items:
        operation = next(iter(entry.values()), None)
        if not isinstance(operation, dict):
            continue
        table = backend.tables.get(operation.get("TableName"))
        shard = getattr(table, "stream_shard", None)
        if shard is not None:
            ends[id(shard)] = (shard, shard.starting_sequence_number + len(shard.items))
    return list(ends.values())


def _saved_item(backend: Any, entry: dict[str, Any]) -> tuple[Any, Any, Any, Any] | None:
    """The table, key and a copy of the item (None if absent) one transaction entry names."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    operation = next(iter(entry.values()), None)
    if not isinstance(operation, dict):
        return None
    table = backend.tables.get(operation.get("TableName"))
    attributes = operation.get("Key") or operation.get("Item") or {}
    if table is None or table.hash_key_attr not in attributes:
        return None
    hash_value = DynamoType(attributes[table.hash_key_attr])
    range_value = None
    if table.range_key_attr is not None:
        if table.range_key_attr not in attributes:
            return None
        range_value = DynamoType(attributes[table.range_key_attr])
    return table, hash_value, range_value, copy.deepcopy(table.get_item(hash_value, range_value))


def _put_back(table: Any, hash_value: Any, range_value: Any, item: Any) -> None:
    if item is None:
        table.delete_item(hash_value, range_value)
    elif range_value is None:
        table.items[hash_value] = item
    else:
        table.items[hash_value][range_value] = item
        # The restored copy takes the place of the item the index has filed.
        moto_index_window.refile(table, hash_value, range_value)


def forget_tracked_instances() -> None:
    """Drop moto's record of every model object it built; live ones stay in backends."""
    from moto.core.model_instances import model_data

    for models in list(model_data.values()):
        for model in list(models.values()):
            tracked = getattr(model, "instances_tracked", None)
            if tracked:
                tracked.clear()
