"""Rego modules as the evaluators read them: v0 upgraded to v1, and engine workarounds.

Pure: standard library only. The evaluators read every module as Rego v1, where a v0
partial set rule (``deny[msg] { ... }``) means an *object* keyed by its messages, so a
v0 policy would be refused or, worse, read differently. The published source stays the
author's text (it is what the digest covers); the evaluator compiles
``compiled_source(...)``, a deterministic rewrite that keeps every line where it was, so
compile errors still point at the author's lines.

The rewrite walks the module's statements (package, imports, rules with their heads,
bodies, ``else`` branches and extra bodies), as OPA's parser reads them. A module is v0
when it does not import ``rego.v1`` and it imports ``future.keywords``, has a rule body
without ``if``, a partial set rule without ``contains``, or a ``default`` rule assigned
with ``=``. A v0 module is upgraded:

- ``name[x] { body }``, ``name["c"]`` and ``a.b { body }`` (a head of two terms, no
  value, no arguments, no ``if``: OPA's partial set) become ``name contains x if { ... }``,
  ``name contains "c"``, ``a contains "b" if { ... }``; ``name[x] if { ... }`` is an
  object in v0 as in v1 (OPA reads it so) and is left alone;
- every body without ``if`` gains it, in rules, functions, ``else`` branches and extra
  bodies; a rule with several bodies (``p { a } { b }``) becomes one rule per body, the
  head repeated before each body on the same line;
- ``in``, ``every``, ``if`` and ``contains`` are names unless imported from
  ``future.keywords``: such a name becomes ``NAME__v0`` (a builtin call
  ``contains(s, t)`` stays one unless the package defines a ``contains``); references to
  such a rule from other modules (``data.pkg.every``, an imported package's
  ``utils.every``, an unqualified call in the same package) are renamed with it;
- a local variable named ``input`` or ``data`` (``input := {...}``, allowed in v0)
  becomes ``input__local`` in its rule; ``with input as ...`` keeps its target;
- duplicate imports are dropped, and the deprecated ``re_match`` and
  ``net.cidr_overlap`` become ``regex.match`` and ``net.cidr_contains`` (same arguments,
  same results).

Whatever the version, workarounds for what the engines refuse although OPA accepts it:

- a variable declared with ``some`` (``some x in xs``, ``some k, x in xs``, ``some x``)
  whose name is also a rule of the module's package: regorus 0.13 refuses it (``var `x`
  used before definition below``) or reads the rule; it becomes ``x__local`` where it is
  declared;
- a bare call as a statement (``port_covers("*", _)``, a function that is true for those
  arguments): regorus refuses it (``rule must have a body or assignment``); it becomes
  ``port_covers("*", _) = true``;
- ``with limit as v`` naming a rule of the package, or ``with lib.x as v`` through an
  import: regorus finds no rule (``undefined rule``); the target is written in full,
  ``with data.pkg.limit as v``;
- ``[path, value] := walk(x)`` (or ``=``), a relation: regorus reads it as one value and
  finds nothing; it becomes ``walk(x, [path, value])``;
- for rego-cpp only (the ``regopy`` engine): ``sprintf`` format literals have ``%q``
  replaced by ``\\"%v\\"`` (rego-cpp 1.5.2 prints ``%q`` verbatim), names rego-cpp reads
  as keywords used as variables are refused, and so is an extra body on the line of the
  previous one (rego-cpp reads one rule per line).

Names of other modules are known through ``SetContext`` (``set_context`` of all the
set's modules); without it, a module is compiled with what it defines itself. Anything
the rewrite cannot handle is refused with the module, line, construct and fix
(``InvalidPolicySet``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from runplane.domain.errors import InvalidPolicySet

KEYWORDS: Final = frozenset({"contains", "every", "if", "in"})
"""The keywords v1 has and v0 has only when imported from ``future.keywords``."""
_OPEN: Final = {"(": ")", "[": "]", "{": "}"}
_CLOSE: Final = frozenset(_OPEN.values())
_MULTI: Final = (":=", "==", "!=", "<=", ">=")
_INFIX: Final = frozenset({"+", "-", "*", "/", "%", "&", "|", "==", "!=", "<", ">", "<=", ">="})
_V0_SUFFIX: Final = "__v0"
_LOCAL_SUFFIX: Final = "__local"
_DEPRECATED: Final = {"re_match": "regex.match", "net.cidr_overlap": "net.cidr_contains"}
"""Deprecated builtins (gone in v1) and their exact equivalents."""


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
class SetContext:
    """What the other modules of a set define, for renames that cross modules."""

    package_rules: tuple[tuple[str, frozenset[str]], ...] = ()
    """Each package's rule and function names (first term of the head), all modules."""
    keyword_rules: frozenset[str] = frozenset()
    """``package.name`` of the rules v0 modules name with a keyword (``utils.every``)."""

    def rules_of(self, package: str) -> frozenset[str]:
        return next((names for name, names in self.package_rules if name == package), frozenset())


# -- the statements of a module --------------------------------------------------------------


@dataclass
class _Body:
    open: int
    """Index of the body's ``{``, or of the first token of a one-literal body."""
    end: int
    """Index after the body."""
    braced: bool
    if_at: int | None
    """Index of the ``if`` before it, if any."""


@dataclass
class _Else:
    at: int
    """Index of ``else``."""
    value: tuple[int, int] | None
    body: _Body | None


@dataclass
class _Rule:
    start: int
    default: bool
    name_at: int
    ref: list[tuple[str, int, int]]
    """The head's reference after its name: ``("dot", i, j)`` or ``("brack", i, j)``."""
    args: tuple[int, int] | None
    contains_at: int | None
    key: tuple[int, int] | None
    value_op: int | None
    value: tuple[int, int] | None
    head_end: int
    body: _Body | None = None
    elses: list[_Else] = field(default_factory=list)
    extra: list[_Body] = field(default_factory=list)
    end: int = 0

    @property
    def ref_len(self) -> int:
        return 1 + len(self.ref)


@dataclass
class _Module:
    toks: list[Tok]
    package: str
    imports: list[tuple[int, int, str, str]]
    """``(start, end, path, alias)`` of each import statement (alias empty if none)."""
    rules: list[_Rule]
    calls: list[tuple[int, int]]
    """Statements that are a bare call (``f(x)``): ``(start, end)`` token indexes."""
    broken: bool = False
    """Brackets that do not match: nothing is rewritten, the engine reports the error."""


class _Parser:
    """Reads a module's statements as OPA's parser does, far enough to rewrite them."""

    def __init__(self, module: str, toks: list[Tok], keywords: frozenset[str]) -> None:
        self.name = module
        self.toks = toks
        self.n = len(toks)
        self.keywords = keywords
        self._partner: dict[int, int] = {}
        self.broken = False
        """Whether the brackets do not match: the engine reports that, located."""
        stack: list[int] = []
        for i, tok in enumerate(toks):
            if tok.kind != "op":
                continue
            if tok.text in _OPEN:
                stack.append(i)
            elif tok.text in _CLOSE:
                if not stack or _OPEN[toks[stack[-1]].text] != tok.text:
                    self.broken = True
                    break
                self._partner[stack.pop()] = i
        self.broken = self.broken or bool(stack)

    def refuse(self, line: int, construct: str, fix: str) -> InvalidPolicySet:
        return InvalidPolicySet(
            f"{self.name} line {line}: Rego v0 {construct} cannot be upgraded to v1: {fix}"
        )

    # -- token helpers

    def tok(self, i: int) -> Tok | None:
        return self.toks[i] if 0 <= i < self.n else None

    def is_(self, i: int, text: str) -> bool:
        tok = self.tok(i)
        return tok is not None and tok.text == text and tok.kind in ("op", "ident")

    def is_kw(self, i: int, word: str) -> bool:
        return word in self.keywords and self.is_(i, word)

    def skip_nl(self, i: int) -> int:
        while i < self.n and self.toks[i].kind == "nl":
            i += 1
        return i

    def group_end(self, i: int) -> int:
        """The index after the bracket group opening at ``i``."""
        return self._partner[i] + 1

    def opening(self, closing: int) -> int | None:
        """The index of the bracket that the one at ``closing`` closes."""
        return next((o for o, c in self._partner.items() if c == closing), None)

    def line_end(self, i: int) -> int:
        """The index of the newline ending the logical line at ``i`` (or the end)."""
        while i < self.n and self.toks[i].kind != "nl":
            i = (
                self.group_end(i)
                if self.toks[i].text in _OPEN and self.toks[i].kind == "op"
                else i + 1
            )
        return i

    # -- terms

    def term_end(self, i: int) -> int:
        """The index after the term at ``i`` (a scalar, name, reference, call or
        collection, with a leading ``-``); ``i`` itself when there is none."""
        tok = self.tok(i)
        if tok is None or tok.kind == "nl":
            return i
        if tok.kind == "op" and tok.text == "-":
            after = self.term_end(i + 1)
            return i if after == i + 1 else after
        if tok.kind == "op":
            if tok.text not in ("(", "[", "{"):
                return i
            i = self.group_end(i)
        elif tok.kind == "ident" and tok.text in self.keywords and tok.text != "contains":
            return i
        else:
            i += 1
        while (nxt := self.tok(i)) is not None and nxt.kind == "op":
            field_tok = self.tok(i + 1)
            if nxt.text == "." and field_tok is not None and field_tok.kind == "ident":
                i += 2
            elif nxt.text in ("[", "("):
                i = self.group_end(i)
            else:
                break
        return i

    def expr_end(self, i: int) -> int:
        """The index after the infix expression at ``i`` (terms joined by operators)."""
        end = self.term_end(i)
        if end == i:
            return i
        while True:
            tok = self.tok(end)
            infix = tok is not None and (
                (tok.kind == "op" and tok.text in _INFIX) or self.is_kw(end, "in")
            )
            if not infix:
                return end
            after = self.term_end(self.skip_nl(end + 1))
            if after == self.skip_nl(end + 1):
                return end
            end = after

    # -- statements

    def module(self) -> _Module:
        if self.broken:
            return _Module(self.toks, "", [], [], [], broken=True)
        package = ""
        imports: list[tuple[int, int, str, str]] = []
        rules: list[_Rule] = []
        calls: list[tuple[int, int]] = []
        i = self.skip_nl(0)
        while i < self.n:
            tok = self.toks[i]
            if tok.kind == "ident" and tok.text == "package" and not self._is_ref(i):
                end = self.line_end(i)
                package = "".join(t.text for t in self.toks[i + 1 : end])
                i = self.skip_nl(end)
                continue
            if tok.kind == "ident" and tok.text == "import" and not self._is_ref(i):
                end = self.line_end(i)
                parts, alias = [], ""
                for j in range(i + 1, end):
                    if self.is_(j, "as") and j + 1 < end:
                        alias = self.toks[j + 1].text
                        break
                    parts.append(self.toks[j].text)
                imports.append((i, end, "".join(parts), alias))
                i = self.skip_nl(end)
                continue
            rule = self.rule(i)
            if rule is None:
                end = self.line_end(i)
                if self._is_call_statement(i, end):
                    calls.append((i, end))
                i = self.skip_nl(max(end, i + 1))
                continue
            rules.append(rule)
            i = self.skip_nl(max(rule.end, i + 1))
        return _Module(self.toks, package, imports, rules, calls)

    def _is_ref(self, i: int) -> bool:
        return self.is_(i + 1, ".") or self.is_(i + 1, "[")

    def _is_call_statement(self, i: int, end: int) -> bool:
        """Whether tokens ``i:end`` are one call ``name(args)`` (a dotted name allowed)."""
        if self.toks[i].kind != "ident":
            return False
        j = i + 1
        while self.is_(j, ".") and (t := self.tok(j + 1)) is not None and t.kind == "ident":
            j += 2
        return self.is_(j, "(") and self.group_end(j) == end

    def rule(self, i: int) -> _Rule | None:  # noqa: C901 - OPA parser rule grammar
        """The rule starting at ``i``, or None if the statement is not one."""
        tok = self.toks[i]
        if tok.kind != "ident" or (tok.text in self.keywords and tok.text != "contains"):
            return None
        default = (
            tok.text == "default" and (nxt := self.tok(i + 1)) is not None and nxt.kind == "ident"
        )
        name_at = i + 1 if default else i
        j = name_at + 1
        ref: list[tuple[str, int, int]] = []
        while True:
            if self.is_(j, ".") and (t := self.tok(j + 1)) is not None and t.kind == "ident":
                ref.append(("dot", j, j + 2))
                j += 2
            elif self.is_(j, "["):
                end = self.group_end(j)
                ref.append(("brack", j, end))
                j = end
            else:
                break
        args = None
        if self.is_(j, "("):
            args = (j, self.group_end(j))
            j = args[1]
        contains_at = key = value_op = value = None
        if self.is_kw(j, "contains") and args is None:
            contains_at = j
            start = self.skip_nl(j + 1)
            end = self.expr_end(start)
            if end == start:
                return None
            key, j = (start, end), end
        elif self.is_(j, "=") or self.is_(j, ":="):
            value_op = j
            start = self.skip_nl(j + 1)
            end = self.expr_end(start)
            if end == start:
                return None  # not a rule the rewrite knows: the engine reports it
            value, j = (start, end), end
        if not default and value is None and contains_at is None:
            if args is None and not ref:
                # a lone name: a rule only when a body follows
                k = self.skip_nl(j)
                if not (self.is_(k, "{") or self.is_kw(k, "if")):
                    return None
            if args is not None and not self._body_follows(j):
                return None  # a bare call statement (see _is_call_statement)
        rule = _Rule(i, default, name_at, ref, args, contains_at, key, value_op, value, j)
        rule.end = j
        if default:
            return rule
        rule.body = self.body(j)
        if rule.body is None:
            return rule
        rule.end = rule.body.end
        while True:
            k = self.skip_nl(rule.end)
            if not self.is_(k, "else"):
                break
            branch = self.else_(k)
            rule.elses.append(branch)
            rule.end = branch.body.end if branch.body else (branch.value or (k, k + 1))[1]
        if not rule.elses:
            while self.is_(k := self.skip_nl(rule.end), "{"):
                extra = self.body(k)
                assert extra is not None
                rule.extra.append(extra)
                rule.end = extra.end
        return rule

    def _body_follows(self, j: int) -> bool:
        k = self.skip_nl(j)
        return self.is_(k, "{") or self.is_kw(k, "if")

    def body(self, j: int) -> _Body | None:
        """The body after a head ending at ``j`` (``{ ... }``, ``if { ... }``, ``if
        literal``), or None."""
        k = self.skip_nl(j)
        if_at = None
        if self.is_kw(k, "if"):
            if_at = k
            k = self.skip_nl(k + 1)
            if not self.is_(k, "{"):
                return _Body(k, self._literal_end(k), False, if_at)
        if self.is_(k, "{"):
            return _Body(k, self.group_end(k), True, if_at)
        return None

    def _literal_end(self, i: int) -> int:
        """The index after a one-literal body (its line, or up to ``else``)."""
        while i < self.n and self.toks[i].kind != "nl" and not self.is_(i, "else"):
            tok = self.toks[i]
            i = self.group_end(i) if tok.kind == "op" and tok.text in _OPEN else i + 1
        return i

    def else_(self, k: int) -> _Else:
        j = k + 1
        value = None
        if self.is_(j, "=") or self.is_(j, ":="):
            start = self.skip_nl(j + 1)
            end = self.expr_end(start)
            if end == start:
                return _Else(k, None, None)  # not an else the rewrite knows
            value, j = (start, end), end
        return _Else(k, value, self.body(j))


def _keywords_of(imports: Iterable[tuple[int, int, str, str]]) -> tuple[bool, frozenset[str]]:
    """``(imports rego.v1, the future keywords imported)``."""
    v1, found = False, set[str]()
    for _, _, path, _ in imports:
        if path == "rego.v1":
            v1 = True
        elif path == "future.keywords":
            found |= KEYWORDS
        elif path.startswith("future.keywords."):
            found.add(path.rsplit(".", 1)[-1])
    return v1, frozenset(found)


def _prescan(toks: list[Tok]) -> tuple[bool, frozenset[str], bool]:
    """``(imports rego.v1, future keywords imported, imports future.keywords at all)``
    from the import lines, before the module is parsed."""
    imports = []
    i = 0
    while i < len(toks):
        if (
            toks[i].kind == "ident"
            and toks[i].text == "import"
            and (i == 0 or toks[i - 1].kind == "nl")
        ):
            j = i + 1
            parts = []
            while j < len(toks) and toks[j].kind != "nl" and toks[j].text != "as":
                parts.append(toks[j].text)
                j += 1
            imports.append((i, j, "".join(parts), ""))
            i = j
        else:
            i += 1
    v1, kws = _keywords_of(imports)
    future = any(path.startswith("future.") for _, _, path, _ in imports)
    return v1, kws, future


def _parse(module: str, toks: list[Tok], keywords: frozenset[str]) -> _Module:
    return _Parser(module, toks, keywords).module()


def _is_v0_shaped(parsed: _Module, rule: _Rule) -> bool:
    toks = parsed.toks
    if rule.default:
        return rule.value_op is not None and toks[rule.value_op].text == "="
    if _is_partial_set(rule):
        return True
    bodies = [rule.body, *rule.extra, *(e.body for e in rule.elses)]
    return any(b is not None and b.braced and b.if_at is None for b in bodies)


def _is_partial_set(rule: _Rule) -> bool:
    """OPA's v0 partial set: a head of two terms, no value, no arguments, no ``if``."""
    return (
        not rule.default
        and rule.ref_len == 2
        and rule.args is None
        and rule.contains_at is None
        and rule.value_op is None
        and (rule.body is None or rule.body.if_at is None)
    )


# -- what a set's modules define --------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _analysis(module: str, source: str) -> tuple[_Module, bool, frozenset[str]]:
    """The parsed module, whether it is v0, and the keywords active in it.

    A module is first read with ``if`` and ``contains`` as keywords (a v1 module without
    ``import rego.v1`` must not look like a rule named ``if``); if it is v0 it is read
    again with only the keywords it imports. Cached: ``set_context`` and
    ``compiled_source`` read each module of a set (the result is never changed).
    """
    toks = tokens(source)
    rego_v1, imported, future = _prescan(toks)
    if rego_v1:
        return _parse(module, toks, KEYWORDS), False, KEYWORDS
    probe = _parse(module, toks, imported | {"if", "contains"})
    if future or any(_is_v0_shaped(probe, rule) for rule in probe.rules):
        return _parse(module, toks, imported), True, imported
    return _parse(module, toks, KEYWORDS), False, KEYWORDS


def set_context(modules: Iterable[tuple[str, str]]) -> SetContext:
    """The names a set's modules (``(name, source)`` pairs) define, for ``compiled_source``.

    A module that does not parse is skipped here (it is refused when it is compiled).
    """
    package_rules: dict[str, set[str]] = {}
    keyword_rules: set[str] = set()
    for name, source in modules:
        try:
            parsed, v0, active = _analysis(name, source)
        except InvalidPolicySet:
            continue
        names = package_rules.setdefault(parsed.package, set())
        for rule in parsed.rules:
            rule_name = parsed.toks[rule.name_at].text
            names.add(rule_name)
            if v0 and rule_name in KEYWORDS and rule_name not in active:
                keyword_rules.add(f"{parsed.package}.{rule_name}")
        for start, _ in parsed.calls:
            names.add(parsed.toks[start].text)
    return SetContext(
        tuple((k, frozenset(v)) for k, v in sorted(package_rules.items())),
        frozenset(keyword_rules),
    )


# -- the rewrite ------------------------------------------------------------------------------


class _Edits:
    """Token replacements and insertions, applied in one pass."""

    def __init__(self, source: str, toks: list[Tok]) -> None:
        self.source = source
        self.toks = toks
        self.replaced: dict[int, str] = {}
        self.inserted: list[tuple[int, int, str]] = []
        """``(offset, order, text)``."""
        self.notes: list[str] = []

    def replace(self, i: int, text: str) -> None:
        self.replaced[i] = text

    def insert_before(self, i: int, text: str) -> None:
        self.inserted.append((self.toks[i].start, len(self.inserted), text))

    def note(self, line: int, what: str) -> None:
        self.notes.append(f"line {line}: {what}")

    def text(self, lo: int = 0, hi: int | None = None) -> str:
        """The rewritten text of ``source[toks[lo].start:toks[hi-1].end]`` (all if no
        bounds): replacements and insertions within it applied."""
        if hi is None:
            start, end = 0, len(self.source)
            first, last = 0, len(self.toks)
        else:
            start, end = self.toks[lo].start, self.toks[hi - 1].end
            first, last = lo, hi
        edits = [
            (self.toks[i].start, self.toks[i].end, 1, text)
            for i, text in self.replaced.items()
            if first <= i < last
        ]
        edits += [(at, at, 0, text) for at, _, text in self.inserted if start <= at < end]
        edits.sort(key=lambda e: (e[0], e[2]))
        out, pos = [], start
        for a, b, _, text in edits:
            out.append(self.source[pos:a])
            out.append(text)
            pos = b
        out.append(self.source[pos:end])
        return "".join(out)


def compiled_source(
    module: str,
    source: str,
    *,
    rego_cpp: bool = False,
    context: SetContext | None = None,
) -> Upgrade:
    """The v1 text the evaluator compiles for ``source`` (see the module docstring).

    ``rego_cpp``: also work around rego-cpp 1.5.2. ``context``: what the set's other
    modules define (``set_context``); None reads the module alone. Raises
    ``InvalidPolicySet`` naming ``module`` and the line for a construct that cannot be
    upgraded (or that rego-cpp would misread).
    """
    parsed, v0, active = _analysis(module, source)
    if parsed.broken:
        return Upgrade(source, (), v0=False)
    if context is None:
        context = set_context([(module, source)])
    toks = parsed.toks
    edits = _Edits(source, toks)
    parser = _Parser(module, toks, active)
    if v0:
        _rename_keywords(parsed, active, context, edits)
        _rename_locals(parsed, ("input", "data"), edits, v0_note=True)
        _drop_duplicate_imports(parsed, edits)
        _replace_deprecated(parsed, edits)
        _upgrade_rules(parser, parsed, edits, rego_cpp=rego_cpp)
    else:
        _rename_keyword_refs(parsed, context, edits)
    _rename_shadowing_some(parsed, context, edits)
    _bare_calls(parsed, edits)
    _qualify_with_targets(parsed, context, edits)
    _walk_relations(parser, parsed, edits)
    if rego_cpp:
        for edit_at, replaced, note in _sprintf_q(toks):
            edits.replace(edit_at, replaced)
            edits.notes.append(note)
    changed = bool(edits.replaced or edits.inserted)
    text = edits.text() if changed else source
    if rego_cpp:
        _refuse_keyword_names(module, tokens(text) if changed else toks)
    if not changed:
        return Upgrade(source, (), v0=False)
    notes = sorted(edits.notes, key=lambda note: int(note.split(":", 1)[0].removeprefix("line ")))
    return Upgrade(text, tuple(notes), v0=v0)


def _rule_name(parsed: _Module, rule: _Rule) -> str:
    toks = parsed.toks
    parts = [toks[rule.name_at].text]
    for kind, i, _ in rule.ref:
        if kind == "dot":
            parts.append(f".{toks[i + 1].text}")
    return "".join(parts)


def _upgrade_rules(parser: _Parser, parsed: _Module, edits: _Edits, *, rego_cpp: bool) -> None:
    toks = parsed.toks
    for rule in parsed.rules:
        name = _rule_name(parsed, rule)
        line = toks[rule.start].line
        if rule.default:
            continue  # `default p = v` reads the same in v1
        if _is_partial_set(rule):
            kind, i, j = rule.ref[-1]
            base = toks[rule.name_at].text
            if kind == "brack":
                edits.replace(i, " contains ")
                edits.replace(j - 1, "")
            else:
                edits.replace(i, " contains ")
                edits.replace(i + 1, f'"{toks[i + 1].text}"')
            edits.note(line, f"partial set rule {base}[...] -> {base} contains ...")
        bodies: list[tuple[_Body, str]] = []
        if rule.body is not None:
            bodies.append((rule.body, f"rule {name} body -> if {{ ... }}"))
        bodies += [(b.body, "else body -> else if { ... }") for b in rule.elses if b.body]
        for body, note in bodies:
            if body.braced and body.if_at is None:
                _insert_if(edits, body.open)
                edits.note(toks[body.open].line, note)
        if rule.extra:
            head = _head_copy(parser, rule, edits)
            for extra in rule.extra:
                opening = toks[extra.open]
                previous = toks[extra.open - 1] if extra.open else None
                same_line = previous is not None and previous.kind != "nl"
                if rego_cpp and same_line:
                    raise parser.refuse(
                        opening.line,
                        f"rule {name} (line {line}) with several bodies on one line",
                        "write one rule per body, each with the same head (rego-cpp reads "
                        "one rule per line)",
                    )
                lead = "" if edits.source[opening.start - 1 : opening.start].isspace() else " "
                edits.insert_before(extra.open, f"{lead}{head} if ")
                edits.note(opening.line, f"rule {name}: another body -> a rule of its own")


def _insert_if(edits: _Edits, brace: int) -> None:
    at = edits.toks[brace].start
    lead = "" if at == 0 or edits.source[at - 1].isspace() else " "
    edits.insert_before(brace, f"{lead}if ")


def _head_copy(parser: _Parser, rule: _Rule, edits: _Edits) -> str:
    """The rewritten head of ``rule`` on one line, to repeat before an extra body."""
    toks = parser.toks
    text = edits.text(rule.start, rule.head_end)
    if "\n" in text:
        raise parser.refuse(
            toks[rule.extra[0].open].line,
            f"rule {toks[rule.name_at].text} (line {toks[rule.start].line}) with several "
            "bodies and a head on several lines",
            "write one rule per body, each with the same head",
        )
    return text


def _rename_keywords(
    parsed: _Module, active: frozenset[str], context: SetContext, edits: _Edits
) -> None:
    """Names spelled like keywords this v0 module did not import become ``NAME__v0``."""
    toks = parsed.toks
    own = context.rules_of(parsed.package)
    aliases = _aliases(parsed)
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text not in KEYWORDS:
            continue
        if i > 0 and toks[i - 1].kind == "op" and toks[i - 1].text == ".":
            if _dotted_keyword_rule(toks, i, aliases, context):
                edits.replace(i, tok.text + _V0_SUFFIX)
                edits.note(tok.line, f"reference to rule {tok.text} -> {tok.text}{_V0_SUFFIX}")
            continue
        if tok.text in active:
            if not (tok.text == "contains" and _calls_own(toks, i, own)):
                continue
        elif tok.text == "contains" and _is_call(toks, i) and "contains" not in own:
            continue  # the builtin contains(s, t)
        edits.replace(i, tok.text + _V0_SUFFIX)
        edits.note(tok.line, f"{tok.text!r} used as a name -> {tok.text}{_V0_SUFFIX}")


def _rename_keyword_refs(parsed: _Module, context: SetContext, edits: _Edits) -> None:
    """In a v1 module, references to rules that v0 modules name with a keyword."""
    if not context.keyword_rules:
        return
    toks = parsed.toks
    aliases = _aliases(parsed)
    own = context.rules_of(parsed.package)
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text not in KEYWORDS:
            continue
        after_dot = i > 0 and toks[i - 1].kind == "op" and toks[i - 1].text == "."
        if (after_dot and _dotted_keyword_rule(toks, i, aliases, context)) or (
            not after_dot
            and tok.text == "contains"
            and _calls_own(toks, i, own)
            and f"{parsed.package}.contains" in context.keyword_rules
        ):
            edits.replace(i, tok.text + _V0_SUFFIX)
            edits.note(tok.line, f"reference to rule {tok.text} -> {tok.text}{_V0_SUFFIX}")


def _is_call(toks: list[Tok], i: int) -> bool:
    return i + 1 < len(toks) and toks[i + 1].kind == "op" and toks[i + 1].text == "("


def _calls_own(toks: list[Tok], i: int, own: frozenset[str]) -> bool:
    return _is_call(toks, i) and toks[i].text in own


def _aliases(parsed: _Module) -> dict[str, str]:
    """What each import binds: ``{"utils": "data.utils"}``."""
    found = {}
    for _, _, path, alias in parsed.imports:
        if path.startswith("data."):
            found[alias or path.rsplit(".", 1)[-1]] = path
    return found


def _dotted_keyword_rule(
    toks: list[Tok], i: int, aliases: Mapping[str, str], context: SetContext
) -> bool:
    """Whether ``toks[i]`` (after a dot) ends a reference to a keyword-named v0 rule."""
    parts = [toks[i].text]
    j = i - 1
    while j >= 1 and toks[j].text == "." and toks[j - 1].kind == "ident":
        parts.append(toks[j - 1].text)
        j -= 2
        if j < 0 or toks[j].text != ".":
            break
    parts.reverse()
    root = parts[0]
    if root == "data":
        path = parts[1:]
    elif root in aliases:
        path = aliases[root].split(".")[1:] + parts[1:]
    else:
        return False
    return ".".join(path) in context.keyword_rules


def _rename_locals(parsed: _Module, names: Sequence[str], edits: _Edits, *, v0_note: bool) -> None:
    """A v0 local variable named ``input`` or ``data`` becomes ``NAME__local``."""
    toks = parsed.toks
    for scope in _scopes(parsed):
        lo, hi = scope
        for name in names:
            declared = any(
                toks[k].kind == "ident"
                and toks[k].text == name
                and k + 1 < hi
                and toks[k + 1].text == ":="
                and (k == 0 or toks[k - 1].text != ".")
                for k in range(lo, hi)
            )
            if declared:
                _rename_in(toks, lo, hi, name, edits, keep_with_targets=True)
                edits.note(toks[lo].line, f"local variable {name} -> {name}{_LOCAL_SUFFIX}")


def _scopes(parsed: _Module) -> list[tuple[int, int]]:
    """Token ranges in which a body's variables are visible: a rule's head with its
    first body (and each extra body), each ``else`` branch with its value."""
    out = []
    for rule in parsed.rules:
        if rule.body is not None:
            out.append((rule.name_at + 1, rule.body.end))
        else:  # a value alone, which may hold comprehensions
            out.append((rule.name_at + 1, rule.end))
        for extra in rule.extra:
            out.append((extra.open, extra.end))
        for branch in rule.elses:
            if branch.body is not None:
                out.append((branch.at, branch.body.end))
    return out


def _rename_in(
    toks: list[Tok], lo: int, hi: int, name: str, edits: _Edits, *, keep_with_targets: bool
) -> None:
    for k in range(lo, hi):
        tok = toks[k]
        if tok.kind != "ident" or tok.text != name:
            continue
        if k > 0 and toks[k - 1].kind == "op" and toks[k - 1].text == ".":
            continue  # a field, not the variable
        if _is_call(toks, k):
            continue  # a call to the rule, not the variable
        if (
            keep_with_targets
            and k > 0
            and toks[k - 1].kind == "ident"
            and toks[k - 1].text == "with"
        ):
            continue  # `with input as ...` replaces the document, not the local
        edits.replace(k, name + _LOCAL_SUFFIX)


def _rename_shadowing_some(parsed: _Module, context: SetContext, edits: _Edits) -> None:
    """A ``some`` variable named like a rule of the package becomes ``NAME__local`` in
    the query that declares it (regorus 0.13 refuses or misreads it)."""
    toks = parsed.toks
    rules = context.rules_of(parsed.package)
    if not rules:
        return
    for lo, hi in _scopes(parsed):
        for k in range(lo, hi):
            if not (toks[k].kind == "ident" and toks[k].text == "some"):
                continue
            for name in _declared(toks, k, hi):
                if name not in rules:
                    continue
                s_lo, s_hi = _innermost_query(toks, k, lo, hi)
                _rename_in(toks, s_lo, s_hi, name, edits, keep_with_targets=False)
                edits.note(
                    toks[k].line,
                    f"local {name} shadows the rule {name} -> {name}{_LOCAL_SUFFIX} "
                    "(regorus reads it as the rule)",
                )


def _declared(toks: list[Tok], k: int, hi: int) -> list[str]:
    """The names ``some`` at ``k`` declares: ``some x``, ``some x, y``, ``some x in``,
    ``some k, v in``."""
    names = []
    j = k + 1
    while j < hi and toks[j].kind == "ident":
        names.append(toks[j].text)
        if j + 1 < hi and toks[j + 1].text == ",":
            j += 2
            continue
        break
    return names


def _innermost_query(toks: list[Tok], k: int, lo: int, hi: int) -> tuple[int, int]:
    """The comprehension enclosing token ``k`` within ``lo:hi``, else ``(lo, hi)``."""
    stack: list[int] = []
    for j in range(lo, k):
        tok = toks[j]
        if tok.kind != "op":
            continue
        if tok.text in _OPEN:
            stack.append(j)
        elif tok.text in _CLOSE and stack:
            stack.pop()
    for opened in reversed(stack):
        if toks[opened].text not in ("[", "{"):
            continue
        close = _closing(toks, opened)
        if any(
            toks[m].kind == "op" and toks[m].text == "|" and _depth(toks, opened, m) == 1
            for m in range(opened + 1, close)
        ):
            return opened, close + 1
    return lo, hi


def _closing(toks: list[Tok], opened: int) -> int:
    depth = 0
    for j in range(opened, len(toks)):
        tok = toks[j]
        if tok.kind != "op":
            continue
        if tok.text in _OPEN:
            depth += 1
        elif tok.text in _CLOSE:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def _depth(toks: list[Tok], opened: int, m: int) -> int:
    depth = 0
    for j in range(opened, m):
        tok = toks[j]
        if tok.kind == "op" and tok.text in _OPEN:
            depth += 1
        elif tok.kind == "op" and tok.text in _CLOSE:
            depth -= 1
    return depth


def _drop_duplicate_imports(parsed: _Module, edits: _Edits) -> None:
    seen: set[tuple[str, str]] = set()
    toks = parsed.toks
    for start, end, path, alias in parsed.imports:
        key = (path, alias)
        if key in seen:
            for k in range(start, end):
                edits.replace(k, "")
            edits.note(toks[start].line, f"duplicate import {path} removed")
        seen.add(key)


def _replace_deprecated(parsed: _Module, edits: _Edits) -> None:
    toks = parsed.toks
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or (i > 0 and toks[i - 1].text == "."):
            continue
        if tok.text == "re_match" and _is_call(toks, i):
            edits.replace(i, _DEPRECATED["re_match"])
            edits.note(tok.line, "re_match -> regex.match")
        elif (
            tok.text == "net"
            and i + 3 < len(toks)
            and toks[i + 1].text == "."
            and toks[i + 2].text == "cidr_overlap"
            and _is_call(toks, i + 2)
        ):
            edits.replace(i + 2, "cidr_contains")
            edits.note(tok.line, "net.cidr_overlap -> net.cidr_contains")


def _bare_calls(parsed: _Module, edits: _Edits) -> None:
    """``f(x)`` alone as a statement: a function true for those arguments."""
    toks = parsed.toks
    for start, end in parsed.calls:
        last = toks[end - 1]
        edits.replace(end - 1, last.text + " = true")
        edits.note(toks[start].line, "a bare call statement -> ... = true")


def _qualify_with_targets(parsed: _Module, context: SetContext, edits: _Edits) -> None:
    """``with rule as v`` (a rule of the package) or ``with alias.x as v`` (an imported
    package) becomes ``with data.pkg.rule as v``: regorus finds no rule otherwise."""
    toks = parsed.toks
    rules = context.rules_of(parsed.package)
    aliases = _aliases(parsed)
    for k, tok in enumerate(toks[:-1]):
        if not (tok.kind == "ident" and tok.text == "with"):
            continue
        target = toks[k + 1]
        if target.kind != "ident" or target.text in ("input", "data"):
            continue
        if target.text in aliases:
            replacement = aliases[target.text]
        elif target.text in rules and parsed.package:
            replacement = f"data.{parsed.package}.{target.text}"
        else:
            continue
        edits.replace(k + 1, replacement)
        edits.note(target.line, f"with {target.text} -> with {replacement} (regorus)")


def _walk_relations(parser: _Parser, parsed: _Module, edits: _Edits) -> None:
    """``[p, v] := walk(x)`` (or ``=``) as a statement becomes ``walk(x, [p, v])``, the
    same relation: regorus 0.13 reads the first form as one value and finds nothing."""
    toks = parsed.toks
    boundary = {"nl", ";", "{", "|"}
    for i, tok in enumerate(toks):
        if not (tok.kind == "ident" and tok.text == "walk" and parser.is_(i + 1, "(")):
            continue
        if i < 2 or toks[i - 1].text not in ("=", ":=") or toks[i - 2].kind == "nl":
            continue
        closing = i - 2
        if toks[closing].kind == "op" and toks[closing].text == "]":
            start = parser.opening(closing)
        elif toks[closing].kind == "ident":
            start = closing
        else:
            continue
        end = parser.group_end(i + 1)
        before = toks[start - 1] if start else None
        after = toks[end] if end < len(toks) else None
        if start is None or (
            before is not None
            and (before.kind if before.kind == "nl" else before.text) not in boundary
        ):
            continue
        if after is not None and after.kind != "nl" and after.text not in (";", "}", "]"):
            continue
        if any(t.kind == "nl" for t in toks[start:end]):
            continue
        pattern = edits.text(start, closing + 1)
        argument = edits.text(i + 2, end - 1)
        edits.replace(start, f"walk({argument}, {pattern})")
        for k in range(start + 1, end):
            edits.replace(k, "")
        edits.note(tok.line, "x := walk(y) -> walk(y, x) (regorus)")


def _refuse_keyword_names(module: str, toks: list[Tok]) -> None:
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text not in KEYWORDS:
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


def _sprintf_q(toks: list[Tok]) -> list[tuple[int, str, str]]:
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
                found.append((i + 2, replaced, f'line {c.line}: sprintf %q -> \\"%v\\"'))
    return found


# -- what a module defines and calls ----------------------------------------------------------

_NOT_CALLS: Final = frozenset(
    {"not", "some", "every", "if", "in", "with", "as", "else", "default", "contains", "import"}
)


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
