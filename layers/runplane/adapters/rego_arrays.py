"""Evaluating set-valued policy rules as arrays, for rego-cpp's speed.

rego-cpp 1.5.2 builds a set in time quadratic in its size: a partial set rule
(``deny contains msg if {...}``) or a set comprehension (``deny := {msg | ...}``) with
1,924 violations over 1,000 resource changes takes ~4 s, where the same body as an
array comprehension takes ~0.15 s. Most third-party policies are written the first way.

So, at evaluation only, each queried rule whose every definition is such a form gets
a companion rule per definition, ``<rule>_runplane_array_<n> := [<head> | <body>]``,
in a generated module of the same package with the same imports; the policy's result
is the union of the companions' arrays (deduplicated, as a set would be). The
published modules are untouched and still compiled as they are (other rules may refer
to the set rule). Anything the lexical scan cannot match exactly is left alone, and
a companion module that fails to compile is dropped (the set rule is queried then).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from runplane.domain.policy import PolicyModule, PolicySetContent
from runplane.domain.policy_capabilities import _blank_comments_and_strings

SUFFIX: Final = "_runplane_array_"
_PACKAGE = re.compile(r"(?m)^[ \t]*package[ \t]+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_]\w*)*)")
_IMPORT = re.compile(r"(?m)^[ \t]*import[ \t]+[^\n]*$")
_OPEN: Final = {"{": "}", "[": "]", "(": ")"}


@dataclass(frozen=True)
class ArrayPlan:
    """Generated modules, and for each rewritten query the entrypoints whose arrays
    together hold its set (bundle entrypoint form, ``a/b/rule``)."""

    modules: tuple[PolicyModule, ...]
    entrypoints: Mapping[str, tuple[str, ...]]


def _closing(blanked: str, start: int) -> int | None:
    """The index of the bracket closing the one at ``start`` (strings and comments
    already blanked), or None."""
    stack = []
    for i in range(start, len(blanked)):
        c = blanked[i]
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in ")]}":
            if not stack or stack.pop() != c:
                return None
            if not stack:
                return i
    return None


def _top_level(blanked: str, start: int, end: int, char: str) -> int | None:
    """The first ``char`` between ``start`` and ``end`` outside nested brackets."""
    depth = 0
    for i in range(start, end):
        c = blanked[i]
        if c in _OPEN:
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == char and depth == 0:
            return i
    return None


def _ends_line(blanked: str, close: int) -> bool:
    """Whether nothing but blanks follows ``close`` on its line (no ``if``, no ``else``)."""
    end = blanked.find("\n", close)
    return not blanked[close + 1 : len(blanked) if end < 0 else end].strip()


def _companions(source: str, blanked: str, rule: str) -> list[str] | None:
    """``[head | body]`` for each definition of ``rule`` in one module, or None if any
    definition is not a partial set rule with a braced body or a set comprehension."""
    heads = list(re.finditer(rf"(?m)^[ \t]*(?:default[ \t]+)?{re.escape(rule)}\b", blanked))
    contains = re.compile(rf"[ \t]*{re.escape(rule)}[ \t]+contains[ \t]+([^\n]*?)[ \t]+if[ \t]*\{{")
    assigned = re.compile(rf"[ \t]*{re.escape(rule)}[ \t]*:=[ \t]*\{{")
    arrays = []
    for head in heads:
        at = head.start()
        if match := contains.match(blanked, at):
            brace = match.end() - 1
            close = _closing(blanked, brace)
            if close is None or not _ends_line(blanked, close):
                return None
            term = source[match.start(1) : match.end(1)]
            arrays.append(f"[{term} |\n{source[brace + 1 : close]}\n]")
        elif match := assigned.match(blanked, at):
            brace = match.end() - 1
            close = _closing(blanked, brace)
            if close is None or not _ends_line(blanked, close):
                return None
            bar = _top_level(blanked, brace + 1, close, "|")
            colon = _top_level(blanked, brace + 1, bar, ":") if bar is not None else None
            if bar is None or colon is not None:  # a set literal or an object comprehension
                return None
            arrays.append(f"[{source[brace + 1 : bar]}|{source[bar + 1 : close]}]")
        else:
            return None
    return arrays


def array_plan(content: PolicySetContent) -> ArrayPlan:
    """The companions for every policy of ``content`` whose rule can be rewritten."""
    modules = [(m, _blank_comments_and_strings(m.source)) for m in content.modules]
    by_package: dict[str, list[tuple[PolicyModule, str]]] = {}
    for module, blanked in modules:
        for package in _PACKAGE.findall(blanked):
            by_package.setdefault(package, []).append((module, blanked))
    generated: list[PolicyModule] = []
    entrypoints: dict[str, tuple[str, ...]] = {}
    everything = "\n".join(m.source for m in content.modules)
    for query in dict.fromkeys(p.query for p in content.policies):
        path = query.split(".")[1:]
        package, rule = ".".join(path[:-1]), path[-1]
        members = by_package.get(package)
        if not members or SUFFIX in everything:
            continue
        rules: list[tuple[PolicyModule, str, list[str]]] = []
        for module, blanked in members:
            arrays = _companions(module.source, blanked, rule)
            if arrays is None:
                break
            if arrays:
                imports = "\n".join(
                    module.source[m.start() : m.end()] for m in _IMPORT.finditer(blanked)
                )
                rules.append((module, imports, arrays))
        else:
            names = _generate(package, rule, rules, len(generated), generated)
            if names:
                entrypoints[query] = tuple("/".join([*path[:-1], name]) for name in names)
    return ArrayPlan(tuple(generated), entrypoints)


def _generate(
    package: str,
    rule: str,
    rules: Sequence[tuple[PolicyModule, str, list[str]]],
    first: int,
    out: list[PolicyModule],
) -> list[str]:
    names: list[str] = []
    for k, (_, imports, arrays) in enumerate(rules):
        lines = [f"package {package}", "", imports, ""]
        for array in arrays:
            name = f"{rule}{SUFFIX}{len(names)}"
            names.append(name)
            lines.append(f"{name} := {array}\n")
        out.append(PolicyModule(f"_runplane_array_{first + k}.rego", "\n".join(lines)))
    return names
