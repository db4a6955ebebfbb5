"""Policy unit tests run with the production evaluator, isolated like evaluations.

Every test runs in a forked child process (``runplane.adapters.rego``); a crash errors
the test it stopped, and the tests after it run in a fresh child. rego-cpp 1.5.2
supports ``with input as ...`` and ``with data.x as ...``, but it crashes (signal 11) on
some ``with input as`` over rules that read other rules that read ``input``.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence

from regopy import RegoError  # type: ignore[import-untyped]

from runplane.adapters.rego import (
    Isolation,
    _Emit,
    _interpreter,
    _parse_errors,
    _query,
    _QueryError,
    _run,
    _short,
)
from runplane.adapters.rego_source import add_modules, unknown_function
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyModule
from runplane.domain.policy_unit_tests import UnitTest, UnitTestOutcome, UnitTestResult


def _work(
    modules: Sequence[PolicyModule],
    tests: Sequence[UnitTest],
    first: int,
    stop: threading.Event,
    emit: _Emit,
) -> None:
    sources = {m.name: m.source for m in modules}
    interpreter = _interpreter()
    try:
        add_modules(interpreter, modules)
    except RegoError as error:
        emit({"i": -1, "refused": _short(_parse_errors(str(error), sources))})
        return
    except InvalidPolicySet as error:
        emit({"i": -1, "refused": str(error)})
        return
    unknown = unknown_function(interpreter, modules)
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


def run_unit_tests(
    modules: Sequence[PolicyModule],
    tests: Sequence[UnitTest],
    *,
    timeout_seconds: float = 60.0,
    isolation: Isolation = "process",
) -> list[UnitTestResult]:
    """One result per test, in order. ``modules`` are the policies and the test modules.

    Raises ``InvalidPolicySet`` (naming the module and line) if a module does not parse,
    cannot be upgraded from Rego v0, or calls a function the evaluator does not have.
    """
    records: dict[int, dict[str, str]] = {}
    deadline = time.monotonic() + timeout_seconds
    first = 0
    reason = ""
    while first < len(tests):
        found, stopped = _run(
            functools.partial(_work, modules, tests, first),
            deadline - time.monotonic(),
            isolation,
        )
        if -1 in found:
            raise InvalidPolicySet(str(found[-1]["refused"]))
        records.update(found)
        if stopped is None:
            break
        reason = stopped.reason
        culprit = next((i for i in range(first, len(tests)) if i not in records), None)
        if culprit is None or stopped.timed_out:
            break
        records[culprit] = {"outcome": "ERROR", "message": reason}
        first = culprit + 1
    results = []
    for index, test in enumerate(tests):
        record = records.get(index) or {"outcome": "ERROR", "message": f"not run: {reason}"}
        results.append(
            UnitTestResult(test, UnitTestOutcome(record["outcome"]), record.get("message", ""))
        )
    return results
