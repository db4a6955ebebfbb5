"""A ``Query`` of a global index reads only the items it can return.

moto answers an index query by listing and sorting *every* item of the table, keeping
those of the index partition asked for, sorting them in the index's order and walking
them from the start: each query costs as much as the whole table (seconds with a
million items), where DynamoDB reads the index partition from the first item it
returns. Here each table keeps its index partitions live: every item that carries an
index's keys is filed under its partition with its place in moto's order (index sort
key, then table hash key, then table range key). The index is built on the table's
first index query (one walk) and then kept by every write: ``Table.put_item`` (a put,
a batch, a transaction's put, an update that creates its item), ``Table.delete_item``,
the backend's ``update_item`` (which changes an item in place, index keys included),
and a cancelled transaction's restored items (``moto_serial``). A table whose items
are replaced wholesale (a restore) is indexed again on its next query.

A query then hands moto's own loop the stretch of the partition that loop would look
at: the items after ``ExclusiveStartKey`` that meet the range key condition, up to
``Limit``, and the one after them that tells moto a further page exists (or the rest
of the partition, when the items found could bring moto's 1 MB page check into play,
the quirk ``moto_query_window`` describes). moto's hash key filter, sort, limit,
projection, filter expression and page keys run unchanged on it, so every reply is
moto's; with replies checked (``moto_speedups.check_replies``) each index query is also
answered by moto's own path and the two compared.

Anything else (legacy ``QueryFilter``, an index without a range key, key values of
more than one type in a partition, an unknown operator) is left to moto's own path.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runplane.local.moto_query_window import OPERATORS, may_fill_a_page

# The attribute under which a table keeps its index partitions (copied with the table).
_STATE = "_runplane_index_partitions"

# An entry: (index range value, table hash value, table range value) as moto compares
# them, then the item's table keys (DynamoType) to find it. The first three are unique
# per item, so the keys are never compared.
Entry = tuple[Any, Any, Any, Any, Any]


def _sort_key(entry: Entry) -> Any:
    return entry[0]


def _place(entry: Entry) -> tuple[Any, Any, Any]:
    return entry[0], entry[1], entry[2]


@dataclass
class _Partition:
    entries: list[Entry] = field(default_factory=list)
    # The types of the index range values: moto compares values, so one type only.
    types: Counter[str] = field(default_factory=Counter)


@dataclass
class _Index:
    hash_attr: str
    range_attr: str
    partitions: dict[Any, _Partition] = field(default_factory=dict)
    # Each filed item's partition, entry and index range type, by its table keys.
    filed: dict[tuple[Any, Any], tuple[Any, Entry, str]] = field(default_factory=dict)

    def refile(self, key: tuple[Any, Any], item: Any) -> None:
        """File the item now under ``key`` (None: none) where it belongs."""
        old = self.filed.pop(key, None)
        if old is not None:
            hash_value, entry, range_type = old
            partition = self.partitions[hash_value]
            at = bisect.bisect_left(partition.entries, _place(entry), key=_place)
            if at >= len(partition.entries) or partition.entries[at] is not entry:
                raise LookupError("an index entry went missing")
            del partition.entries[at]
            partition.types[range_type] -= 1
            if not partition.types[range_type]:
                del partition.types[range_type]
            if not partition.entries:
                del self.partitions[hash_value]
        if item is None:
            return
        hash_value = item.attrs.get(self.hash_attr)
        range_value = item.attrs.get(self.range_attr)
        if hash_value is None or range_value is None:
            return
        entry = (range_value.cast_value, key[0].cast_value, key[1].cast_value, key[0], key[1])
        partition = self.partitions.setdefault(hash_value, _Partition())
        bisect.insort(partition.entries, entry, key=_place)
        partition.types[range_value.type] += 1
        self.filed[key] = (hash_value, entry, range_value.type)


@dataclass
class _Indexes:
    """A table's index partitions, for the ``items`` they were built from."""

    items: Any
    by_name: dict[str, _Index]


def install() -> None:
    """Keep every indexed table's partitions up to date through moto's writes."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    put: Callable[..., Any] = Table.put_item
    delete: Callable[..., Any] = Table.delete_item
    update: Callable[..., Any] = DynamoDBBackend.update_item

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = put(self, *args, **kwargs)
        refile(self, item.hash_key, item.range_key)
        return item

    def delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        try:
            return delete(self, hash_key, range_key)
        finally:
            refile(self, hash_key, range_key)

    def update_item(
        self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        try:
            return update(self, table_name, key, *args, **kwargs)
        finally:
            # Even a refused or failed update: it may have changed the item in place.
            _refile_updated(self, table_name, key)

    Table.put_item = put_item  # type: ignore[method-assign]
    Table.delete_item = delete_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


def _refile_updated(backend: Any, table_name: str, key: dict[str, Any]) -> None:
    from moto.dynamodb.exceptions import MockValidationException, ResourceNotFoundException

    try:
        table = backend.get_table(table_name)
        hash_value, range_value = backend.get_keys_value(table, key)
    except (ResourceNotFoundException, MockValidationException, KeyError, TypeError):
        return  # an unknown table or a bad key: nothing was written
    refile(table, hash_value, range_value)


def refile(table: Any, hash_value: Any, range_value: Any) -> None:
    """After a write to one item: file it again in each of the table's indexes."""
    indexes: _Indexes | None = table.__dict__.get(_STATE)
    if indexes is None or range_value is None:
        return
    if indexes.items is not table.items:
        forget(table)
        return
    partition = table.items.get(hash_value)
    item = None if partition is None else partition.get(range_value)
    try:
        for index in indexes.by_name.values():
            index.refile((hash_value, range_value), item)
    except (TypeError, LookupError):  # values moto cannot order either: its path says so
        forget(table)


def forget(table: Any) -> None:
    """Drop a table's index partitions (built again on its next index query)."""
    table.__dict__.pop(_STATE, None)


def _indexes(table: Any) -> _Indexes | None:
    indexes: _Indexes | None = table.__dict__.get(_STATE)
    if indexes is not None and indexes.items is table.items:
        return indexes
    by_name = {}
    for index in table.global_indexes or ():
        hashes = [key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH"]
        ranges = [key["AttributeName"] for key in index.schema if key["KeyType"] == "RANGE"]
        if len(hashes) == 1 and len(ranges) == 1:
            by_name[index.name] = _Index(hashes[0], ranges[0])
    indexes = _Indexes(table.items, by_name)
    try:
        for partition in table.items.values():
            for item in partition.values():
                for index in by_name.values():
                    index.refile((item.hash_key, item.range_key), item)
    except (TypeError, LookupError):
        return None
    table.__dict__[_STATE] = indexes
    return indexes


def stretch(table: Any, query: dict[str, Any]) -> list[Any] | None:
    """The items moto's loop would look at for an index query, in the index's order,
    or None to leave the query to moto (``query``: moto's ``Table.query`` arguments
    by name)."""
    if query.get("filter_kwargs") or not table.range_key_attr:
        return None
    if not isinstance(table.items, dict):
        return None
    indexes = _indexes(table)
    index = None if indexes is None else indexes.by_name.get(str(query.get("index_name")))
    conditions = query.get("hash_key_conditions") or []
    if index is None or len(conditions) != 1 or conditions[0][0] != index.hash_attr:
        return None
    partition = index.partitions.get(conditions[0][1])
    if partition is None:
        return []
    if len(partition.types) != 1:
        return None
    try:
        return _stretch(table, index, conditions[0][1], partition, query)
    except (TypeError, AttributeError, KeyError):  # moto's path raises or answers
        return None


def _stretch(
    table: Any, index: _Index, hash_value: Any, partition: _Partition, query: dict[str, Any]
) -> list[Any] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    forward = query.get("scan_index_forward", True)
    limit = query.get("limit")
    if not isinstance(forward, bool) or not (
        limit is None or (isinstance(limit, int) and limit >= 1)
    ):
        return None
    entries = partition.entries
    (range_type,) = partition.types
    bounds = _key_condition(index, range_type, entries, query)
    if bounds is None:
        return None
    lo, hi = bounds
    start_key = query.get("exclusive_start_key")
    if start_key is not None:
        names = (index.hash_attr, index.range_attr, table.hash_key_attr, table.range_key_attr)
        if any(name not in start_key for name in names):
            return None
        start_hash, start_range, start_table_hash, start_table_range = (
            DynamoType(start_key[name]) for name in names
        )
        if (
            start_hash != hash_value
            or start_range.type != range_type
            or start_table_hash.type != table.hash_key_type
            or start_table_range.type != table.range_key_type
        ):
            return None
        after = (
            start_range.cast_value,
            start_table_hash.cast_value,
            start_table_range.cast_value,
        )
        if forward:
            lo = max(lo, bisect.bisect_right(entries, after, key=_place))
        else:
            hi = min(hi, bisect.bisect_left(entries, after, key=_place))
    if forward:
        first, end = lo, max(lo, hi)
        matches, following = end - first, len(entries) - end
    else:
        first, end = hi, min(lo, hi)
        matches, following = first - end, end

    def item_at(at: int) -> Any:
        entry = entries[at]
        return table.items[entry[3]][entry[4]]

    if limit is not None and matches >= limit:
        span = limit + 1
    elif following and may_fill_a_page(item_at, first, matches, forward):
        span = matches + following
    else:
        span = matches
    window = (
        range(first, min(len(entries), first + span))
        if forward
        else range(max(0, first - span), first)
    )
    return [item_at(at) for at in window]


def _key_condition(
    index: _Index, range_type: str, entries: list[Entry], query: dict[str, Any]
) -> tuple[int, int] | None:
    """The stretch of ``entries`` (as indexes lo, hi) the range key condition selects."""
    comparison = query.get("range_comparison")
    if not comparison:
        return 0, len(entries)
    conditions = query.get("range_key_conditions") or []
    if len(conditions) > 1 or (conditions and conditions[0][0] != index.range_attr):
        return None
    operator = OPERATORS.get(str(comparison).upper())
    objects = list(query.get("range_objs") or [])
    arity = 2 if operator == "BETWEEN" else 1
    if operator is None or len(objects) != arity:
        return None
    if any(value.type != range_type for value in objects):
        return None
    values = [value.cast_value for value in objects]
    value = values[0]

    def low(at: Any) -> int:
        return bisect.bisect_left(entries, at, key=_sort_key)

    def high(at: Any) -> int:
        return bisect.bisect_right(entries, at, key=_sort_key)

    if operator == "EQ":
        return low(value), high(value)
    if operator == "LT":
        return 0, low(value)
    if operator == "LE":
        return 0, high(value)
    if operator == "GT":
        return high(value), len(entries)
    if operator == "GE":
        return low(value), len(entries)
    if operator == "BETWEEN":
        start = low(value)
        return start, max(start, high(values[1]))
    if range_type != "S":
        return None
    # Values starting with a prefix sort together, from the prefix itself on.
    start = low(value)
    outside = bisect.bisect_left(
        entries, True, lo=start, key=lambda entry: not entry[0].startswith(value)
    )
    return start, outside
