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

Isolation and timeouts: by default (``isolation="process"``) each evaluation or
validation runs in a forked child process that reports results over a pipe. At the
deadline the child is killed (SIGKILL), so a runaway policy really stops, and a crash
in rego-cpp is contained; every policy without a result is reported ``errored``.
``isolation="thread"`` (and platforms without ``fork``) evaluates in a daemon thread
instead: the caller still gets fail-closed results at the deadline, but the running
query cannot be stopped and keeps a CPU busy until it returns (the thread then stops
before the next query); a crash takes the whole process down. In every mode the
function timeout of the hosting Lambda is the outer bound.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import json
import math
import os
import re
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final, Literal

import regopy  # type: ignore[import-untyped]
from regopy import Interpreter, LogLevel, NodeKind, RegoError
from regopy import rego_shared as _c

from runplane.adapters.rego_arrays import array_plan
from runplane.adapters.rego_source import add_modules, rule_location, unknown_function
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import (
    PolicyDefinition,
    PolicyModule,
    PolicyOutcome,
    PolicyResult,
    PolicySetContent,
    check_policy_set,
    refuse_forbidden_builtins,
)
from runplane.domain.policy_input import PolicyInputs
from runplane.domain.rego_v0 import compiled_source

Isolation = Literal["process", "thread"]

MAX_MESSAGES: Final = 100
"""Violation messages kept per policy result (sorted, deduplicated); the rest are counted."""
MAX_MESSAGE_CHARS: Final = 1000
_MAX_ERROR_CHARS: Final = 300
_INT64: Final = 2**63

_Record = dict[str, Any]
_Emit = Callable[[_Record], None]


# -- regopy plumbing -------------------------------------------------------------------------


def _interpreter() -> Any:
    interpreter = Interpreter()
    interpreter.log_level = LogLevel.NONE  # the default prints errors on stdout
    # Fail closed: a builtin error (e.g. division by zero) is an error, not "undefined".
    interpreter.strict_built_in_errors = True
    return interpreter


def _input_handle(value: Any) -> Any:
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
            out[key if isinstance(key, str) else _compact(key)] = _node(_c.rego_node_get(pair, 1))
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
        raise _QueryError(_short(_sexpr_errors(str(error)))) from None
    return _read_output(output)


def _query_entrypoint(interpreter: Any, bundle: Any, entrypoint: str) -> Any:
    """Like ``_query``, for an entrypoint of a compiled bundle."""
    try:
        output = _c.rego_bundle_query_entrypoint(interpreter._impl, bundle._impl, entrypoint)
    except RegoError as error:
        raise _QueryError(_short(_sexpr_errors(str(error)))) from None
    return _read_output(output)


def _read_output(output: Any) -> Any:
    try:
        root = _c.rego_output_node(output)
        kind = _c.rego_node_type(root)
        if kind == NodeKind.Undefined:
            return _UNDEFINED
        if kind in (NodeKind.Error, NodeKind.ErrorSeq):
            raise _QueryError(_short(_error_messages(root)))
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


def _short(messages: Sequence[str]) -> str:
    text = "; ".join(dict.fromkeys(m for m in messages if m)) or "unknown error"
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _load(content: PolicySetContent, extra: Sequence[PolicyModule] = ()) -> Any:
    interpreter = _interpreter()
    add_modules(interpreter, (*content.modules, *extra))
    return interpreter


def _violations(value: Any, max_messages: int) -> tuple[list[str], int]:
    messages = {
        (item if isinstance(item, str) else _compact(item))[:MAX_MESSAGE_CHARS] for item in value
    }
    ordered = sorted(messages)
    return ordered[:max_messages], max(0, len(ordered) - max_messages)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "null"


# -- the work done in isolation ----------------------------------------------------------------


def _evaluate_work(
    sets: Sequence[PolicySetContent],
    first_index: int,
    inputs: Sequence[Mapping[str, Any]],
    max_messages: int,
    stop: threading.Event,
    emit: _Emit,
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
                compiled, problem = None, _short(_sexpr_errors(str(error)))
            except InvalidPolicySet as error:
                compiled, problem = None, _short([str(error)])
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


def _evaluate_policy(compiled: _Compiled, policy: PolicyDefinition, max_messages: int) -> _Record:
    try:
        value = compiled.query(policy.query)
    except _QueryError as error:
        return {"outcome": "errored", "messages": [f"evaluation failed: {error}"]}
    if value is _UNDEFINED or value == []:
        return {"outcome": "passed", "messages": []}
    if not isinstance(value, list):
        return {
            "outcome": "errored",
            "messages": [
                f"{policy.query} is {_describe(value)}, not a set or array of violation messages"
            ],
        }
    messages, omitted = _violations(value, max_messages)
    return {"outcome": "failed", "messages": messages, "omitted": omitted}


def _validate_work(content: PolicySetContent, stop: threading.Event, emit: _Emit) -> None:
    sources = {m.name: m.source for m in content.modules}
    try:
        interpreter = _load(content)
    except RegoError as error:
        emit({"i": 0, "error": _short(_parse_errors(str(error), sources))})
        return
    unknown = unknown_function(interpreter, content.modules)
    if unknown:
        emit({"i": 0, "error": unknown})
        return
    entrypoints = list(dict.fromkeys(_entrypoint(p.query) for p in content.policies))
    try:
        interpreter.build(None, entrypoints)
    except RegoError as error:
        emit({"i": 0, "error": f"the modules do not compile: {_short(_sexpr_errors(str(error)))}"})
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
                problem = (
                    f"policy {policy.name}: {policy.query}{where} is {_describe(value)}, "
                    "not a set or array of violation messages"
                )
                if isinstance(value, dict):
                    problem += (
                        " (in Rego v1, name[x] if { ... } defines an object: write "
                        "name contains x if { ... } for a set of messages)"
                    )
        emit({"i": index, "error": problem})


# -- running in isolation -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Stopped:
    """Why isolated work stopped before emitting every record."""

    timed_out: bool
    reason: str


def _run(
    work: Callable[[threading.Event, _Emit], None],
    timeout_seconds: float,
    isolation: Isolation,
) -> tuple[dict[int, _Record], _Stopped | None]:
    """Run ``work`` isolated: its records by index, and why it stopped early (or None)."""
    if isolation == "process" and hasattr(os, "fork"):
        return _run_in_child(work, timeout_seconds)
    return _run_in_thread(work, timeout_seconds)


def _run_in_thread(
    work: Callable[[threading.Event, _Emit], None], timeout_seconds: float
) -> tuple[dict[int, _Record], _Stopped | None]:
    records: dict[int, _Record] = {}
    lock = threading.Lock()
    stop = threading.Event()
    failure: list[str] = []

    def emit(record: _Record) -> None:
        with lock:
            if not stop.is_set():
                records[record["i"]] = record

    def target() -> None:
        try:
            work(stop, emit)
        except Exception as error:  # reported as errored policies, never raised
            failure.append(f"the evaluator failed ({type(error).__name__})")

    thread = threading.Thread(target=target, name="rego-evaluation", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_seconds))
    with lock:
        if thread.is_alive():
            stop.set()
            return dict(records), _Stopped(True, f"timed out after {timeout_seconds:g}s")
        return dict(records), _Stopped(False, failure[0]) if failure else None


def _run_in_child(
    work: Callable[[threading.Event, _Emit], None], timeout_seconds: float
) -> tuple[dict[int, _Record], _Stopped | None]:
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() in a threaded process: the child only runs
        # rego-cpp and writes to a pipe, and a child that deadlocks is killed at the deadline.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process; its results are asserted on
        status = 0
        try:
            os.close(read_end)
            faulthandler.disable()  # a crash is reported by the parent, not dumped here
            # Defence in depth behind the refused builtins: the evaluator's process
            # has no environment (no cloud credentials, no settings) to reveal.
            os.environ.clear()

            def emit(record: _Record) -> None:
                data = (json.dumps(record, ensure_ascii=True) + "\n").encode("ascii")
                view = memoryview(data)
                while view:
                    view = view[os.write(write_end, view) :]

            work(threading.Event(), emit)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    records: dict[int, _Record] = {}
    buffer = b""
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], remaining)
            if not ready:
                timed_out = True
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                record = json.loads(line)
                records[record["i"]] = record
    finally:
        os.close(read_end)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return records, _Stopped(True, f"timed out after {timeout_seconds:g}s")
    if os.WIFSIGNALED(status):
        return records, _Stopped(False, f"the evaluator crashed (signal {os.WTERMSIG(status)})")
    if os.WEXITSTATUS(status) != 0:
        return records, _Stopped(False, "the evaluator failed")
    return records, None


# -- public API ---------------------------------------------------------------------------------


def validate_policy_set(
    content: PolicySetContent,
    *,
    timeout_seconds: float = 10.0,
    isolation: Isolation = "process",
) -> None:
    """Refuse a policy set that cannot be published; return None if it can.

    Raises ``InvalidPolicySet`` for a structural problem (``check_policy_set``), a module
    that does not parse (naming the module, line and parser message), a policy query
    that does not compile or does not evaluate to a set or array on an empty input, or
    a set that crashes or hangs the evaluator; and ``PolicyModuleRefused`` (a subclass)
    for the first forbidden builtin, modules in name order.
    """
    check_policy_set(content)
    refuse_forbidden_builtins(content)
    for module in content.modules:
        compiled_source(module.name, module.source)  # refuses what cannot be upgraded
    records, failure = _run(
        lambda stop, emit: _validate_work(content, stop, emit), timeout_seconds, isolation
    )
    for index in range(len(content.policies)):
        record = records.get(index)
        if record is None:
            why = failure.reason if failure else "the evaluator stopped early"
            raise InvalidPolicySet(f"policy set {content.name} could not be compiled: {why}")
        if record.get("error"):
            raise InvalidPolicySet(f"policy set {content.name}: {record['error']}")


class RegoEvaluator:
    """Evaluates policy sets against a sanitized plan derivative with regopy.

    Each evaluation compiles each set once, in a fresh interpreter, loads the input
    once, and runs each policy's query against it. See the module docstring for
    isolation and what a timeout can and cannot stop.
    """

    def __init__(
        self, *, isolation: Isolation = "process", max_messages: int = MAX_MESSAGES
    ) -> None:
        self._isolation = isolation
        self._max_messages = max_messages

    @functools.cached_property
    def runtime_identity(self) -> str:
        """The evaluator's name and versions, recorded with each evaluation (read once)."""
        try:
            package = metadata.version("regopy")
        except metadata.PackageNotFoundError:  # pragma: no cover
            package = "unknown"
        return f"regopy@{package} rego-cpp@{regopy.rego_version()}"

    def validate(self, content: PolicySetContent, *, timeout_seconds: float = 10.0) -> None:
        """Refuse a policy set that cannot be published (see ``validate_policy_set``)."""
        validate_policy_set(content, timeout_seconds=timeout_seconds, isolation=self._isolation)

    def evaluate(
        self,
        sets: Sequence[PolicySetContent],
        policy_input: Mapping[str, Any] | PolicyInputs,
        *,
        timeout_seconds: float = 10.0,
    ) -> list[PolicyResult]:
        """One result per policy, sets and policies in the order given.

        ``policy_input`` is one document for every set, or the run's ``PolicyInputs``:
        each set is then evaluated against the document of its declared input shape.

        Fail closed: a policy whose query errors (a conflict, a builtin error, an
        unknown function), whose result is neither a set nor an array, or that has no
        result when ``timeout_seconds`` (for the whole evaluation) runs out is
        ``errored``; the reason is a short message that never echoes input values.
        Non-string violations are reported as their compact JSON.
        """
        sets = list(sets)
        if isinstance(policy_input, PolicyInputs):
            inputs: list[Mapping[str, Any]] = [
                policy_input.document(content.input_shape) for content in sets
            ]
        else:
            inputs = [policy_input] * len(sets)
        expected = [(content, policy) for content in sets for policy in content.policies]
        first_index = [0]
        for content in sets:
            first_index.append(first_index[-1] + len(content.policies))
        records: dict[int, _Record] = {}
        deadline = time.monotonic() + timeout_seconds
        position = 0
        failure: _Stopped | None = None
        while position < len(sets):
            batch, offset = sets[position:], first_index[position]
            work = functools.partial(
                _evaluate_work, batch, offset, inputs[position:], self._max_messages
            )
            found, failure = _run(
                work,
                deadline - time.monotonic() if position else timeout_seconds,
                self._isolation,
            )
            records.update(found)
            if failure is None or failure.timed_out:
                break
            # A crash (or failure) is blamed on the first set it left unfinished; its
            # unfinished policies are errored and the sets after it get a fresh start.
            culprit = next(
                (
                    k
                    for k in range(position, len(sets))
                    if any(i not in records for i in range(first_index[k], first_index[k + 1]))
                ),
                None,
            )
            if culprit is None:
                break
            for i in range(first_index[culprit], first_index[culprit + 1]):
                records.setdefault(
                    i, {"outcome": "errored", "messages": [f"not evaluated: {failure.reason}"]}
                )
            position = culprit + 1
            if time.monotonic() >= deadline:
                failure = _Stopped(True, f"timed out after {timeout_seconds:g}s")
                break
        digests = {id(content): content.digest() for content in sets}
        results = []
        for index, (content, policy) in enumerate(expected):
            why = failure.reason if failure else "the evaluator stopped early"
            record = records.get(index) or {
                "outcome": "errored",
                "messages": [f"not evaluated: {why}"],
            }
            results.append(
                PolicyResult(
                    policy_set=content.name,
                    policy_set_digest=digests[id(content)],
                    policy=policy.name,
                    enforcement=policy.enforcement,
                    outcome=PolicyOutcome(record["outcome"]),
                    messages=tuple(record.get("messages", ())),
                    omitted=int(record.get("omitted", 0)),
                )
            )
        return results
