"""Rego evaluation with regopy (Microsoft's rego-cpp bindings): the only module importing it.

Facts about regopy 1.5.2 this adapter is built on:

- ``Interpreter.add_module`` raises ``RegoError`` for a module that does not parse; its
  text is an S-expression of errors, ``(error <n>:<module>|<offset>|<length>
  (errormsg <n>:<message>) ...)``, lengths prefixed.
- A query returns an output whose root node is ``Results`` (defined), ``Undefined``
  (e.g. a rule or package that does not exist), or ``Error``/``ErrorSeq`` (a conflict,
  an unknown function, a builtin error in strict mode). ``Output.ok()`` is true for
  some of those errors, and the output's JSON text does not escape quotes or
  backslashes inside strings, so results are read from the node tree, never from
  ``str(output)``.
- Calls go through ``ctypes.CDLL``, which releases the GIL, so a query runs while
  other Python threads proceed; but a running query cannot be interrupted, and some
  malformed policies crash the process (a segmentation fault) rather than raise.
- Loading the input value by value costs about 2 µs per JSON value; rego-cpp's own JSON
  parser (``set_input_term``) is several times slower. Partial set rules
  (``deny contains msg if ...``) and set comprehensions cost time quadratic in the
  number of results; array comprehensions (``deny := [msg | ...]``) are linear.

Isolation, timeouts and the evaluator interface: ``runplane.adapters.rego``.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Final

import regopy  # type: ignore[import-untyped]
from regopy import Interpreter, LogLevel, NodeKind, RegoError
from regopy import rego_shared as _c

from runplane.adapters.rego_arrays import array_plan
from runplane.adapters.rego_isolation import (
    Emit,
    Record,
    compact,
    policy_record,
    shape_problem,
    short,
)
from runplane.adapters.rego_source import rule_location, unknown_function
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyDefinition, PolicyModule, PolicySetContent
from runplane.domain.policy_unit_tests import UnitTest
from runplane.domain.rego_v0 import SetContext, compiled_source, set_context

_INT64: Final = 2**63

# -- regopy plumbing -------------------------------------------------------------------------


def _interpreter() -> Any:
    interpreter = Interpreter()
    interpreter.log_level = LogLevel.NONE  # the default prints errors on stdout
    # Fail closed: a builtin error (e.g. division by zero) is an error, not "undefined".
    interpreter.strict_built_in_errors = True
    return interpreter


def _input_handle(value: Any) -> Any:  # noqa: C901 - a flat branch per JSON type
    """Build a rego-cpp input from JSON-like ``value`` (leaner than ``regopy.Input``).

    rego-cpp keeps string literals JSON-escaped (without their quotes) and compares,
    indexes and parses strings in that form, so input strings are passed the same way:
    otherwise ``input.s == "a\\"b"`` is undefined and ``json.unmarshal`` fails on any
    document holding a quote. Integers outside 64 bits are passed as their decimal text.
    """
    lib = _c.rego
    string, integer, number = lib.regoInputString, lib.regoInputInt, lib.regoInputFloat
    boolean, null = lib.regoInputBoolean, lib.regoInputNull
    item, obj, array = lib.regoInputObjectItem, lib.regoInputObject, lib.regoInputArray
    handle = _c.rego_new_input()
    encoded: dict[str, bytes] = {}

    def text(s: str) -> bytes:
        b = encoded.get(s)
        if b is None:
            body = json.dumps(s, ensure_ascii=False)[1:-1] if _NEEDS_ESCAPE.search(s) else s
            b = encoded[s] = body.encode("utf-8", "replace")
        return b

    def add(v: Any) -> int:
        t = type(v)
        if t is str:
            return int(string(handle, text(v)))
        if t is dict:
            for key, sub in v.items():
                if string(handle, text(str(key))) or add(sub) or item(handle):
                    return 1
            return int(obj(handle, len(v)))
        if t is list or t is tuple:
            for sub in v:
                if add(sub):
                    return 1
            return int(array(handle, len(v)))
        if v is None:
            return int(null(handle))
        if t is bool:
            return int(boolean(handle, v))
        if t is int:
            if -_INT64 <= v < _INT64:
                return int(integer(handle, v))
            return int(string(handle, text(str(v))))
        if t is float and math.isfinite(v):
            return int(number(handle, v))
        raise ValueError(f"a {t.__name__} cannot be a policy input value")

    try:
        if add(value):
            raise RegoError("the policy input could not be built")
    except BaseException:
        _c.rego_free_input(handle)
        raise
    return handle


_NEEDS_ESCAPE: Final = re.compile(r'[\x00-\x1f"\\]')


def _string(raw: str) -> str:
    """A string node's value: rego-cpp returns the JSON-escaped body of most strings, and
    the whole JSON literal (quotes included) of those some builtins build (``concat``,
    ``upper``...). Anything that decodes as neither is returned as it is."""
    literal = raw if len(raw) >= 2 and raw[0] == raw[-1] == '"' else f'"{raw}"'
    try:
        value = json.loads(literal)
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def _node(impl: Any) -> Any:
    """A Python value from a result node (strings read raw, never via JSON text)."""
    kind = _c.rego_node_type(impl)
    size = _c.rego_node_size(impl)
    if kind in (NodeKind.Term, NodeKind.Scalar) and size == 1:
        return _node(_c.rego_node_get(impl, 0))
    if kind == NodeKind.String:
        return _string(_c.rego_node_value(impl))
    if kind == NodeKind.Int:
        return int(_c.rego_node_value(impl))
    if kind == NodeKind.Float:
        return float(_c.rego_node_value(impl))
    if kind == NodeKind.Boolean:
        return _c.rego_node_value(impl) == "true"
    if kind == NodeKind.Null:
        return None
    if kind in (NodeKind.Array, NodeKind.Set):
        return [_node(_c.rego_node_get(impl, i)) for i in range(size)]
    if kind == NodeKind.Object:
        out: dict[str, Any] = {}
        for i in range(size):
            pair = _c.rego_node_get(impl, i)
            key = _node(_c.rego_node_get(pair, 0))
            out[key if isinstance(key, str) else compact(key)] = _node(_c.rego_node_get(pair, 1))
        return out
    raise _Unexpected(f"an unexpected {kind.name} node")


class _Unexpected(Exception):
    pass


class _QueryError(Exception):
    pass


_UNDEFINED: Final = object()


def _error_messages(impl: Any) -> list[str]:
    """``code: message`` of each error under an Error/ErrorSeq node (never its AST)."""
    kind = _c.rego_node_type(impl)
    if kind == NodeKind.ErrorSeq:
        return [
            m
            for i in range(_c.rego_node_size(impl))
            for m in _error_messages(_c.rego_node_get(impl, i))
        ]
    message = code = ""
    for i in range(_c.rego_node_size(impl)):
        child = _c.rego_node_get(impl, i)
        child_kind = _c.rego_node_type(child)
        if child_kind == NodeKind.ErrorMessage:
            message = _c.rego_node_value(child)
        elif child_kind == NodeKind.ErrorCode:
            code = _c.rego_node_value(child)
    return [f"{code}: {message}" if code else message]


def _query(interpreter: Any, query: str) -> Any:
    """The value of ``query`` (compiled for this call), ``_UNDEFINED``, or ``_QueryError``."""
    try:
        output = _c.rego_query(interpreter._impl, query)
    except RegoError as error:
        raise _QueryError(short(_sexpr_errors(str(error)))) from None
    return _read_output(output)


def _query_entrypoint(interpreter: Any, bundle: Any, entrypoint: str) -> Any:
    """Like ``_query``, for an entrypoint of a compiled bundle."""
    try:
        output = _c.rego_bundle_query_entrypoint(interpreter._impl, bundle._impl, entrypoint)
    except RegoError as error:
        raise _QueryError(short(_sexpr_errors(str(error)))) from None
    return _read_output(output)


def _read_output(output: Any) -> Any:
    try:
        root = _c.rego_output_node(output)
        kind = _c.rego_node_type(root)
        if kind == NodeKind.Undefined:
            return _UNDEFINED
        if kind in (NodeKind.Error, NodeKind.ErrorSeq):
            raise _QueryError(short(_error_messages(root)))
        if kind != NodeKind.Results:
            raise _QueryError(f"the evaluator returned an unexpected {kind.name} node")
        if _c.rego_node_size(root) == 0:
            return _UNDEFINED
        result = _c.rego_node_get(root, 0)
        terms = next(
            (
                _c.rego_node_get(result, i)
                for i in range(_c.rego_node_size(result))
                if _c.rego_node_type(_c.rego_node_get(result, i)) == NodeKind.Terms
            ),
            None,
        )
        if terms is None or _c.rego_node_size(terms) == 0:
            return _UNDEFINED
        try:
            return _node(_c.rego_node_get(terms, 0))
        except _Unexpected as error:
            raise _QueryError(f"the result holds {error}") from None
    finally:
        _c.rego_free_output(output)


def _entrypoint(query: str) -> str:
    """``data.a.b.deny`` as a bundle entrypoint, ``a/b/deny``."""
    return query.removeprefix("data.").replace(".", "/")


class _Compiled:
    """A policy set's modules in one interpreter, compiled once into a bundle with one
    entrypoint per policy, so each policy's query costs its evaluation only (compiling
    a plain query recompiles every module: ~6 ms each for the baseline set). If the
    bundle cannot be built, each policy falls back to a plain query, so one bad policy
    cannot stop the others."""

    def __init__(self, content: PolicySetContent) -> None:
        entrypoints = list(dict.fromkeys(_entrypoint(p.query) for p in content.policies))
        # Set-valued rules are evaluated through array companions (rego_arrays) when
        # they compile: rego-cpp builds sets in quadratic time.
        plan = array_plan(content)
        self.arrays: Mapping[str, tuple[str, ...]] = {}
        if plan.entrypoints:
            try:
                self.interpreter = _load(content, plan.modules)
                extra = [e for names in plan.entrypoints.values() for e in names]
                self.bundle: Any = self.interpreter.build(None, entrypoints + extra)
                self.arrays = plan.entrypoints
                return
            except RegoError:
                pass
        self.interpreter = _load(content)
        try:
            self.bundle = self.interpreter.build(None, entrypoints)
        except RegoError:
            self.bundle = None

    def set_input(self, handle: Any) -> None:
        _c.rego_set_input(self.interpreter._impl, handle)

    def query(self, query: str) -> Any:
        if self.bundle is None:
            return _query(self.interpreter, query)
        companions = self.arrays.get(query)
        if companions:
            parts = [_query_entrypoint(self.interpreter, self.bundle, e) for e in companions]
            if all(isinstance(part, list) for part in parts):
                return [item for part in parts for item in part]
        return _query_entrypoint(self.interpreter, self.bundle, _entrypoint(query))


_SEXPR_ERROR = re.compile(r"\(error (\d+):")
_SEXPR_MESSAGE = re.compile(r"\(errormsg (\d+):")


def _sexpr_errors(text: str) -> list[str]:
    """The messages of a RegoError's S-expression (or its first line if it has none)."""
    messages = []
    for match in _SEXPR_MESSAGE.finditer(text):
        start = match.end()
        messages.append(text[start : start + int(match.group(1))])
    return messages or [text.strip().splitlines()[0] if text.strip() else "unknown error"]


def _parse_errors(text: str, sources: Mapping[str, str]) -> list[str]:
    """``module line N: message`` for each error of an ``add_module`` RegoError."""
    located = []
    for match in _SEXPR_ERROR.finditer(text):
        start = match.end()
        name = text[start : start + int(match.group(1))]
        where = re.match(r"\|(\d+)\|(\d+)", text[start + len(name) :])
        message_match = _SEXPR_MESSAGE.search(text, start)
        message = ""
        if message_match:
            begin = message_match.end()
            message = text[begin : begin + int(message_match.group(1))]
        if where and name in sources:
            offset = int(where.group(1))
            line = sources[name].encode("utf-8")[:offset].count(b"\n") + 1
            located.append(f"{name} line {line}: {message}")
        else:
            located.append(f"{name}: {message}" if name else message)
    return located or _sexpr_errors(text)


def _load(content: PolicySetContent, extra: Sequence[PolicyModule] = ()) -> Any:
    interpreter = _interpreter()
    _add_modules(interpreter, (*content.modules, *extra))
    return interpreter


@functools.lru_cache(maxsize=4096)
def _compiled(name: str, source: str, context: SetContext) -> str:
    return compiled_source(name, source, rego_cpp=True, context=context).source


@functools.lru_cache(maxsize=64)
def _compiled_set(modules: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    context = set_context(modules)
    return tuple(_compiled(name, source, context) for name, source in modules)


def compiled_modules(modules: Sequence[PolicyModule]) -> list[PolicyModule]:
    """The modules as rego-cpp compiles them (``rego_v0.compiled_source``, the set's
    names known)."""
    texts = _compiled_set(tuple((m.name, m.source) for m in modules))
    return [PolicyModule(m.name, text) for m, text in zip(modules, texts, strict=True)]


def _add_modules(interpreter: Any, modules: Sequence[PolicyModule]) -> list[PolicyModule]:
    """Add each module as rego-cpp compiles it, and return them so (raises
    ``InvalidPolicySet`` for a module that cannot be upgraded, ``RegoError`` for one that
    does not parse)."""
    compiled = compiled_modules(modules)
    for module in compiled:
        interpreter.add_module(module.name, module.source)
    return compiled


def _unknown(interpreter: Any, modules: Sequence[PolicyModule]) -> str | None:
    return unknown_function(
        lambda name: bool(interpreter.is_builtin(name)),
        f"rego-cpp {regopy.rego_version()}",
        modules,
    )


# -- the work done in isolation ----------------------------------------------------------------


def _evaluate_work(
    sets: Sequence[PolicySetContent],
    first_index: int,
    inputs: Sequence[Mapping[str, Any]],
    max_messages: int,
    stop: threading.Event,
    emit: Emit,
) -> None:
    """Evaluate ``sets``, each against its input (``inputs``, aligned with the sets; one
    rego-cpp input is built per distinct document), emitting one record per policy;
    indexes start at ``first_index``."""
    handles: dict[int, Any] = {}
    try:
        index = first_index
        for content, policy_input in zip(sets, inputs, strict=True):
            compiled: _Compiled | None = None
            problem = ""
            try:
                handle = handles.get(id(policy_input))
                if handle is None:
                    handle = handles[id(policy_input)] = _input_handle(policy_input)
                compiled = _Compiled(content)
                compiled.set_input(handle)
            except RegoError as error:
                compiled, problem = None, short(_sexpr_errors(str(error)))
            except InvalidPolicySet as error:
                compiled, problem = None, short([str(error)])
            for policy in content.policies:
                if stop.is_set():
                    return
                if compiled is None:
                    record = {
                        "outcome": "errored",
                        "messages": [f"the policy set did not load: {problem}"],
                    }
                else:
                    record = _evaluate_policy(compiled, policy, max_messages)
                emit({"i": index, **record})
                index += 1
            del compiled
    finally:
        for handle in handles.values():
            _c.rego_free_input(handle)


def _evaluate_policy(compiled: _Compiled, policy: PolicyDefinition, max_messages: int) -> Record:
    try:
        value = compiled.query(policy.query)
    except _QueryError as error:
        return {"outcome": "errored", "messages": [f"evaluation failed: {error}"]}
    return policy_record(policy, value, defined=value is not _UNDEFINED, max_messages=max_messages)


def _validate_work(content: PolicySetContent, stop: threading.Event, emit: Emit) -> None:
    compiled = compiled_modules(content.modules)
    sources = {m.name: m.source for m in compiled}
    try:
        interpreter = _load(content)
    except RegoError as error:
        emit({"i": 0, "error": short(_parse_errors(str(error), sources))})
        return
    unknown = _unknown(interpreter, compiled)
    if unknown:
        emit({"i": 0, "error": unknown})
        return
    entrypoints = list(dict.fromkeys(_entrypoint(p.query) for p in content.policies))
    try:
        interpreter.build(None, entrypoints)
    except RegoError as error:
        emit({"i": 0, "error": f"the modules do not compile: {short(_sexpr_errors(str(error)))}"})
        return
    interpreter.set_input({})
    for index, policy in enumerate(content.policies):
        if stop.is_set():
            return
        problem = None
        try:
            value = _query(interpreter, policy.query)
        except _QueryError as error:
            where = rule_location(content.modules, policy.query)
            problem = f"policy {policy.name} does not compile{where}: {error}"
        else:
            if value is not _UNDEFINED and not isinstance(value, list):
                where = rule_location(content.modules, policy.query)
                problem = shape_problem(policy, value, where)
        emit({"i": index, "error": problem})


def _unit_work(
    modules: Sequence[PolicyModule],
    tests: Sequence[UnitTest],
    first: int,
    data_json: str,
    strict_builtin_errors: bool,
    stop: threading.Event,
    emit: Emit,
) -> None:
    interpreter = _interpreter()
    # As opa test: a builtin error makes the call undefined unless strict (evaluations
    # of runs stay strict: ``_interpreter``).
    interpreter.strict_built_in_errors = strict_builtin_errors
    try:
        compiled = compiled_modules(modules)
    except InvalidPolicySet as error:
        emit({"i": -1, "refused": str(error)})
        return
    sources = {m.name: m.source for m in compiled}
    try:
        _add_modules(interpreter, modules)
    except RegoError as error:
        emit({"i": -1, "refused": short(_parse_errors(str(error), sources))})
        return
    try:
        interpreter.add_data_json(data_json)
    except RegoError as error:
        emit(
            {"i": -1, "refused": f"the data files do not load: {short(_sexpr_errors(str(error)))}"}
        )
        return
    unknown = _unknown(interpreter, compiled)
    if unknown:
        emit({"i": -1, "refused": unknown})
        return
    interpreter.set_input({})
    for index in range(first, len(tests)):
        if stop.is_set():
            return
        try:
            value = _query(interpreter, tests[index].query)
        except _QueryError as error:
            emit({"i": index, "outcome": "ERROR", "message": str(error)})
            continue
        if value is True:
            emit({"i": index, "outcome": "PASS"})
        else:
            shown = "undefined" if not isinstance(value, bool | int | str) else repr(value)
            emit({"i": index, "outcome": "FAIL", "message": f"the test is {shown}, not true"})


class RegoCppEngine:
    """The ``Engine`` (``runplane.adapters.rego``) built on regopy."""

    name: Final = "regopy"

    def identity(self) -> str:
        try:
            package = metadata.version("regopy")
        except metadata.PackageNotFoundError:  # pragma: no cover
            package = "unknown"
        return f"regopy@{package} rego-cpp@{regopy.rego_version()}"

    def compiled(self, modules: Sequence[PolicyModule]) -> list[PolicyModule]:
        return compiled_modules(modules)

    def payload(self, document: Mapping[str, Any], canonical: Callable[[], bytes]) -> Any:
        return document  # loaded value by value (see _input_handle)

    def evaluate_work(
        self,
        sets: Sequence[PolicySetContent],
        first_index: int,
        payloads: Sequence[Any],
        max_messages: int,
        stop: threading.Event,
        emit: Emit,
    ) -> None:
        _evaluate_work(sets, first_index, payloads, max_messages, stop, emit)

    def validate_work(self, content: PolicySetContent, stop: threading.Event, emit: Emit) -> None:
        _validate_work(content, stop, emit)

    def unit_work(
        self,
        modules: Sequence[PolicyModule],
        tests: Sequence[UnitTest],
        first: int,
        data_json: str,
        strict_builtin_errors: bool,
        stop: threading.Event,
        emit: Emit,
    ) -> None:
        _unit_work(modules, tests, first, data_json, strict_builtin_errors, stop, emit)


ENGINE: Final = RegoCppEngine()
