"""Rego v0 modules, upgraded to the v1 syntax the evaluator reads.

Pure: standard library only. The evaluators read every module as Rego v1, where a v0 partial
set rule (``deny[msg] { ... }``) means an *object* keyed by its messages, so a v0 policy
would be refused ("is an object") or, worse, read differently. The published source
stays the author's text (it is what the digest covers); the evaluator compiles
``compiled_source(...)``, a deterministic, conservative, lexical rewrite of the common
v0 forms that keeps every line where it was, so compile errors still point at the
author's lines:

- ``name[x] { body }`` and, in a v0 module, ``name[x] if { body }`` (a partial set)
  become ``name contains x if { body }``;
- ``name { body }``, ``name = v { body }``, ``f(x) = v { body }``, ``name[k] = v { body }``
  and ``else = v { body }`` gain the ``if`` v1 requires;
- ``default name = v`` becomes ``default name := v``.

``import rego.v1`` is not added: both engines read v1 without it, and a new line would
move every line after it. A module is v0 when it does not import ``rego.v1`` and it
imports ``future.keywords``, or has a rule body without ``if``, or a ``default`` rule
assigned with ``=``. Anything the rewrite cannot handle is refused with the module,
line, construct and fix (``InvalidPolicySet``).

For rego-cpp only (the ``regopy`` engine), independently of the version, ``sprintf``
format strings written as literals have ``%q`` replaced by ``\\"%v\\"`` (rego-cpp 1.5.2
prints ``%q`` verbatim; for strings the two print the same), and names rego-cpp reads as
keywords (``contains``, ``in``, ``every``, ``if``) used as variables are refused with a
clear message. regorus reads both as OPA does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from runplane.domain.errors import InvalidPolicySet

_KEYWORDS: Final = frozenset({"contains", "in", "every", "if"})
_OPEN: Final = {"(": ")", "[": "]", "{": "}"}
_CLOSE: Final = frozenset(_OPEN.values())
_MULTI: Final = (":=", "==", "!=", "<=", ">=")


@dataclass(frozen=True)
class Tok:
    kind: str
    """``ident``, ``str``, ``num``, ``nl`` (a newline) or ``op`` (punctuation)."""
    text: str
    start: int
    end: int
    line: int


def tokens(source: str) -> list[Tok]:
    """Rego tokens with their offsets; comments are dropped, newlines kept."""
    out: list[Tok] = []
    i, line, n = 0, 1, len(source)
    while i < n:
        c = source[i]
        if c == "\n":
            out.append(Tok("nl", c, i, i + 1, line))
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif c == "#":
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif c == '"':
            j = i + 1
            while j < n and source[j] not in '"\n':
                j += 2 if source[j] == "\\" else 1
            out.append(Tok("str", source[i : min(j + 1, n)], i, min(j + 1, n), line))
            i = j + 1
        elif c == "`":
            end = source.find("`", i + 1)
            end = n - 1 if end < 0 else end
            out.append(Tok("str", source[i : end + 1], i, end + 1, line))
            line += source.count("\n", i, end)
            i = end + 1
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (source[j].isalnum() or source[j] == "_"):
                j += 1
            out.append(Tok("ident", source[i:j], i, j, line))
            i = j
        elif c.isdigit():
            j = i + 1
            while j < n and (source[j].isalnum() or source[j] in "_."):
                j += 1
            out.append(Tok("num", source[i:j], i, j, line))
            i = j
        else:
            pair = source[i : i + 2]
            size = 2 if pair in _MULTI else 1
            out.append(Tok("op", source[i : i + size], i, i + size, line))
            i += size
    return out


@dataclass(frozen=True)
class Upgrade:
    source: str
    """The text the evaluator compiles."""
    rewrites: tuple[str, ...]
    """What was changed, one ``line N: ...`` entry per change (empty: nothing)."""
    v0: bool
    """Whether the module was read as Rego v0 and upgraded."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


def compiled_source(module: str, source: str, *, rego_cpp: bool = False) -> Upgrade:
    """The v1 text the evaluator compiles for ``source`` (see the module docstring).

    ``rego_cpp``: also work around rego-cpp 1.5.2 (``%q``, keywords as names); regorus
    needs only the v0 upgrade. Raises ``InvalidPolicySet`` naming ``module`` and the line
    for a construct that cannot be upgraded (or that rego-cpp would misread).
    """
    toks = tokens(source)
    if rego_cpp:
        _refuse_keyword_names(module, toks)
    edits: list[_Edit] = []
    notes: list[str] = []
    v0 = _is_v0(toks)
    if v0:
        edits, notes = _Rules(module, toks).upgrade()
    for edit, note in _sprintf_q(toks) if rego_cpp else ():
        edits.append(edit)
        notes.append(note)
    if not edits:
        return Upgrade(source, (), v0=False)
    text = source
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return Upgrade(text, tuple(notes), v0=v0)


def _line_starts(toks: list[Tok]) -> list[int]:
    """Indexes of tokens that start a line (outside brackets)."""
    starts, depth, fresh = [], 0, True
    for i, tok in enumerate(toks):
        if tok.kind == "nl":
            fresh = fresh or depth == 0
            continue
        if fresh and depth == 0:
            starts.append(i)
        fresh = False
        if tok.text in _OPEN and tok.kind == "op":
            depth += 1
        elif tok.text in _CLOSE and tok.kind == "op":
            depth = max(0, depth - 1)
    return starts


def _is_v0(toks: list[Tok]) -> bool:
    imports = [path for path, _ in _imports(toks)]
    if "rego.v1" in imports:
        return False
    if any(name == "future.keywords" or name.startswith("future.keywords.") for name in imports):
        return True
    rules = _Rules("", toks)
    return any(rules.head_is_v0(i) for i in _line_starts(toks))


def _imports(toks: list[Tok]) -> list[tuple[str, str]]:
    """``(path, alias)`` of each import (alias empty when there is none)."""
    found = []
    for i in _line_starts(toks):
        if toks[i].text == "import" and toks[i].kind == "ident":
            parts, alias, j = [], "", i + 1
            while j < len(toks) and toks[j].kind != "nl":
                if toks[j].kind == "ident" and toks[j].text == "as" and j + 1 < len(toks):
                    alias = toks[j + 1].text
                    break
                parts.append(toks[j].text)
                j += 1
            found.append(("".join(parts), alias))
    return found


class _Rules:
    """Walks the rule heads of a module (the tokens that start a top-level line)."""

    def __init__(self, module: str, toks: list[Tok]) -> None:
        self.module = module
        self.toks = toks

    def _tok(self, i: int) -> Tok | None:
        return self.toks[i] if i < len(self.toks) else None

    def _is(self, i: int, text: str) -> bool:
        tok = self._tok(i)
        return tok is not None and tok.text == text and tok.kind in ("op", "ident")

    def _group_end(self, i: int) -> int:
        """The index after the bracket group opening at ``i``."""
        depth = 0
        for j in range(i, len(self.toks)):
            tok = self.toks[j]
            if tok.kind != "op":
                continue
            if tok.text in _OPEN:
                depth += 1
            elif tok.text in _CLOSE:
                depth -= 1
                if depth == 0:
                    return j + 1
        raise self._refuse(self.toks[i].line, f"an unclosed {self.toks[i].text!r}", "close it")

    def _term_end(self, i: int) -> int:
        """The index after the term starting at ``i`` (a head's value)."""
        tok = self._tok(i)
        if tok is None or tok.kind == "nl":
            line = self.toks[i - 1].line
            raise self._refuse(line, "a rule head with no value after '='", "give it a value")
        if tok.kind == "op" and tok.text == "-":
            return self._term_end(i + 1)
        if tok.kind == "op" and tok.text in _OPEN:
            i = self._group_end(i)
        else:
            i += 1
        while (nxt := self._tok(i)) is not None and nxt.kind == "op":
            if nxt.text == "." and (after := self._tok(i + 1)) and after.kind == "ident":
                i += 2
            elif nxt.text in ("[", "("):
                i = self._group_end(i)
            else:
                break
        return i

    def _refuse(self, line: int, construct: str, fix: str) -> InvalidPolicySet:
        return InvalidPolicySet(
            f"{self.module} line {line}: Rego v0 {construct} cannot be upgraded to v1: {fix}"
        )

    def _head(self, i: int) -> tuple[int, int | None, int | None, int] | None:
        """``(after_name, key_start, value_op, after_head)`` of the rule at ``i``, or None
        for a line that is not a rule head (``package``, ``import``, anything else)."""
        tok = self.toks[i]
        if tok.kind != "ident" or tok.text in ("package", "import"):
            return None
        j = i + 1
        if tok.text == "default":
            j += 1
        while self._is(j, ".") and (nxt := self._tok(j + 1)) and nxt.kind == "ident":
            j += 2
        after_name = j
        key = None
        if self._is(j, "["):
            key = j
            j = self._group_end(j)
        if self._is(j, "("):
            j = self._group_end(j)
        value_op = None
        if self._is(j, "=") or self._is(j, ":="):
            value_op = j
            j = self._term_end(j + 1)
        return after_name, key, value_op, j

    def head_is_v0(self, i: int) -> bool:
        try:
            head = self._head(i)
        except InvalidPolicySet:
            return False
        if head is None:
            return False
        _, _, value_op, end = head
        if self.toks[i].text == "default":
            return value_op is not None and self.toks[value_op].text == "="
        return self._is(end, "{")

    def upgrade(self) -> tuple[list[_Edit], list[str]]:
        """The edits that make this v0 module v1, and a description of each."""
        edits: list[_Edit] = []
        notes: list[str] = []
        for i in _line_starts(self.toks):
            if self.toks[i].text == "else":
                continue  # a branch of the rule above, upgraded with it
            head = self._head(i)
            if head is None:
                continue
            _, key, value_op, end = head
            tok, name = self.toks[i], _name(self, i)
            if tok.text == "default":
                if value_op is not None and self.toks[value_op].text == "=":
                    op = self.toks[value_op]
                    edits.append(_Edit(op.start, op.end, ":="))
                    notes.append(f"line {op.line}: default {name} = -> default {name} :=")
                continue
            if self._is(end, "contains"):
                continue  # already a v1 multi-value head
            if key is not None and value_op is None and self._group_end(key) == end:
                # A partial set rule: name[x] -> name contains x
                opening, closing = self.toks[key], self.toks[end - 1]
                edits.append(_Edit(opening.start, opening.end, " contains "))
                edits.append(_Edit(closing.start, closing.end, ""))
                notes.append(
                    f"line {tok.line}: partial set rule {name}[...] -> {name} contains ..."
                )
            self._bodies(end, name, tok.line, edits, notes)
        return edits, notes

    def _skip_newlines(self, j: int) -> int:
        while (tok := self._tok(j)) is not None and tok.kind == "nl":
            j += 1
        return j

    def _bodies(self, j: int, name: str, line: int, edits: list[_Edit], notes: list[str]) -> None:
        """Add ``if`` before each v0 body of a rule and of its ``else`` branches."""
        if not self._is(j, "{"):
            return  # a body-less rule, or a v1 ``if``
        brace = self.toks[j]
        edits.append(_Edit(brace.start, brace.start, "if "))
        notes.append(f"line {brace.line}: rule {name} body -> if {{ ... }}")
        j = self._group_end(j)
        if self._is(j, "{"):
            raise self._refuse(
                self.toks[j].line,
                f"rule {name} (line {line}) with several bodies",
                "write one rule per body, each with the same head",
            )
        while self._is(k := self._skip_newlines(j), "else"):
            j = k + 1
            if self._is(j, "=") or self._is(j, ":="):
                j = self._term_end(j + 1)
            if not self._is(j, "{"):
                return  # a v1 ``else ... if``, or a body-less else
            brace = self.toks[j]
            edits.append(_Edit(brace.start, brace.start, "if "))
            notes.append(f"line {brace.line}: else body -> else if {{ ... }}")
            j = self._group_end(j)


def _name(rules: _Rules, i: int) -> str:
    toks = rules.toks
    j = i + 1 if toks[i].text == "default" else i
    parts = [toks[j].text]
    j += 1
    while rules._is(j, ".") and (nxt := rules._tok(j + 1)) and nxt.kind == "ident":
        parts.append(nxt.text)
        j += 2
    return ".".join(parts)


def _refuse_keyword_names(module: str, toks: list[Tok]) -> None:
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text not in _KEYWORDS:
            continue
        if i > 0 and toks[i - 1].kind == "op" and toks[i - 1].text == ".":
            continue  # a field such as input.in
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        prev = toks[i - 1] if i > 0 else None
        assigned = nxt is not None and nxt.kind == "op" and nxt.text in (":=", "=")
        declared = prev is not None and prev.kind == "ident" and prev.text == "some"
        if assigned or declared:
            raise InvalidPolicySet(
                f"{module} line {tok.line}: {tok.text!r} is used as a name, but it is a Rego "
                f"keyword the evaluator cannot read as a variable: rename it "
                f"(for example {tok.text}_)"
            )


_Q: Final = re.compile(r"(?<!%)((?:%%)*)%q")


def _sprintf_q(toks: list[Tok]) -> list[tuple[_Edit, str]]:
    found = []
    for i in range(len(toks) - 2):
        a, b, c = toks[i], toks[i + 1], toks[i + 2]
        if (
            a.kind == "ident"
            and a.text == "sprintf"
            and (i == 0 or toks[i - 1].text != ".")
            and b.text == "("
            and c.kind == "str"
            and c.text.startswith('"')
        ):
            replaced = _Q.sub(lambda m: m.group(1) + '\\"%v\\"', c.text)
            if replaced != c.text:
                found.append(
                    (_Edit(c.start, c.end, replaced), f'line {c.line}: sprintf %q -> \\"%v\\"')
                )
    return found


# -- what a module defines and calls ----------------------------------------------------------

_NOT_CALLS: Final = frozenset(
    {"not", "some", "every", "if", "in", "with", "as", "else", "default", "contains", "import"}
)


def rule_heads(source: str) -> list[str]:
    """The names of the rules and functions ``source`` defines, in order, once each."""
    toks = tokens(source)
    names: list[str] = []
    for i in _line_starts(toks):
        tok = toks[i]
        if tok.kind != "ident" or tok.text in ("package", "import", "else"):
            continue
        j = i + 1 if tok.text == "default" else i
        if j < len(toks) and toks[j].kind == "ident" and toks[j].text not in names:
            names.append(toks[j].text)
    return names


def function_heads(source: str) -> set[str]:
    """The names of the functions ``source`` defines (a rule head followed by ``(``)."""
    toks = tokens(source)
    found = set()
    for i in _line_starts(toks):
        j = i
        parts = [toks[j].text]
        while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].kind == "ident":
            parts.append(toks[j + 2].text)
            j += 2
        if toks[i].kind == "ident" and j + 1 < len(toks) and toks[j + 1].text == "(":
            found.add(".".join(parts))
    return found


def import_aliases(source: str) -> set[str]:
    """The names ``source``'s imports bind (``import data.a.b`` binds ``b``)."""
    aliases = set()
    for path, alias in _imports(tokens(source)):
        if path.startswith(("future.", "rego.")):
            continue
        aliases.add(alias or path.rsplit(".", 1)[-1])
    return aliases


def calls(source: str) -> list[tuple[str, int]]:
    """``(name, line)`` of each function call in ``source`` (not its definitions), in order.

    A call is a dotted name not preceded by ``.`` and directly followed by ``(``.
    """
    toks = tokens(source)
    heads = set(_line_starts(toks))
    found: list[tuple[str, int]] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.kind != "ident" or (i > 0 and toks[i - 1].text == "."):
            i += 1
            continue
        start, parts = i, [tok.text]
        while i + 2 < len(toks) and toks[i + 1].text == "." and toks[i + 2].kind == "ident":
            parts.append(toks[i + 2].text)
            i += 2
        if (
            i + 1 < len(toks)
            and toks[i + 1].text == "("
            and start not in heads
            and parts[0] not in _NOT_CALLS
        ):
            found.append((".".join(parts), tok.line))
        i += 1
    return found
