"""A ``Query`` on a table's own key reads only the items it can return.

moto answers such a query by sorting the whole partition and walking it from the
start until its ``Limit``: the head of a queue of N waiters cost N log N comparisons
and N size computations, where DynamoDB reads one item. Here each partition keeps its
range keys sorted (built on its first query, then kept up to date by every write:
``put_item``, ``delete_item``, a transaction and its rollback all change the
partition's dict, which does the bookkeeping), and a query hands moto's own loop only
the stretch of the partition that loop would look at: the items after
``ExclusiveStartKey`` that meet the key condition, up to ``Limit``, and the one after
them that tells moto a further page exists.

moto's loop, its comparisons, its ``Limit`` (which counts items meeting the key
condition, before any ``FilterExpression``), its projections and its page keys run
unchanged on that stretch, so every reply is moto's. One quirk of moto's is kept too:
it stops a page when the next item *in the partition* would take the page over 1 MB,
even an item the key condition excludes; when the items found are big enough for
that to happen, the stretch runs on to the end of the partition.

Anything else (an index, legacy ``QueryFilter``, an unknown operator, a value of
another type than the key) is left to moto's own path.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# moto's own bounds (moto.dynamodb.models.table and dynamo_type): a page is at most
# RESULT_SIZE_LIMIT bytes, an item at most _ITEM_SIZE_LIMIT.
_ITEM_SIZE_LIMIT = 405_000
# A key condition's comparison, as moto names it, by each spelling a request may use.
OPERATORS = {
    "=": "EQ",
    "EQ": "EQ",
    "<": "LT",
    "LT": "LT",
    "<=": "LE",
    "LE": "LE",
    ">": "GT",
    "GT": "GT",
    ">=": "GE",
    "GE": "GE",
    "BETWEEN": "BETWEEN",
    "BEGINS_WITH": "BEGINS_WITH",
}
_PREFIX_TYPES = frozenset({"S", "B"})


class SortedPartition(dict[Any, Any]):
    """A partition's items by range key, with the keys also kept in moto's sort order."""

    __slots__ = ("_keys",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._keys: list[Any] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies (moto deep-copies tables for backups) rebuild their order lazily.
        return type(self), (dict(self),)

    def sorted_keys(self) -> list[Any]:
        if self._keys is None:
            self._keys = sorted(self)
        return self._keys

    def __setitem__(self, key: Any, value: Any) -> None:
        new = self._keys is not None and key not in self
        super().__setitem__(key, value)
        if new:
            self._insert(key)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._remove(key)

    def pop(self, key: Any, *default: Any) -> Any:
        if key not in self:
            return super().pop(key, *default)
        value = super().pop(key)
        self._remove(key)
        return value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    # Writes moto does not make to a partition: they only forget the order.
    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._keys = None

    def __ior__(self, other: Any) -> SortedPartition:  # type: ignore[misc]
        self.update(other)
        return self

    def popitem(self) -> tuple[Any, Any]:
        self._keys = None
        return super().popitem()

    def clear(self) -> None:
        super().clear()
        self._keys = None

    def _insert(self, key: Any) -> None:
        keys = self._keys
        if keys is None:
            return
        try:
            bisect.insort(keys, key)
        except TypeError:  # a key moto could not sort either: its path will say so
            self._keys = None

    def _remove(self, key: Any) -> None:
        keys = self._keys
        if keys is None:
            return
        try:
            at = bisect.bisect_left(keys, key)
        except TypeError:
            self._keys = None
            return
        if at < len(keys) and keys[at] == key:
            del keys[at]
        else:
            self._keys = None


def install() -> None:
    """New tables keep their partitions sorted (moto's ``Table.__init__`` sets ``items``)."""
    from moto.dynamodb.models.table import Table

    init: Callable[..., None] = Table.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if self.range_key_attr and not self.items:
            self.items = defaultdict(SortedPartition)

    Table.__init__ = __init__  # type: ignore[method-assign]


def stretch(table: Any, hash_key: Any, query: dict[str, Any]) -> list[Any] | None:
    """The items moto's query loop would look at, in key order, or None to leave the
    query to moto (``query``: the arguments of moto's ``Table.query`` by name)."""
    if query.get("index_name") or query.get("filter_kwargs") or not table.range_key_attr:
        return None
    partition = table.items.get(hash_key)
    if partition is None:
        return []
    if not isinstance(partition, SortedPartition):
        return None
    try:
        return _stretch(table, partition, query)
    except (TypeError, AttributeError):  # values moto cannot compare: its path says so
        return None


def _stretch(table: Any, partition: SortedPartition, query: dict[str, Any]) -> list[Any] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    forward = query.get("scan_index_forward", True)
    limit = query.get("limit")
    if not isinstance(forward, bool) or not (
        limit is None or (isinstance(limit, int) and limit >= 1)
    ):
        return None
    keys = partition.sorted_keys()
    bounds = _key_condition(table, keys, query)
    if bounds is None:
        return None
    lo, hi = bounds
    start_key = query.get("exclusive_start_key")
    if start_key is not None:
        hash_value = start_key.get(table.hash_key_attr)
        range_value = start_key.get(table.range_key_attr)
        if hash_value is None or range_value is None:
            return None
        after = DynamoType(range_value)
        if DynamoType(hash_value) != query["hash_key"] or after.type != table.range_key_type:
            return None
        if forward:
            lo = max(lo, bisect.bisect_right(keys, after))
        else:
            hi = min(hi, bisect.bisect_left(keys, after))
    # In the loop's order: the first item it considers, where the matches end, and
    # how many items follow them.
    if forward:
        first, end = lo, max(lo, hi)
        matches, following = end - first, len(keys) - end
    else:
        first, end = hi, min(lo, hi)
        matches, following = first - end, end
    if limit is not None and matches >= limit:
        span = limit + 1
    elif following and may_fill_a_page(lambda at: partition[keys[at]], first, matches, forward):
        span = matches + following
    else:
        span = matches
    window = keys[first : first + span] if forward else keys[max(0, first - span) : first]
    return [partition[key] for key in window]


def _key_condition(table: Any, keys: list[Any], query: dict[str, Any]) -> tuple[int, int] | None:
    """The range of ``keys`` (as indexes lo, hi) the range key condition selects."""
    comparison = query.get("range_comparison")
    if not comparison:
        return 0, len(keys)
    conditions = query.get("range_key_conditions") or []
    if len(conditions) > 1 or (conditions and conditions[0][0] != table.range_key_attr):
        return None
    operator = OPERATORS.get(str(comparison).upper())
    values = list(query.get("range_objs") or [])
    arity = 2 if operator == "BETWEEN" else 1
    if operator is None or len(values) != arity:
        return None
    if any(value.type != table.range_key_type for value in values):
        return None
    low = bisect.bisect_left
    high = bisect.bisect_right
    value = values[0]
    if operator == "EQ":
        return low(keys, value), high(keys, value)
    if operator == "LT":
        return 0, low(keys, value)
    if operator == "LE":
        return 0, high(keys, value)
    if operator == "GT":
        return high(keys, value), len(keys)
    if operator == "GE":
        return low(keys, value), len(keys)
    if operator == "BETWEEN":
        start = low(keys, value)
        return start, max(start, high(keys, values[1]))
    if table.range_key_type not in _PREFIX_TYPES:
        return None
    # Keys starting with a prefix sort together, from the prefix itself on.
    start = low(keys, value)
    outside = low(keys, True, lo=start, key=lambda key: not key.compare("BEGINS_WITH", values))
    return start, outside


def may_fill_a_page(item_at: Callable[[int], Any], first: int, matches: int, forward: bool) -> bool:
    """Whether an item after the matches could take moto's page over its size limit
    (``item_at``: the item at a place in the partition's order; the matches run from
    ``first`` on, or down from ``first`` when reading backwards)."""
    from moto.dynamodb.models.table import RESULT_SIZE_LIMIT

    room = RESULT_SIZE_LIMIT - _ITEM_SIZE_LIMIT
    found = 0
    for offset in range(matches):
        found += item_at(first + offset if forward else first - 1 - offset).size()
        if found > room:
            return True
    return False
