"""Policy unit tests, as ``opa test DIR`` runs them: every ``test_*`` rule of the modules.

Pure: standard library only; the evaluator runs them (``runplane.adapters.rego_unit``).
A test module is a ``*_test.rego`` or ``*.test.rego`` file; it is never published. A test
passes when its rule is ``true``; ``false`` or undefined fails it, and an evaluation
error or a crash errors it.

The directory's data files (``*.json``, ``*.yaml``, ``*.yml``) are the tests' ``data``,
placed as ``opa test DIR`` places them: a file in ``DIR/a/b/`` is merged at
``data.a.b``, a file at the top of ``DIR`` (which must hold an object) at ``data``
itself; the file's own name is not part of the path. Objects merge; two files setting
the same key to anything but objects are refused, as OPA's loader refuses them.
``policy-set.json`` (Runplane's own metadata) is not data; hidden files and directories
are skipped, as for modules. The files are read by ``runplane.domain.policy_files``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import PolicyModule
from runplane.domain.policy_files import read_modules
from runplane.domain.policy_packaging import package_of
from runplane.domain.rego_v0 import rule_heads, tokens


class UnitTestOutcome(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"


@dataclass(frozen=True)
class UnitTest:
    package: str
    rule: str
    module: str
    line: int

    @property
    def query(self) -> str:
        return f"data.{self.package}.{self.rule}"


@dataclass(frozen=True)
class UnitTestResult:
    test: UnitTest
    outcome: UnitTestOutcome
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "test": self.test.query,
            "module": self.test.module,
            "line": self.test.line,
            "outcome": str(self.outcome),
            "message": self.message,
        }


def discover(modules: Iterable[PolicyModule]) -> list[UnitTest]:
    """The ``test_*`` rules of ``modules``, modules by name, rules in source order; a
    rule defined in several places of one package is one test. ``opa test`` runs them
    wherever they are: pass the policies and the test modules."""
    found: dict[str, UnitTest] = {}
    for module in sorted(modules, key=lambda m: m.name):
        package = package_of(module.source)
        if package is None:
            continue
        lines = _head_lines(module.source)
        for rule in rule_heads(module.source):
            if rule.startswith("test_"):
                test = UnitTest(package, rule, module.name, lines.get(rule, 0))
                found.setdefault(test.query, test)
    return list(found.values())


def _head_lines(source: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    toks = tokens(source)
    for i, tok in enumerate(toks):
        if tok.kind == "ident" and (i == 0 or toks[i - 1].kind == "nl"):
            lines.setdefault(tok.text, tok.line)
    return lines


def read_test_modules(root: Path) -> list[PolicyModule]:
    """The test modules under ``root`` (subdirectories too), named by their path."""
    return read_modules(root, tests=True)


def merge_data(documents: Iterable[tuple[str, Sequence[str], Any]]) -> dict[str, Any]:
    """``data`` from ``(file name, directory path, value)`` of each data file, as
    ``opa test`` merges them; raises ``InvalidPolicySet`` naming the files that
    disagree, or a top-level file that is not an object."""
    data: dict[str, Any] = {}
    origin: dict[tuple[str, ...], str] = {}
    for name, directory, value in documents:
        path = tuple(directory)
        if not path and not isinstance(value, Mapping):
            raise InvalidPolicySet(
                f"data file {name} holds no object: a data file at the top of the directory "
                "is merged at data, which is an object"
            )
        _merge_at(data, path, value, name, origin)
    return data


def _merge_at(
    data: dict[str, Any],
    path: tuple[str, ...],
    value: Any,
    name: str,
    origin: dict[tuple[str, ...], str],
) -> None:
    node = data
    for depth, key in enumerate(path):
        here = path[: depth + 1]
        child = node.get(key)
        if child is None:
            child = node[key] = {}
            origin.setdefault(here, name)
        elif not isinstance(child, dict):
            raise _conflict(here, name, origin)
        node = child
    if not path:
        _merge(node, value, (), name, origin)
    elif isinstance(value, Mapping):
        _merge(node, value, path, name, origin)
    elif node:  # a non-object where another file put values
        raise _conflict(path, name, origin)
    else:
        _set(data, path, value)
        origin[path] = name


def _merge(
    into: dict[str, Any],
    value: Mapping[str, Any],
    path: tuple[str, ...],
    name: str,
    origin: dict[tuple[str, ...], str],
) -> None:
    for key, item in value.items():
        here = (*path, str(key))
        if key not in into:
            into[key] = item
            origin[here] = name
        elif isinstance(into[key], dict) and isinstance(item, Mapping):
            _merge(into[key], item, here, name, origin)
        else:  # as OPA's loader: even an equal value set twice is a conflict
            raise _conflict(here, name, origin)


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _conflict(path: tuple[str, ...], name: str, origin: Mapping[tuple[str, ...], str]) -> Exception:
    where = "data" + "".join(f".{p}" if p.isidentifier() else f'["{p}"]' for p in path)
    other = next(
        (origin[path[:n]] for n in range(len(path), 0, -1) if path[:n] in origin), "another file"
    )
    return InvalidPolicySet(
        f"data file {name} sets {where}, which {other} sets too (only objects merge; opa "
        "test refuses the same conflict)"
    )


def failed(results: Sequence[UnitTestResult]) -> int:
    return sum(1 for r in results if r.outcome is not UnitTestOutcome.PASS)


def report(results: Sequence[UnitTestResult]) -> list[str]:
    """``opa test``-style lines: one per test, then a summary."""
    lines = []
    for result in results:
        where = f"{result.test.module} line {result.test.line}"
        tail = f": {result.message}" if result.message else ""
        lines.append(f"{result.outcome.value:<5} {result.test.query} ({where}){tail}")
    total = len(results)
    lines.append("-" * 72)
    for outcome in UnitTestOutcome:
        count = sum(1 for r in results if r.outcome is outcome)
        if count:
            lines.append(f"{outcome.value}: {count}/{total}")
    if not total:
        lines.append("no tests: name test rules test_* in *_test.rego or *.test.rego files")
    return lines
