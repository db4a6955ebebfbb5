"""Policy unit tests run with the production evaluator, isolated like evaluations.

Every test runs in a forked child process (``runplane.adapters.rego_isolation``); a
crash errors the test it stopped, and the tests after it run in a fresh child. Both
engines support ``with input as ...`` and ``with data.x as ...``; rego-cpp 1.5.2 (the
``regopy`` engine) crashes (signal 11) on some ``with input as`` over rules that read
other rules that read ``input``, regorus does not.

The tests' ``data`` is read from the directory's JSON and YAML files as ``opa test``
reads them (``load_unit_data``; placement and merging in
``runplane.domain.policy_unit_tests``).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runplane.adapters.rego import engine as _engine
from runplane.adapters.rego_isolation import Isolation, run_isolated
from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyModule
from runplane.domain.policy_files import data_files
from runplane.domain.policy_unit_tests import (
    UnitTest,
    UnitTestOutcome,
    UnitTestResult,
    merge_data,
)


def load_unit_data(root: Path) -> dict[str, Any]:
    """The ``data`` document of the directory's data files; ``InvalidPolicySet`` names a
    file that does not parse or that conflicts with another."""
    documents = []
    for path in data_files(root):
        name = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InvalidPolicySet(f"data file {name} is not UTF-8 text") from None
        value = _parse_json(name, text) if path.suffix == ".json" else _parse_yaml(name, text)
        directory = path.relative_to(root).parent.parts
        documents.append((name, directory, value))
    return merge_data(documents)


def _parse_json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise InvalidPolicySet(f"data file {name} is not valid JSON: {error}") from None


def _parse_yaml(name: str, text: str) -> Any:
    import yaml  # only the CLI reads YAML data files

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise InvalidPolicySet(f"data file {name} is not valid YAML{line}") from None


def run_unit_tests(
    modules: Sequence[PolicyModule],
    tests: Sequence[UnitTest],
    *,
    data: Mapping[str, Any] | None = None,
    timeout_seconds: float = 60.0,
    isolation: Isolation = "process",
    engine: str | None = None,
    strict_builtin_errors: bool = False,
) -> list[UnitTestResult]:
    """One result per test, in order. ``modules`` are the policies and the test modules;
    ``data`` is the tests' base ``data`` document (``load_unit_data``); ``engine`` names
    the engine (the default one if None).

    As ``opa test`` runs them, a builtin error (``count(null)``, ``to_number("x")``)
    makes the call undefined, and the test passes or fails on its assertions; with
    ``strict_builtin_errors`` it errors the test, as every evaluation of a run does.
    regopy does either; regorus always errors (its binding exposes no setting), and the
    test's message then names the builtin and says so.

    Raises ``InvalidPolicySet`` (naming the module and line) if a module does not parse,
    cannot be upgraded from Rego v0, or calls a function the evaluator does not have,
    or if the data conflicts with the modules.
    """
    chosen = _engine(engine)
    chosen.compiled(modules)  # refuses what cannot be upgraded, before forking
    data_json = json.dumps(data or {}, ensure_ascii=False)
    records: dict[int, dict[str, str]] = {}
    deadline = time.monotonic() + timeout_seconds
    first = 0
    reason = ""
    while first < len(tests):
        found, stopped = run_isolated(
            functools.partial(
                chosen.unit_work, modules, tests, first, data_json, strict_builtin_errors
            ),
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
