"""Costs of moto that are moto's, not AWS's, removed without changing a reply.

Profiling the embedded stack (``benchmarks.run_overhead``) showed most of its CPU
in moto's own machinery rather than in the work a request asks for:

- **Replies.** moto 5.2 builds every DynamoDB and DynamoDB Streams reply by walking
  the operation's output shape member by member, through a generic attribute
  picker: about half of moto's time, for replies that are already plain JSON in the
  wire format (items are ``{"S": ...}`` maps). The data-plane replies are written
  with ``json.dumps`` instead, converting the three things the shape walk converts
  (bytes to base64, datetimes to epoch seconds, absent values dropped).
  ``check_replies`` turns on a comparison with moto's own serializer for every
  reply; the test suite runs a workload under it, so a moto upgrade that changes a
  reply fails a test instead of changing behaviour.
- **Dispatch.** moto's HTTP server lists its own package directory (two hundred
  ``isdir`` calls) on every request to tell whether a host names a module. The
  list never changes while the process runs, so it is read once.
- **Comparisons.** Every key comparison of a ``Query``'s sort and every condition
  converts both values through a chain of five type tests; strings, binaries and
  booleans (nearly all of the table's keys) are their own value, and a number is its
  ``Decimal``, so those are answered first.
- **Queries.** A ``Query`` on the table's own key lists and sorts *every* item of the
  table, then keeps its partition's: each costs as much as the whole table (a queue's
  hand-off grew with the number of runs stored). While such a query runs, its table
  lists only the stretch of that partition moto's loop would look at, in the same
  order (``moto_query_window``: a queue's head is one item, however long the queue).
  With replies checked, each such query is also answered by moto's own path and the
  two compared.
- **Index queries.** A ``Query`` of the global index does the same with the whole
  table (lists and sorts every item, keeps the index partition's): each table keeps
  its index partitions live through every write, and a query's table lists only the
  stretch of its index partition moto's loop would look at (``moto_index_window``: a
  workspace's newest runs are a page, however many runs the table holds). With
  replies checked, each is also answered by moto's own path and the two compared.
- **Expressions.** Every write parses its condition's text and its update
  expression's text afresh (an update in a transaction twice: once to check its
  names, once to apply it), some 5-10 ms of a status move's transaction. What the
  parse yields depends on the text alone and is only read afterwards (a condition's
  tokens are immutable tuples, consumed from a fresh queue; an update's tree is
  copied by its validator before names, values and the item are put into it), so
  each text is parsed once. A text that does not parse raises every time, as before.
- **Step Functions.** moto parses the state machine's ASL (an ANTLR grammar) and
  builds its evaluation components again for every execution (tens of ms), and
  compiles each JSONPath (a parser built afresh, ~2 ms) on every use. Components
  keep an execution's values in that execution's environment, never in themselves
  (their one lazily drawn attribute, the key of their slot in an execution's heap,
  is drawn when the program is built), and a compiled path is only read: so the
  program is built once per definition and each path compiled once. Every
  workflow test runs on them, concurrent executions included.

Each speedup is installed once per process and only in the embedded stack and the
test suite; none exists in a deployment, which talks to AWS.
"""

from __future__ import annotations

import base64
import functools
import json
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

_GUARD = threading.Lock()
_INSTALLED: set[str] = set()
# Data-plane actions whose replies are plain JSON once their values are converted.
_DYNAMODB_ACTIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "TransactGetItems",
    }
)
_STREAMS_ACTIONS = frozenset({"GetRecords", "GetShardIterator"})
_CONTENT_TYPE = "application/x-amz-json-1.0"


class ReplyMismatch(AssertionError):
    """A fast reply differs from moto's own (raised only while replies are checked)."""


class _Checking:
    enabled = False


def install() -> None:
    """Install every speedup (idempotent)."""
    fast_replies()
    cached_module_list()
    cached_asl_trees()
    cached_json_paths()
    scalar_values_first()
    partition_queries()
    parsed_expressions_kept()


def check_replies(enabled: bool) -> None:
    """Compare every fast reply with moto's own serializer (for tests)."""
    _Checking.enabled = enabled


def fast_replies() -> None:
    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoHandler, DynamoResult
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    plain_results = (ActionResult, DynamoResult)
    for name, handler, actions in (
        ("dynamodb", DynamoHandler, _DYNAMODB_ACTIONS),
        ("dynamodbstreams", DynamoDBStreamsHandler, _STREAMS_ACTIONS),
    ):
        if _claim(f"replies:{name}"):
            _patch_serialized(handler, actions, plain_results)


def _patch_serialized(
    handler: type[Any], actions: frozenset[str], plain_results: tuple[type[Any], ...]
) -> None:
    original: Callable[[Any, Any], tuple[int, dict[str, str], str]] = handler.serialized

    @functools.wraps(original)
    def serialized(self: Any, action_result: Any) -> tuple[int, dict[str, str], str]:
        result = action_result.result
        action = self._get_action()
        if (
            type(action_result) not in plain_results
            or not isinstance(result, dict)
            or action not in actions
        ):
            return original(self, action_result)
        members = _output_members(self.boto3_service_name, action)
        body = json.dumps(_wire({key: value for key, value in result.items() if key in members}))
        headers = {"Content-Type": _CONTENT_TYPE}
        headers.update(self.response_headers)
        if _Checking.enabled:
            _compare(original(self, action_result), (200, headers, body), action)
        return 200, headers, body

    handler.serialized = serialized


@functools.cache
def _output_members(service: str, action: str) -> frozenset[str]:
    """The reply's top-level fields: moto's results carry a few more (internal
    counters) that its serializer leaves out, as the output shape has no place for them."""
    from moto.core.utils import get_service_model

    shape = get_service_model(service).operation_model(action).output_shape
    return frozenset(shape.members) if shape is not None else frozenset()


def _wire(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _wire(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_wire(item) for item in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        from moto.core.serialize import TimestampSerializer

        return TimestampSerializer._timestamp_unixtimestamp(value)
    return value


def _compare(
    expected: tuple[int, dict[str, str], str], actual: tuple[int, dict[str, str], str], action: str
) -> None:
    status, headers, body = expected
    if (status, headers.get("Content-Type")) != (actual[0], actual[1]["Content-Type"]):
        raise ReplyMismatch(f"{action}: status or content type differs from moto's")
    if json.loads(body) != json.loads(actual[2]):
        raise ReplyMismatch(f"{action}: body differs from moto's\n{body}\n{actual[2]}")


def cached_module_list() -> None:
    if not _claim("modules"):
        return
    import moto.backends as backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def cached_asl_trees() -> None:
    if not _claim("asl"):
        return
    from moto.stepfunctions.parser.asl.parse import asl_parser

    parser = asl_parser.AmazonStateLanguageParser
    original: Callable[[str], tuple[Any, Any]] = parser.parse

    @functools.lru_cache(maxsize=16)
    def parse(definition: str) -> tuple[Any, Any]:
        program, tree = original(definition)
        # Assigned now, once: each execution files its retry counts under these keys
        # in its own heap, and a key drawn lazily by two first executions at once
        # could differ between them.
        for component in _eval_components(program):
            _ = component.heap_key
        return program, tree

    parser.parse = staticmethod(parse)  # type: ignore[method-assign]


def _eval_components(root: Any) -> list[Any]:
    """Every evaluation component reachable from ``root`` (a program)."""
    from moto.stepfunctions.parser.asl.component.component import Component
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    found: list[Any] = []
    seen: set[int] = set()
    pending = [root]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, EvalComponent):
            found.append(item)
        if isinstance(item, Component):
            pending.extend(vars(item).values())
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return found


def cached_json_paths() -> None:
    """The interpreter compiles each JSONPath (a parser built afresh each time, ~2 ms)
    on every use; a compiled path is only read, so each is compiled once."""
    if not _claim("jsonpath"):
        return
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    for module in (json_path, result_path):
        module.parse = functools.lru_cache(maxsize=256)(getattr(module, "parse"))  # type: ignore[attr-defined]  # noqa: B009


def parsed_expressions_kept() -> None:
    if not _claim("expressions"):
        return
    from collections import deque

    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing import expressions

    updates: Any = getattr(expressions, "UpdateExpressionParser")  # noqa: B009 (untyped)
    updates.make = staticmethod(functools.lru_cache(maxsize=512)(updates.make))

    lex = ConditionExpressionParser._lex_condition_expression

    @functools.lru_cache(maxsize=512)
    def tokens(expression: str) -> tuple[Any, ...]:
        return tuple(lex(ConditionExpressionParser(expression, None, None)))

    def lexed(self: Any) -> deque[Any]:
        return deque(tokens(self.condition_expression))

    ConditionExpressionParser._lex_condition_expression = lexed  # type: ignore[method-assign]


def scalar_values_first() -> None:
    if not _claim("values"):
        return
    from decimal import Decimal

    from moto.dynamodb.models.dynamo_type import DynamoType

    general = DynamoType.cast_value.fget  # type: ignore[attr-defined]

    def cast_value(self: Any) -> Any:
        kind = self.type
        if kind in _OWN_VALUE:
            return self.value
        if kind == "N":
            return Decimal(self.value)
        return general(self)

    DynamoType.cast_value = property(cast_value)  # type: ignore[method-assign, assignment]


_QUERYING = threading.local()


def partition_queries() -> None:
    if not _claim("queries"):
        return
    import inspect

    from moto.dynamodb.models.table import Table

    from runplane.local import moto_index_window, moto_query_window

    moto_query_window.install()
    moto_index_window.install()
    every_item: Callable[[Any], list[Any]] = Table.all_items
    query: Callable[..., Any] = Table.query
    signature = inspect.signature(query)

    def all_items(self: Any) -> list[Any]:
        scope = getattr(_QUERYING, "scope", None)
        if scope is None or scope[0] is not self or not self.range_key_attr:
            return every_item(self)
        window: list[Any] | None = scope[2]
        if window is not None:
            return window
        partition = self.items.get(scope[1]) or {}
        return sorted(partition.values(), key=lambda item: item.range_key)

    def partition_query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        named = signature.bind(self, hash_key, *args, **kwargs).arguments
        if named.get("index_name"):
            window = moto_index_window.stretch(self, named)
            if window is None:
                return query(self, hash_key, *args, **kwargs)
        elif hash_key is None:
            return query(self, hash_key, *args, **kwargs)
        else:
            window = moto_query_window.stretch(self, hash_key, named)
        _QUERYING.scope = (self, hash_key, window)
        try:
            found = query(self, hash_key, *args, **kwargs)
        finally:
            _QUERYING.scope = None
        if _Checking.enabled:
            _compare_queries(query(self, hash_key, *args, **kwargs), found)
        return found

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.query = partition_query  # type: ignore[method-assign]


def _compare_queries(expected: Any, actual: Any) -> None:
    def plain(found: Any) -> Any:
        items, scanned, last_key = found
        last = {name: value.to_json() for name, value in (last_key or {}).items()}
        return [item.to_json() for item in items], scanned, None if last_key is None else last

    if plain(expected) != plain(actual):
        raise ReplyMismatch(f"Query: differs from moto's\n{plain(expected)}\n{plain(actual)}")


# Attribute types whose comparable value is the value itself.
_OWN_VALUE = frozenset({"S", "B", "BOOL"})


def _claim(name: str) -> bool:
    with _GUARD:
        if name in _INSTALLED:
            return False
        _INSTALLED.add(name)
        return True
