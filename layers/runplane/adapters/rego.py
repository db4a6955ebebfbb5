"""Rego evaluation: the evaluator interface, in front of a pluggable engine.

Two engines implement it (``Engine``): **regorus** (Microsoft's Rust Rego interpreter,
from the ``gordon-to-regorus`` build, ``runplane.adapters.rego_rs``), the default, and
**regopy** (Microsoft's rego-cpp bindings, ``runplane.adapters.rego_cpp``). The engine is
chosen by name (``RUNPLANE_POLICY_ENGINE``: ``regorus`` or ``regopy``); without a name,
regorus if it is installed, else regopy. See docs/policy.md for why.

Whatever the engine, each evaluation or validation runs isolated
(``runplane.adapters.rego_isolation``: a forked child killed at the deadline by
default), policies are refused at publication if they call a non-deterministic or
I/O builtin (``refuse_forbidden_builtins``, a lexical check independent of the engine),
and every failure is fail-closed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Final, Protocol

from runplane.adapters.rego_isolation import (
    MAX_MESSAGES,
    Emit,
    Isolation,
    Record,
    Stopped,
    run_isolated,
)
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyModule, PolicyOutcome, PolicySetContent, check_policy_set
from runplane.domain.policy_capabilities import refuse_forbidden_builtins
from runplane.domain.policy_input import PolicyInputs
from runplane.domain.policy_results import PolicyResult
from runplane.domain.policy_sanitize import canonical_json
from runplane.domain.policy_unit_tests import UnitTest

__all__ = [
    "ENGINE_VARIABLE",
    "MAX_MESSAGES",
    "Engine",
    "Isolation",
    "RegoEvaluator",
    "engine",
    "engine_name",
    "engine_release",
    "validate_policy_set",
]

ENGINE_VARIABLE: Final = "RUNPLANE_POLICY_ENGINE"
_MODULES: Final = {"regorus": "runplane.adapters.rego_rs", "regopy": "runplane.adapters.rego_cpp"}
_PACKAGES: Final = {"regorus": "gordon-to-regorus", "regopy": "regopy"}


class Engine(Protocol):
    """What an engine does; its ``*_work`` methods run isolated (``run_isolated``)."""

    name: str

    def identity(self) -> str:
        """The package and engine versions recorded with each result."""
        ...

    def compiled(self, modules: Sequence[PolicyModule]) -> list[PolicyModule]:
        """The modules as the engine compiles them (the Rego v0 upgrade and workarounds
        applied, names of the whole set known); raises ``InvalidPolicySet``."""
        ...

    def payload(self, document: Mapping[str, Any], canonical: Callable[[], bytes]) -> Any:
        """What ``evaluate_work`` receives for one input document, built in the parent."""
        ...

    def evaluate_work(
        self,
        sets: Sequence[PolicySetContent],
        first_index: int,
        payloads: Sequence[Any],
        max_messages: int,
        stop: threading.Event,
        emit: Emit,
    ) -> None:
        """Emit ``{"i", "outcome", "messages", "omitted"}`` per policy, from ``first_index``."""
        ...

    def validate_work(self, content: PolicySetContent, stop: threading.Event, emit: Emit) -> None:
        """Emit ``{"i", "error"}`` per policy (``error`` None when it compiles)."""
        ...

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
        """Emit ``{"i", "outcome", "message"}`` per test from ``first`` (``data_json``: the
        base ``data`` document), or ``{"i": -1, "refused": why}`` for modules or data that
        do not load. Unless ``strict_builtin_errors``, a builtin error makes the call
        undefined, as in ``opa test``, where the engine can (a test that errors on one
        where it cannot says so)."""
        ...


def engine_name(name: str | None = None) -> str:
    """The engine to use: ``name``, else ``RUNPLANE_POLICY_ENGINE``, else regorus when it
    is installed, else regopy."""
    chosen = name or os.environ.get(ENGINE_VARIABLE) or ""
    if not chosen:
        chosen = "regorus" if importlib.util.find_spec("regorus") else "regopy"
    if chosen not in _MODULES:
        raise ValueError(
            f"unknown policy engine {chosen!r}: {ENGINE_VARIABLE} is one of "
            + ", ".join(sorted(_MODULES))
        )
    return chosen


def engine(name: str | None = None) -> Engine:
    """The engine (see ``engine_name``), loaded on first use."""
    module = importlib.import_module(_MODULES[engine_name(name)])
    chosen: Engine = module.ENGINE
    return chosen


def engine_release(name: str | None = None) -> str:
    """``package@version`` of the engine's installed release, read without loading it
    (launch controls match it against their policy-runtime allowlist)."""
    package = _PACKAGES[engine_name(name)]
    try:
        return f"{package}@{metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return f"{package}@unknown"


def validate_policy_set(
    content: PolicySetContent,
    *,
    timeout_seconds: float = 10.0,
    isolation: Isolation = "process",
    engine_name: str | None = None,
) -> None:
    """Refuse a policy set that cannot be published; return None if it can.

    Raises ``InvalidPolicySet`` for a structural problem (``check_policy_set``), a module
    that does not parse (naming the module, line and parser message), a call to a
    function neither the engine nor the set defines, a policy query that does not
    compile or does not evaluate to a set or array on an empty input, or a set that
    crashes or hangs the evaluator; and ``PolicyModuleRefused`` (a subclass) for the
    first forbidden builtin, modules in name order.
    """
    check_policy_set(content)
    refuse_forbidden_builtins(content)
    chosen = engine(engine_name)
    chosen.compiled(content.modules)  # refuses what cannot be upgraded
    records, failure = run_isolated(
        lambda stop, emit: chosen.validate_work(content, stop, emit), timeout_seconds, isolation
    )
    for index in range(len(content.policies)):
        record = records.get(index)
        if record is None:
            why = failure.reason if failure else "the evaluator stopped early"
            raise InvalidPolicySet(f"policy set {content.name} could not be compiled: {why}")
        if record.get("error"):
            raise InvalidPolicySet(f"policy set {content.name}: {record['error']}")


class RegoEvaluator:
    """Evaluates policy sets against a sanitized plan derivative.

    Each evaluation compiles each set once, loads each distinct input document once, and
    runs each policy's query against it, isolated (see ``rego_isolation``).
    """

    def __init__(
        self,
        *,
        isolation: Isolation = "process",
        max_messages: int = MAX_MESSAGES,
        engine: str | None = None,
    ) -> None:
        self._isolation = isolation
        self._max_messages = max_messages
        self._engine_name = engine_name(engine)

    @functools.cached_property
    def engine(self) -> Engine:
        return engine(self._engine_name)

    @functools.cached_property
    def runtime_identity(self) -> str:
        """The evaluator's name and versions, recorded with each evaluation (read once)."""
        return self.engine.identity()

    def validate(self, content: PolicySetContent, *, timeout_seconds: float = 10.0) -> None:
        """Refuse a policy set that cannot be published (see ``validate_policy_set``)."""
        validate_policy_set(
            content,
            timeout_seconds=timeout_seconds,
            isolation=self._isolation,
            engine_name=self._engine_name,
        )

    def _payloads(
        self,
        sets: Sequence[PolicySetContent],
        policy_input: Mapping[str, Any] | PolicyInputs,
    ) -> list[Any]:
        """One payload per set, built once per distinct document. For ``PolicyInputs``
        the canonical JSON is the very bytes the recorded input digest covers."""
        chosen = self.engine
        built: dict[str, Any] = {}
        out = []
        for content in sets:
            if isinstance(policy_input, PolicyInputs):
                key = content.input_shape
                if key not in built:
                    shape = key
                    built[key] = chosen.payload(
                        policy_input.document(shape),
                        functools.partial(policy_input.canonical, shape),
                    )
            else:
                key = ""
                if key not in built:
                    built[key] = chosen.payload(
                        policy_input, functools.partial(canonical_json, policy_input)
                    )
            out.append(built[key])
        return out

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
        deadline = time.monotonic() + timeout_seconds
        chosen = self.engine
        payloads = self._payloads(sets, policy_input)
        for content in sets:  # warm the compiled-source cache before forking
            # a set that cannot be upgraded is reported by the work, as one that did not load
            with contextlib.suppress(InvalidPolicySet):
                chosen.compiled(content.modules)
        expected = [(content, policy) for content in sets for policy in content.policies]
        first_index = [0]
        for content in sets:
            first_index.append(first_index[-1] + len(content.policies))
        records: dict[int, Record] = {}
        position = 0
        failure: Stopped | None = None
        while position < len(sets):
            work = functools.partial(
                chosen.evaluate_work,
                sets[position:],
                first_index[position],
                payloads[position:],
                self._max_messages,
            )
            found, failure = run_isolated(
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
                failure = Stopped(True, f"timed out after {timeout_seconds:g}s")
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
