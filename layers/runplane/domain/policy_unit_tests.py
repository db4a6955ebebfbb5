"""Policy unit tests, as ``opa test`` runs them: every ``test_*`` rule of a test module.

Pure: standard library only; the evaluator runs them (``runplane.adapters.rego_unit``).
A test module is a ``*_test.rego`` file; it is never published. A test passes when its
rule is ``true``; ``false`` or undefined fails it, and an evaluation error or a crash
errors it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from runplane.domain.policy import PolicyModule
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
    rule defined in several places of one package is one test."""
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
        lines.append("no tests: name test rules test_* in *_test.rego files")
    return lines
