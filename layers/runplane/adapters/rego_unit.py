"""Policy unit tests run with the production evaluator, isolated like evaluations.

Every test runs in a forked child process (``runplane.adapters.rego_isolation``); a
crash errors the test it stopped, and the tests after it run in a fresh child. Both
engines support ``with input as ...`` and ``with data.x as ...``; rego-cpp 1.5.2 (the
``regopy`` engine) crashes (signal 11) on some ``with input as`` over rules that read
other rules that read ``input``, regorus does not.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

from runplane.adapters.rego import engine as _engine
from runplane.adapters.rego_isolation import Isolation, run_isolated
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyModule
from runplane.domain.policy_unit_tests import UnitTest, UnitTestOutcome, UnitTestResult


def run_unit_tests(
    modules: Sequence[PolicyModule],
    tests: Sequence[UnitTest],
    *,
    timeout_seconds: float = 60.0,
    isolation: Isolation = "process",
    engine: str | None = None,
) -> list[UnitTestResult]:
    """One result per test, in order. ``modules`` are the policies and the test modules;
    ``engine`` names the engine (the default one if None).

    Raises ``InvalidPolicySet`` (naming the module and line) if a module does not parse,
    cannot be upgraded from Rego v0, or calls a function the evaluator does not have.
    """
    chosen = _engine(engine)
    for module in modules:
        chosen.compiled(module)  # refuses what cannot be upgraded, before forking
    records: dict[int, dict[str, str]] = {}
    deadline = time.monotonic() + timeout_seconds
    first = 0
    reason = ""
    while first < len(tests):
        found, stopped = run_isolated(
            functools.partial(chosen.unit_work, modules, tests, first),
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
