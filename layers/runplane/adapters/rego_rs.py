"""The regorus engine (Microsoft's Rust Rego interpreter): the only module importing it.

It comes from ``gordon-to-regorus`` 0.13.0, a build of microsoft/regorus's Python
bindings published under another name (see docs/policy.md for what was verified).
Facts about that build this adapter is built on:

- ``Engine.add_policy`` parses a module and raises ``RuntimeError`` if it does not; like
  every regorus error, the text is ``--> MODULE:ROW:COL``, the source line, a caret,
  ``error: MESSAGE`` and, with ``RUST_BACKTRACE`` set, a stack trace. A message may quote
  a value (``Got `"..."` instead``): only the location and the message, with quoted
  values blanked, are ever reported.
- An error's location counts columns in UTF-8 bytes, a tab as four.
- ``eval_rule_as_json`` returns the rule's value as JSON (sets as arrays, integers beyond
  64 bits exactly); an undefined value is the JSON string ``"<undefined>"``, which
  ``eval_query_as_json`` (no result when undefined) tells apart from that string. A path
  naming no rule raises "not a valid rule path".
- Builtin errors are strict (an error, never "undefined"): regorus has a setting for it
  (``set_strict_builtin_errors``), but the binding does not expose it, so unit tests
  cannot run as ``opa test`` runs them (builtin errors undefined); a test that errors on
  a builtin says so. ``print``/``trace`` go to stderr unless gathered: the engine
  gathers them, and they are dropped.
- Its builtins include ``time.now_ns``, ``rand.intn`` and ``uuid.rfc4122`` (real clock and
  randomness), ``opa.runtime`` (without the environment) and ``http.send`` (always
  undefined; the build has no HTTP client). Publication refuses every one of them
  (``refuse_forbidden_builtins``). It has no ``crypto.*``, ``io.jwt.*`` or
  ``net.lookup_ip_addr``; the builtin list comes from the engine (``opa.runtime``).
- A module is parsed as Rego v1; v0 modules are upgraded first (``rego_v0``), so one set
  may mix both. Rust panics surface as exceptions, and the work runs isolated anyway.
- ``Engine.add_extension(path, nargs, callable)`` registers a Python function, and a path
  naming a builtin replaces it: ``sprintf`` is Runplane's (``rego_sprintf``, OPA's
  formatting), registered on every engine. Arguments reach Python converted (sets as
  ``set``, objects as ``dict``); a value Python cannot hold that way (an integer beyond
  64 bits, a set of arrays, objects or sets, an object keyed by one) fails the call
  before Runplane sees it, reported as such (``message``).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Final

import regorus  # type: ignore[import-untyped]

from runplane.adapters.rego_isolation import (
    Emit,
    Record,
    policy_record,
    shape_problem,
    short,
)
from runplane.adapters.rego_source import builtin_at, rule_location, unknown_function
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyDefinition, PolicyModule, PolicySetContent
from runplane.domain.policy_unit_tests import UnitTest
from runplane.domain.rego_sprintf import sprintf
from runplane.domain.rego_v0 import SetContext, compiled_source, set_context

PACKAGE: Final = "gordon-to-regorus"
_UNDEFINED_JSON: Final = '"<undefined>"'
_LOCATION = re.compile(r"-->\s*(.+?):(\d+):(\d+)")
_MESSAGE = re.compile(r"(?m)^error: (.*)$")
_BACKTICKED = re.compile(r"`([^`]*)`")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_KEPT = re.compile(r"[A-Za-z_][\w.]*|[^\w\s\"']{1,3}")
"""What a message may quote as it is: a name or a token; anything else may be a value."""
_UNCONVERTED = re.compile(r"not an i64|unhashable type")
"""regorus failing to hand a value to a Python extension (see the module docstring)."""
_EXTENSION_ERROR = re.compile(r"extension '([\w.]+)' raises Python error: \w+: (.*)")


class _QueryError(Exception):
    def __init__(self, text: str, where: tuple[str, int, int] | None = None) -> None:
        super().__init__(text)
        self.where = where
        """``(module, line, column)`` the engine located the error at, if it did."""


def message(error: BaseException) -> str:
    """``MODULE line N: MESSAGE`` from a regorus error, with quoted values blanked."""
    text = str(error)
    found = _MESSAGE.search(text)
    if found:
        what = found.group(1).strip()
    else:
        what = next((line.strip() for line in text.splitlines() if line.strip()), "")
        what = what if not what.startswith("Stack backtrace") else ""
    if _UNCONVERTED.search(what):
        what = (
            "sprintf cannot format an argument holding an integer beyond 64 bits, a set of "
            "arrays, objects or sets, or an object keyed by one (regorus cannot hand such a "
            "value to Runplane's sprintf)"
        )
    elif found := _EXTENSION_ERROR.search(what):
        what = f"{found.group(1)}: {found.group(2)}"
    what = _BACKTICKED.sub(lambda m: m.group(0) if _KEPT.fullmatch(m.group(1)) else "`…`", what)
    what = _QUOTED.sub('"…"', what) or "unknown error"
    where = _LOCATION.search(text)
    return f"{where.group(1)} line {where.group(2)}: {what}" if where else what


@functools.lru_cache(maxsize=4096)
def _compiled(name: str, source: str, context: SetContext) -> str:
    return compiled_source(name, source, context=context).source


@functools.lru_cache(maxsize=64)
def _compiled_set(modules: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The text regorus compiles for each module of a set (names of the set's other
    modules known: ``rego_v0.set_context``)."""
    context = set_context(modules)
    return tuple(_compiled(name, source, context) for name, source in modules)


def compiled_modules(modules: Sequence[PolicyModule]) -> list[PolicyModule]:
    texts = _compiled_set(tuple((m.name, m.source) for m in modules))
    return [PolicyModule(m.name, text) for m, text in zip(modules, texts, strict=True)]


def _engine() -> Any:
    engine = regorus.Engine()
    engine.set_gather_prints(True)  # print() output is the policy's, never our logs'
    # OPA's formatting, not regorus's (which ignores widths such as %-40s).
    engine.add_extension("sprintf", 2, sprintf)
    return engine


def _add(engine: Any, modules: Sequence[PolicyModule]) -> list[PolicyModule]:
    """Add the modules as compiled; returns them (the text regorus reads)."""
    compiled = compiled_modules(modules)
    for module in compiled:
        engine.add_policy(module.name, module.source)
    return compiled


def _value(engine: Any, query: str) -> tuple[bool, Any]:
    """``(defined, value)`` of a rule path; ``_QueryError`` with a short message."""
    try:
        text = engine.eval_rule_as_json(query)
        if text != _UNDEFINED_JSON:
            return True, json.loads(text)
        results = json.loads(engine.eval_query_as_json(query)).get("result") or []
    except Exception as error:  # RuntimeError from regorus; a panic included
        found = _LOCATION.search(str(error))
        where = (found.group(1), int(found.group(2)), int(found.group(3))) if found else None
        raise _QueryError(short([message(error)]), where) from None
    if not results or not results[0].get("expressions"):
        return False, None
    return True, results[0]["expressions"][0].get("value")


@functools.lru_cache(maxsize=1)
def builtins() -> frozenset[str]:
    """The builtin functions this build evaluates, as it lists them."""
    engine = _engine()
    engine.add_policy(
        "builtins.rego", "package runplane_builtins\n\nnames := opa.runtime().builtins\n"
    )
    return frozenset(json.loads(engine.eval_rule_as_json("data.runplane_builtins.names")))


def _unknown(modules: Sequence[PolicyModule]) -> str | None:
    known = builtins()
    return unknown_function(known.__contains__, ENGINE.label(), modules)


class RegorusEngine:
    """The ``Engine`` (``runplane.adapters.rego``) built on regorus."""

    name: Final = "regorus"

    @functools.cache  # noqa: B019 - one instance per process
    def label(self) -> str:
        engine = _engine()
        engine.add_policy(
            "v.rego", 'package runplane_version\n\nv := opa.runtime()["regorus-version"]\n'
        )
        return f"regorus {json.loads(engine.eval_rule_as_json('data.runplane_version.v'))}"

    def identity(self) -> str:
        try:
            package = metadata.version(PACKAGE)
        except metadata.PackageNotFoundError:  # pragma: no cover
            package = "unknown"
        return f"{PACKAGE}@{package} {self.label().replace(' ', '@')}"

    def compiled(self, modules: Sequence[PolicyModule]) -> list[PolicyModule]:
        return compiled_modules(modules)

    def payload(self, document: Mapping[str, Any], canonical: Callable[[], bytes]) -> Any:
        # regorus parses JSON text far faster than it converts Python values, and the
        # canonical text is already built for the input digest.
        return canonical()

    def evaluate_work(
        self,
        sets: Sequence[PolicySetContent],
        first_index: int,
        payloads: Sequence[Any],
        max_messages: int,
        stop: threading.Event,
        emit: Emit,
    ) -> None:
        loaded: dict[int, Any] = {}  # one parsed input per distinct document
        index = first_index
        for content, payload in zip(sets, payloads, strict=True):
            engine: Any = None
            problem = ""
            try:
                base = loaded.get(id(payload))
                if base is None:
                    base = loaded[id(payload)] = _engine()
                    base.set_input_json(payload.decode("utf-8"))
                engine = base.clone()
                engine.set_gather_prints(True)
                _add(engine, content.modules)
            except InvalidPolicySet as error:
                engine, problem = None, short([str(error)])
            except Exception as error:
                engine, problem = None, short([message(error)])
            for policy in content.policies:
                if stop.is_set():
                    return
                if engine is None:
                    record: Record = {
                        "outcome": "errored",
                        "messages": [f"the policy set did not load: {problem}"],
                    }
                else:
                    record = _evaluate_policy(engine, policy, max_messages)
                emit({"i": index, **record})
                index += 1

    def validate_work(self, content: PolicySetContent, stop: threading.Event, emit: Emit) -> None:
        engine = _engine()
        try:
            compiled = _add(engine, content.modules)
        except InvalidPolicySet as error:
            emit({"i": 0, "error": str(error)})
            return
        except Exception as error:
            emit({"i": 0, "error": short([message(error)])})
            return
        unknown = _unknown(compiled)
        if unknown:
            emit({"i": 0, "error": unknown})
            return
        engine.set_input_json("{}")
        for index, policy in enumerate(content.policies):
            if stop.is_set():
                return
            problem = None
            try:
                defined, value = _value(engine, policy.query)
            except _QueryError as error:
                where = rule_location(content.modules, policy.query)
                problem = f"policy {policy.name} does not compile{where}: {error}"
            else:
                if defined and not isinstance(value, list):
                    problem = shape_problem(
                        policy, value, rule_location(content.modules, policy.query)
                    )
            emit({"i": index, "error": problem})

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
        # Builtin errors are always errors here: the binding has no setting for
        # regorus's ``set_strict_builtin_errors`` (see the module docstring).
        engine = _engine()
        try:
            compiled = _add(engine, modules)
        except InvalidPolicySet as error:
            emit({"i": -1, "refused": str(error)})
            return
        except Exception as error:
            emit({"i": -1, "refused": short([message(error)])})
            return
        try:
            engine.add_data_json(data_json)
        except Exception as error:
            emit({"i": -1, "refused": f"the data files do not load: {short([message(error)])}"})
            return
        unknown = _unknown(compiled)
        if unknown:
            emit({"i": -1, "refused": unknown})
            return
        engine.set_input_json("{}")
        for index in range(first, len(tests)):
            if stop.is_set():
                return
            try:
                defined, value = _value(engine, tests[index].query)
            except _QueryError as error:
                text = str(error)
                if not strict_builtin_errors:
                    text += _not_undefined(error, compiled)
                emit({"i": index, "outcome": "ERROR", "message": text})
                continue
            if defined and value is True:
                emit({"i": index, "outcome": "PASS"})
            else:
                shown = (
                    repr(value) if defined and isinstance(value, bool | int | str) else "undefined"
                )
                emit({"i": index, "outcome": "FAIL", "message": f"the test is {shown}, not true"})


def _not_undefined(error: _QueryError, modules: Sequence[PolicyModule]) -> str:
    """For a builtin error, why the test errors where ``opa test`` (builtin errors
    undefined) would go on; else nothing."""
    if error.where is None:
        return ""
    name, line, column = error.where
    source = next((m.source for m in modules if m.name == name), None)
    called = source and builtin_at(
        source, line, _char_column(source, line, column), builtins().__contains__
    )
    if not called or "sprintf cannot format" in str(error):  # a limit of Runplane's, not OPA's
        return ""
    return (
        f" (a builtin error of `{called}`: opa test makes the call undefined and goes on, "
        f"which {ENGINE.label()} cannot, so the test errors)"
    )


def _char_column(source: str, line: int, column: int) -> int:
    """The 1-based character column of regorus's ``column``, which counts UTF-8 bytes
    and a tab as four."""
    lines = source.split("\n")
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    width = 0
    for index, char in enumerate(text):
        if width >= column - 1:
            return index + 1
        width += 4 if char == "\t" else len(char.encode("utf-8"))
    return len(text) + 1


def _evaluate_policy(engine: Any, policy: PolicyDefinition, max_messages: int) -> Record:
    try:
        defined, value = _value(engine, policy.query)
    except _QueryError as error:
        return {"outcome": "errored", "messages": [f"evaluation failed: {error}"]}
    return policy_record(policy, value, defined=defined, max_messages=max_messages)


ENGINE: Final = RegorusEngine()
