"""Engine-neutral reading of a policy set's sources: calls to functions the engine
lacks, and where a queried rule is defined."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runplane.domain.policy import PolicyModule
from runplane.domain.rego_v0 import Tok, calls, function_heads, import_aliases, tokens

_SPECIAL: frozenset[str] = frozenset({"print"})
"""Functions the engines evaluate that their builtin lists leave out."""


def unknown_function(
    is_builtin: Callable[[str], bool], engine: str, modules: Iterable[PolicyModule]
) -> str | None:
    """``module line N calls NAME, ...`` for the first call to a function that neither the
    engine (``is_builtin``; ``engine`` names it in the message) nor the modules define, or
    None.

    Both engines report an unknown function only when a query reaches it: a rule no
    policy queries yet would hide it until it is used.
    """
    modules = list(modules)
    defined = set().union(*(function_heads(m.source) for m in modules))
    for module in modules:
        aliases = import_aliases(module.source) | {"data"}
        for name, line in calls(module.source):
            if name in defined or name.split(".", 1)[0] in aliases or name in _SPECIAL:
                continue
            if not is_builtin(name):
                return (
                    f"{module.name} line {line} calls {name}, a function the evaluator does "
                    f"not have ({engine}) and no module of the set defines"
                )
    return None


def rule_location(modules: Iterable[PolicyModule], query: str) -> str:
    """`` (rule NAME: MODULE line N)`` for the first module defining the rule ``query``
    names, or an empty string."""
    from runplane.domain.policy_packaging import package_of
    from runplane.domain.rego_v0 import tokens

    path = query.removeprefix("data.").split(".")
    for module in modules:
        package = package_of(module.source)
        if package is None or path[: package.count(".") + 1] != package.split("."):
            continue
        rest = path[package.count(".") + 1 :]
        if not rest:
            continue
        toks = tokens(module.source)
        for i, tok in enumerate(toks):
            at_line_start = i == 0 or toks[i - 1].kind == "nl"
            is_default = tok.text == "default" and i + 1 < len(toks)
            head = toks[i + 1] if is_default else tok
            if at_line_start and head.kind == "ident" and head.text == rest[0]:
                return f" (rule {rest[0]}: {module.name} line {head.line})"
    return ""


_OPERATORS: frozenset[str] = frozenset({"+", "-", "*", "/", "%", "&", "|"})
"""Infix operators that are builtins (``plus``, ``minus``, ``mul``, ``div``, ``rem``,
``and``, ``or``): an engine locates their errors at the operator."""
_OPENING: dict[str, str] = {")": "(", "]": "[", "}": "{"}


def builtin_at(
    source: str, line: int, column: int, is_builtin: Callable[[str], bool]
) -> str | None:
    """The builtin whose call an engine's error at ``line``/``column`` (1-based) of
    ``source`` points into: the operator there (``/``), else the innermost call enclosing
    it when ``is_builtin`` says the called name is a builtin (``count``,
    ``json.unmarshal``); None for anything else (a call to a function of the set, a
    conflict between rules)."""
    lines = source.split("\n")
    if not 1 <= line <= len(lines):
        return None
    offset = sum(len(text) + 1 for text in lines[: line - 1]) + max(column - 1, 0)
    toks = [t for t in tokens(source) if t.kind != "nl"]
    here = next((k for k, t in enumerate(toks) if t.end > offset), len(toks))
    at = toks[here].text if here < len(toks) and toks[here].start <= offset else ""
    if at in _OPERATORS:
        return at
    closed: list[str] = []
    for k in range(here if at in ("(", "[", "{") else here - 1, -1, -1):
        text = toks[k].text
        if toks[k].kind != "op":
            continue
        if text in _OPENING:
            closed.append(_OPENING[text])
        elif text in ("(", "[", "{"):
            if closed:
                if closed.pop() != text:
                    return None  # unbalanced: no guess
                continue
            name = _called_name(toks, k) if text == "(" else None
            if name is not None:
                return name if is_builtin(name) else None
    return None


def _called_name(toks: list[Tok], paren: int) -> str | None:
    """The dotted name right before the ``(`` at ``paren`` (``json.unmarshal``), or None."""
    parts: list[str] = []
    k = paren - 1
    while k >= 0 and toks[k].kind == "ident" and toks[k].end == toks[k + 1].start:
        parts.append(toks[k].text)
        if k >= 1 and toks[k - 1].text == "." and toks[k - 1].end == toks[k].start:
            k -= 2
            continue
        break
    return ".".join(reversed(parts)) or None
