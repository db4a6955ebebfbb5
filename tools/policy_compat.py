"""How well third-party Rego policy libraries run on Runplane, unedited.

Usage: ``python -m tools.policy_compat DIR [--json] [--probe] [--library NAME]``

``DIR`` holds one directory per library (a checkout or ``git archive`` export), and
optionally ``DIR/sources.json`` naming where each came from::

    {"Scalr+sample-tf-opa-policies": {"repository": "Scalr/sample-tf-opa-policies",
                                      "commit": "20af368...", "role": "seen"}}

``role`` is ``seen`` (a library Runplane's policy support was developed against) or
``unseen``; totals are printed for each. The tool reads only ``DIR`` (no network) and
writes only temporary directories.

**Units.** A library is cut into the units a user would publish, one policy set each:

- a directory holding ``policy-set.json``, ``policies.hcl`` or ``scalr-policy.hcl`` is
  one unit, read from where it is (the loader reads its subdirectories too);
- every other module that defines a policy rule by convention (``deny``, ``violation``,
  ``warn``, their ``*_suffix`` forms, ``allow``, ``authz``) is a unit with its unit tests
  and the library modules its packages reference (``data.<package>``, transitively; its
  own package excluded, since sibling policies of Spacelift's share ``package
  spacelift``). This is how the authors' own CI runs them (``opa test X_test.rego
  X.rego``, ``opa test X.* utils``). The unit (with the JSON files named after the module,
  which its tests read as ``data``) is copied, unedited, into a temporary directory named
  after the module, paths relative to the files' common parent;
- a Spacelift module whose ``NAME.yml`` says another ``type:`` than ``plan`` (login,
  approval, push...), or without metadata in a directory named after such a type, is out
  of scope: Runplane evaluates plan policies only;
- test modules are ``*_test.rego`` and ``*.test.rego``. A test module goes with the module
  of its name (``X_test.rego``, ``X.test.rego`` -> ``X.rego``), else with a module of its
  package in its directory, else of its package anywhere; the tests of a helper module
  (no policy rule) run with the first unit that includes the helper.

For a library without configuration files, the directory holding all its modules is
also tried as one set (``as one set``), as ``conftest -p DIR`` users would publish it;
that line is reported but not counted.

**Measures**, through Runplane's own entry points:

- *accepted as shipped*: the unit is loaded by ``load_policy_set_dir`` (what ``runplane
  policy publish/test`` read) and published through ``Policies.publish`` (the service's
  publication checks, with a store that keeps nothing). A module counts as accepted
  when some unit holding it is accepted. A refusal is its exact message.
- *authors' unit tests*: ``runplane policy test UNIT --unit --json``; every ``test_*``
  rule of the unit's test modules counts, including those Runplane does not discover
  (``*.test.rego``) and those of refused units (blocked).
- *decisions on the authors' mocks*: a test that gives a policy rule an input
  (``with input as data.mock.NAME`` with the mock in the library's JSON files, as
  ``opa test`` loads them, or an input literal, or a rule of the test module holding
  one) and asserts how many findings it has (``count(R) == N``, ``count(R) > 0``,
  ``R["message"]``, ``allow`` / ``not allow``) labels that input *violating* or
  *passing*. The input's plan (``input.tfplan``, ``input.plan``, ``input.terraform``, or
  the input itself when it is a bare plan) is saved and evaluated with ``runplane policy
  test UNIT --plan FILE --workspace W --kind K --json``, the workspace and kind taken
  from the mock's run metadata. A decision matches when the policy fails on a violating
  mock and passes on a passing one; a violating mock on which the policy passed is a
  *violating mock passing*, the figure that must be zero. Mocks are evaluated on
  accepted units only. A decision that does not match is diagnosed, not re-measured:
  whether the plan had sensitivity maps, which paths the policy reads differ between the
  author's input and the document Runplane built, and the decision Runplane's evaluator
  gives on the author's own input (the same wrong decision there: the evaluation differs
  from OPA's, not the input).

Refusals, failing tests and mismatches are grouped into causes (particulars such as
files, lines and numbers taken out) and ordered by the modules, then tests, then mocks
each blocks, with one exact example each.

``--probe`` adds, for each unit refused because a module reads an input root its shape
lacks, what happens with the shape providing most of the roots its modules read
declared: the next refusal, the unit tests and the mock decisions. It is a forecast,
reported apart and never counted as accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from runplane.domain.policy import PolicySetContent
    from runplane.domain.policy_results import PolicyResult

CONFIG_FILES: Final = ("policy-set.json", "policies.hcl", "scalr-policy.hcl")
TEST_SUFFIXES: Final = ("_test.rego", ".test.rego")
SOURCES_FILE: Final = "sources.json"
MOCK_PLAN_FILE: Final = "mock-plan.json"
MOCK_CONTEXT_FILE: Final = "mock-run-context.json"

_VIOLATION_RULE: Final = re.compile(r"(?:deny|violation|warn)(?:_[A-Za-z0-9_]+)?")
_BOOLEAN_RULES: Final = frozenset({"allow", "authz"})
_IDENT: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_REF: Final = rf"{_IDENT}(?:\.{_IDENT})*"
_PACKAGE: Final = re.compile(rf"(?m)^[ \t]*package[ \t]+({_REF})")
_RULE_HEAD: Final = re.compile(
    rf"(?m)^[ \t]*(?:default[ \t]+)?({_IDENT})[ \t]*(?:\[|\{{|:=|=|\(|if\b|contains\b)"
)
_DATA_REF: Final = re.compile(rf"\bdata\.({_REF})")
_SPACELIFT_TYPE: Final = re.compile(r"(?m)^type:[ \t]*['\"]?([A-Za-z_-]+)")


# -- reading Rego lexically (discovery only: measurements go through Runplane) ---------------


def blank(source: str) -> str:
    """``source`` with comments and string contents replaced by spaces, newlines and
    quotes kept, so that patterns never match inside them and offsets stay the same."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "#":
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and source[j] not in '"\n':
                j += 2 if source[j] == "\\" else 1
            j = min(j, n)
            out.append('"' + " " * (j - i - 1))
            i = j
            if i < n and source[i] == '"':
                out.append('"')
                i += 1
        elif c == "`":
            j = source.find("`", i + 1)
            j = n if j < 0 else j
            out.append("`" + re.sub(r"[^\n]", " ", source[i + 1 : j]))
            i = j
            if i < n:
                out.append("`")
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def package_of(source: str) -> str | None:
    match = _PACKAGE.search(blank(source))
    return match.group(1) if match else None


def rule_names(source: str) -> list[str]:
    """Names of the rules defined at the start of a line, in order, once each."""
    names: dict[str, None] = {}
    for match in _RULE_HEAD.finditer(blank(source)):
        name = match.group(1)
        if name not in {"package", "import", "else", "not", "some", "every", "default"}:
            names.setdefault(name, None)
    return list(names)


def policy_rules(source: str) -> list[str]:
    return [r for r in rule_names(source) if _VIOLATION_RULE.fullmatch(r) or r in _BOOLEAN_RULES]


def data_refs(source: str) -> set[str]:
    return set(_DATA_REF.findall(blank(source)))


def input_roots(source: str) -> set[str]:
    """The ``input`` roots a module reads (``input.x``, ``input["x"]``), comments aside."""
    text = re.sub(r"#[^\n]*", "", source)
    found = re.findall(rf'(?<![\w.])input\s*(?:\.\s*({_IDENT})|\[\s*"({_IDENT})"\s*\])', text)
    return {a or b for a, b in found}


def is_test_file(name: str) -> bool:
    return name.endswith(TEST_SUFFIXES)


def stem_of(name: str) -> str:
    for suffix in (*TEST_SUFFIXES, ".rego"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def common_parent(paths: Iterable[str]) -> PurePosixPath:
    """The deepest directory holding every path (relative paths, POSIX)."""
    common: tuple[str, ...] | None = None
    for path in paths:
        parts = PurePosixPath(path).parent.parts
        if common is None:
            common = parts
            continue
        size = 0
        while size < min(len(common), len(parts)) and common[size] == parts[size]:
            size += 1
        common = common[:size]
    return PurePosixPath(*common) if common else PurePosixPath(".")


# -- cutting a library into units ----------------------------------------------------------


@dataclass(frozen=True)
class RegoFile:
    path: str
    """Relative to the library root, POSIX."""
    source: str
    package: str | None

    @property
    def test(self) -> bool:
        return is_test_file(self.path)

    @property
    def parent(self) -> str:
        return str(PurePosixPath(self.path).parent)

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name


@dataclass
class Unit:
    name: str
    kind: str
    """``policy-set.json``, ``policies.hcl``, ``scalr-policy.hcl`` or ``conventions``."""
    directory: str
    """Relative to the library: the configured directory, or the primary module's."""
    modules: list[str]
    """Policy modules (tests excluded), relative to the library; the primary first."""
    tests: list[str]
    """Test modules (``*_test.rego``, ``*.test.rego``), relative to the library."""
    data_files: list[str] = field(default_factory=list)
    """JSON files ``opa test`` would load as data for the unit's tests."""


@dataclass
class Layout:
    units: list[Unit]
    out_of_scope: dict[str, str]
    """Module path -> why it is not measured."""
    orphan_tests: list[str]
    """Test modules paired with no module: their tests count, as not run."""
    one_set: str | None
    """The directory holding every conventions module, tried as one set."""


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def _rego_files(root: Path) -> list[RegoFile]:
    files = []
    for path in sorted(root.rglob("*.rego")):
        rel = path.relative_to(root)
        if not path.is_file() or _hidden(rel):
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            source = ""
        files.append(RegoFile(rel.as_posix(), source, package_of(source)))
    return files


def _within(path: str, directory: str) -> bool:
    return directory == "." or path.startswith(directory + "/")


def _spacelift_type(root: Path, module: RegoFile) -> str | None:
    """The ``type:`` of a Spacelift policy's metadata file ``NAME.yml``, if any."""
    for suffix in (".yml", ".yaml"):
        meta = root / PurePosixPath(module.path).with_suffix(suffix)
        if meta.is_file():
            match = _SPACELIFT_TYPE.search(meta.read_text(encoding="utf-8", errors="replace"))
            if match:
                return match.group(1).lower()
    return None


SPACELIFT_TYPES: Final = frozenset(
    {"access", "approval", "login", "notification", "plan", "push", "trigger", "task"}
)
"""Spacelift's policy types; its example library keeps one directory per type."""


def _config_units(root: Path, files: Sequence[RegoFile]) -> tuple[list[Unit], set[str]]:
    units: list[Unit] = []
    claimed: set[str] = set()
    directories = sorted(
        {
            p.parent.relative_to(root).as_posix()
            for name in CONFIG_FILES
            for p in root.rglob(name)
            if p.is_file() and not _hidden(p.relative_to(root))
        }
    )
    for directory in directories:
        kind = next(n for n in CONFIG_FILES if (root / directory / n).is_file())
        # policy-set.json directories are read flat by the loader; the others recursively.
        inside = [
            f
            for f in files
            if _within(f.path, directory) and (kind != "policy-set.json" or f.parent == directory)
        ]
        claimed.update(f.path for f in inside)
        data = sorted(
            p.relative_to(root).as_posix()
            for p in (root / directory).rglob("*.json")
            if p.name != "policy-set.json" and not _hidden(p.relative_to(root))
        )
        name = PurePosixPath(directory).name if directory != "." else root.name
        units.append(
            Unit(
                name,
                kind,
                directory,
                [f.path for f in inside if not f.test],
                [f.path for f in inside if f.test],
                data,
            )
        )
    return units, claimed


def _dependencies(start: Sequence[RegoFile], modules: Sequence[RegoFile]) -> list[RegoFile]:
    """Library modules whose packages ``start`` references, transitively. The packages of
    ``start`` are not references: Spacelift's policies all share ``package spacelift``,
    and a test in another package naming the policy's must not pull in its siblings."""
    own = {f.package for f in start if f.package}
    found: dict[str, RegoFile] = {}
    pending = list(start)
    seen = {f.path for f in pending}
    while pending:
        current = pending.pop()
        for ref in data_refs(current.source):
            for module in modules:
                package = module.package
                if (
                    package is None
                    or package in own
                    or package == current.package
                    or module.path in seen
                    or not (
                        package == ref
                        or package.startswith(ref + ".")
                        or ref.startswith(package + ".")
                    )
                ):
                    continue
                seen.add(module.path)
                found[module.path] = module
                pending.append(module)
    return sorted(found.values(), key=lambda f: f.path)


def _pair_test(test: RegoFile, modules: Sequence[RegoFile]) -> RegoFile | None:
    for candidates in (
        [m for m in modules if m.parent == test.parent and stem_of(m.name) == stem_of(test.name)],
        [m for m in modules if m.parent == test.parent and m.package == test.package],
        [m for m in modules if m.package is not None and m.package == test.package],
    ):
        if candidates:
            return candidates[0]
    return None


def layout(root: Path) -> Layout:
    """Cut the library at ``root`` into units (see the module doc)."""
    files = _rego_files(root)
    units, claimed = _config_units(root, files)
    rest = [f for f in files if f.path not in claimed]
    modules = [f for f in rest if not f.test]
    out_of_scope: dict[str, str] = {}
    kinds = {m.path: _spacelift_type(root, m) for m in modules}
    spacelift = any(kinds.values())
    for module in modules:
        kind = kinds[module.path]
        if kind is None and spacelift:
            # A module without metadata in a Spacelift library: its directory names its type.
            directory = PurePosixPath(module.path).parent.name
            kind = directory if directory in SPACELIFT_TYPES else None
        if kind is not None and kind != "plan":
            out_of_scope[module.path] = f"Spacelift {kind} policy (Runplane runs plan policies)"
    in_scope = [m for m in modules if m.path not in out_of_scope]
    tests_of: dict[str, list[RegoFile]] = {}
    orphans = []
    for test in (f for f in rest if f.test):
        target = _pair_test(test, modules)
        if target is None:
            orphans.append(test.path)
        elif target.path in out_of_scope:
            out_of_scope[test.path] = out_of_scope[target.path]
        else:
            tests_of.setdefault(target.path, []).append(test)
    primaries = [m for m in in_scope if policy_rules(m.source)]
    conventions: list[Unit] = []
    for module in primaries:
        own = [module, *tests_of.get(module.path, [])]
        deps = _dependencies(own, in_scope)
        stem = stem_of(module.name)
        data = sorted(
            p.relative_to(root).as_posix()
            for p in (root / module.parent).glob("*.json")
            if p.name.startswith(stem)
        )
        conventions.append(
            Unit(
                stem,
                "conventions",
                module.parent,
                [module.path, *(d.path for d in deps)],
                [t.path for t in own[1:]],
                data,
            )
        )
    for helper in (m for m in in_scope if m not in primaries):
        tests = [t.path for t in tests_of.get(helper.path, [])]
        holder = next((u for u in conventions if helper.path in u.modules), None)
        if holder is not None:
            # A helper's tests run with the first unit that loads the helper.
            holder.tests.extend(tests)
        else:
            # Nothing loads it and it defines no policy: it would be published alone.
            conventions.append(
                Unit(stem_of(helper.name), "conventions", helper.parent, [helper.path], tests)
            )
    one_set = None
    if conventions and not spacelift:
        one_set = str(common_parent(m.path for m in in_scope))
    return Layout(units + conventions, out_of_scope, orphans, one_set)


def materialize(root: Path, unit: Unit, into: Path) -> Path:
    """Copy a conventions unit, unedited, to ``into/NAME`` (the set is named after the
    directory): modules and tests at their paths relative to their common parent, and
    the JSON data files at the top, where ``opa test X_test.rego X.rego X.mock.json`` (the
    authors' CI) loads them: at the root of ``data``, whatever their directory."""
    paths = [*unit.modules, *unit.tests]
    base = common_parent(paths)
    target = into / unit.name
    placed = {path: PurePosixPath(path).relative_to(base) for path in paths}
    for path in unit.data_files:
        name = PurePosixPath(PurePosixPath(path).name)
        placed[path] = name if name not in placed.values() else PurePosixPath(path)
    for path, relative in placed.items():
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / path, destination)
    return target


# -- the authors' tests and the mocks they label ---------------------------------------------


@dataclass(frozen=True)
class AuthorTest:
    query: str
    module: str
    """Relative to the library."""
    body: str


class NotLiteral(Exception):
    """An expression that is not a plain Rego value literal."""


def _skip(text: str, pos: int) -> int:
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
        elif text[pos] == "#":
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
        else:
            break
    return pos


def parse_literal(text: str, pos: int = 0) -> tuple[Any, int]:  # noqa: C901 - Rego terms
    """A Rego value literal at ``pos`` (objects, arrays, sets as lists, strings, numbers,
    ``true``/``false``/``null``; trailing commas allowed) and the position after it."""
    pos = _skip(text, pos)
    if pos >= len(text):
        raise NotLiteral("end of text")
    c = text[pos]
    if c in "[{":
        closing = "]" if c == "[" else "}"
        items: list[Any] = []
        pairs: dict[str, Any] = {}
        is_object = False
        pos = _skip(text, pos + 1)
        while pos < len(text) and text[pos] != closing:
            value, pos = parse_literal(text, pos)
            pos = _skip(text, pos)
            if c == "{" and pos < len(text) and text[pos] == ":":
                if not isinstance(value, str):
                    raise NotLiteral("an object key that is not a string")
                is_object = True
                pairs[value], pos = parse_literal(text, pos + 1)
                pos = _skip(text, pos)
            else:
                items.append(value)
            if pos < len(text) and text[pos] == ",":
                pos = _skip(text, pos + 1)
            elif pos < len(text) and text[pos] != closing:
                raise NotLiteral(f"unexpected {text[pos]!r}")
        if pos >= len(text):
            raise NotLiteral("unclosed")
        if is_object and items:
            raise NotLiteral("a mix of object and set items")
        return (pairs if is_object or (c == "{" and not items) else items), pos + 1
    if c == '"':
        end = pos + 1
        while end < len(text) and text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        try:
            return json.loads(text[pos : end + 1]), end + 1
        except ValueError:
            raise NotLiteral("a bad string") from None
    if c == "`":
        end = text.find("`", pos + 1)
        if end < 0:
            raise NotLiteral("unclosed raw string")
        return text[pos + 1 : end], end + 1
    number = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?").match(text, pos)
    if number:
        raw = number.group(0)
        return (float(raw) if any(ch in raw for ch in ".eE") else int(raw)), number.end()
    word = re.compile(_IDENT).match(text, pos)
    if word and word.group(0) in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[word.group(0)], word.end()
    raise NotLiteral(f"not a literal at {text[pos : pos + 20]!r}")


def _matching_brace(blanked: str, start: int) -> int:
    depth = 0
    for i in range(start, len(blanked)):
        if blanked[i] in "{[(":
            depth += 1
        elif blanked[i] in "}])":
            depth -= 1
            if depth == 0:
                return i
    return len(blanked)


def author_tests(module: str, source: str) -> list[AuthorTest]:
    """The ``test_*`` rules of a test module, once per name, with their bodies."""
    package = package_of(source)
    if package is None:
        return []
    blanked = blank(source)
    found: dict[str, AuthorTest] = {}
    for match in re.finditer(r"(?m)^[ \t]*(test_\w*)", blanked):
        name = match.group(1)
        brace = blanked.find("{", match.end())
        newline_gap = blanked[match.end() : brace] if brace >= 0 else ""
        # A head such as `test_x if {` or `test_x {`; `test_x := v` has no body to read.
        if brace < 0 or re.search(r"[:=]", newline_gap):
            body = ""
        else:
            body = source[brace + 1 : _matching_brace(blanked, brace)]
        query = f"data.{package}.{name}"
        if query in found:
            found[query] = dataclasses.replace(found[query], body=found[query].body + "\n" + body)
        else:
            found[query] = AuthorTest(query, module, body)
    return list(found.values())


def _statements(body: str) -> list[str]:
    """A rule body's expressions, split at newlines and ``;`` outside brackets."""
    blanked = blank(body)
    out, depth, start = [], 0, 0
    for i, c in enumerate(blanked):
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        elif c in "\n;" and depth == 0:
            out.append(body[start:i])
            start = i + 1
    out.append(body[start:])
    return [s.strip() for s in out if s.strip()]


@dataclass(frozen=True)
class Mock:
    test: str
    """The test's query."""
    module: str
    rule: str
    """The rule the test asserts on, as written (``deny``, ``spacelift.deny``)."""
    label: str
    """``violating`` or ``passing``."""
    expected: int | None
    """The number of findings the test expects, when it says."""
    source: str
    """Where the input came from: ``data.mock.NAME``, ``literal`` or a rule name."""
    document: Any


_COUNT = re.compile(rf"count\(\s*({_REF})\s*\)\s*(==|=|>=|>|!=|<=|<)\s*(\d+)")


def _label(op: str, n: int) -> tuple[str, int | None] | None:
    if op in ("==", "="):
        return ("passing", 0) if n == 0 else ("violating", n)
    if (op == ">" and n >= 0) or (op == ">=" and n >= 1) or (op == "!=" and n == 0):
        return "violating", None
    if (op == "<" and n == 1) or (op == "<=" and n == 0):
        return "passing", 0
    return None


def _later_verdict(variable: str, statement: str) -> tuple[str, int | None] | None:
    """The label a statement after ``VAR = deny with input as X`` gives: ``count(VAR) OP
    N``, or ``VAR == {...}`` (the exact findings: violating unless empty)."""
    blanked = blank(statement).strip()
    check = _COUNT.fullmatch(blanked)
    if check and check.group(1) == variable:
        return _label(check.group(2), int(check.group(3)))
    equal = re.fullmatch(rf"({_IDENT})\s*==\s*(.+)|(.+?)\s*==\s*({_IDENT})", blanked, re.S)
    if equal is None or variable not in (equal.group(1), equal.group(4)):
        return None
    offset = equal.start(2) if equal.group(1) == variable else equal.start(3)
    try:
        value, _ = parse_literal(statement.strip(), offset)
    except NotLiteral:
        return None
    if not isinstance(value, list | dict):
        return None
    return ("violating", len(value)) if value else ("passing", 0)


def _is_policy_rule(ref: str) -> bool:
    rule = ref.rsplit(".", 1)[-1]
    return bool(_VIOLATION_RULE.fullmatch(rule)) or rule in _BOOLEAN_RULES


def _resolve_input(
    text: str, scopes: Sequence[str], data: Mapping[str, Any]
) -> tuple[str, Any] | None:
    """The input a ``with input as`` gives: ``data.x.y`` from the JSON data, a literal,
    or a variable or rule defined as a literal in ``scopes`` (the test body before the
    statement, then the module), the last definition in the first scope that has one."""
    text = text.strip()
    ref = re.match(rf"data\.({_REF})", text)
    if ref:
        value: Any = data
        for part in ref.group(1).split("."):
            if not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
        return f"data.{ref.group(1)}", value
    try:
        return "literal", parse_literal(text)[0]
    except NotLiteral:
        pass
    name = re.match(_IDENT, text)
    if name is None or name.end() != len(text):
        return None
    head = re.compile(rf"(?m)^[ \t]*{re.escape(name.group(0))}[ \t]*:?=[ \t]*")
    for scope in scopes:
        definitions = list(head.finditer(blank(scope)))
        if definitions:
            try:
                return name.group(0), parse_literal(scope, definitions[-1].end())[0]
            except NotLiteral:
                return None
    return None


def mocks_of(test: AuthorTest, module_source: str, data: Mapping[str, Any]) -> list[Mock]:
    """The labelled inputs of one test (see the module doc); unlabelled ones are skipped."""
    found = []
    statements = _statements(test.body)
    for index, statement in enumerate(statements):
        blanked = blank(statement)
        with_input = re.search(r"\bwith\s+input\s+as\s+", blanked)
        if with_input is None:
            continue
        lhs = blanked[: with_input.start()].strip()
        rest = statement[with_input.end() :]
        # Another `with` after the input (`with data.x as y`) is not part of the input.
        rest = re.split(r"\s+with\s+", rest, maxsplit=1)[0]
        verdict: tuple[str, int | None] | None = None
        rule = ""
        counted = _COUNT.fullmatch(lhs)
        element = re.fullmatch(rf"({_REF})\s*\[.*\]", lhs, re.S)
        bare = re.fullmatch(rf"(not\s+)?({_REF})", lhs)
        assigned = re.fullmatch(rf"({_IDENT})\s*:?=\s*({_REF})", lhs)
        if counted:
            rule, verdict = counted.group(1), _label(counted.group(2), int(counted.group(3)))
        elif element:
            rule, verdict = element.group(1), ("violating", None)
        elif bare and bare.group(2).rsplit(".", 1)[-1] in _BOOLEAN_RULES:
            rule = bare.group(2)
            verdict = ("violating", None) if bare.group(1) else ("passing", 0)
        elif assigned:
            rule = assigned.group(2)
            for later in statements[index + 1 :]:
                verdict = _later_verdict(assigned.group(1), later)
                if verdict is not None:
                    break
        if verdict is None or not _is_policy_rule(rule):
            continue
        before = "\n".join(statements[:index])
        resolved = _resolve_input(rest, [before, module_source], data)
        if resolved is None:
            continue
        found.append(
            Mock(test.query, test.module, rule, verdict[0], verdict[1], resolved[0], resolved[1])
        )
    return found


def merged_data(root: Path, files: Iterable[str]) -> dict[str, Any]:
    """The JSON files' documents merged at the root of ``data``, as ``opa test`` loads
    them (objects merged key by key; an unreadable file is skipped)."""

    def merge(into: dict[str, Any], value: Mapping[str, Any]) -> None:
        for key, item in value.items():
            if isinstance(item, Mapping) and isinstance(into.get(key), dict):
                merge(into[key], item)
            else:
                into[key] = json.loads(json.dumps(item))

    data: dict[str, Any] = {}
    for path in files:
        try:
            document = json.loads((root / path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, Mapping):
            merge(data, document)
    return data


_BARE_PLAN_KEYS: Final = (
    "resource_changes",
    "format_version",
    "terraform_version",
    "planned_values",
    "configuration",
    "prior_state",
    "output_changes",
)
"""Keys of ``terraform show -json`` output: an input holding one is a bare plan."""


@dataclass(frozen=True)
class MockPlan:
    plan: dict[str, Any]
    workspace: str
    kind: str
    dropped: tuple[str, ...]
    """What the mock gives the policy that Runplane cannot (run metadata it lacks)."""
    context: Mapping[str, Any] = field(default_factory=dict)
    """The rest of the run the mock describes, as a ``policy test --run-context``
    document: tags, message, drift detection, the commit."""

    def metadata(self) -> Any:
        from runplane.domain.policy_run import run_context

        version = str(self.plan.get("terraform_version") or "")
        return run_context(
            dict(self.context), workspace=self.workspace, kind=self.kind, engine_version=version
        )


def mock_plan(document: Any) -> MockPlan | None:
    """The plan and run a mock input stands for, or None if it holds neither. A mock
    holding run metadata only (``tfrun``, ``run``, ``spacelift``) stands for an empty plan
    in that run: what Runplane would give a policy reading the run alone."""
    if not isinstance(document, Mapping):
        return None
    workspace, kind, dropped = "local", "plan_and_apply", []
    context: dict[str, Any] = {}
    run = document.get("tfrun")
    if isinstance(run, Mapping):
        workspace = _text_at(run, "workspace", "name") or workspace
        kind = "plan_only" if run.get("is_dry") is True else kind
        _scalr_context(run, context)
        known = {"workspace", "is_dry", "is_destroy", "id", "created_at", "message", "vcs"}
        dropped += [f"tfrun.{k}" for k in sorted(run) if k not in known]
        dropped += [
            f"tfrun.workspace.{k}"
            for k in sorted(_map(run, "workspace"))
            if k not in ("name", "tags")
        ]
    run = document.get("run")
    if isinstance(run, Mapping):
        workspace = _text_at(run, "workspace", "name") or workspace
        kind = "speculative" if run.get("speculative") is True else kind
        tags = _map(run, "workspace").get("tags")
        if isinstance(tags, list):
            context["tags"] = [t for t in tags if isinstance(t, str)]
        if isinstance(run.get("message"), str):
            context["message"] = run["message"]
        known = {"workspace", "speculative", "is_destroy", "id", "created_at", "kind", "message"}
        dropped += [f"run.{k}" for k in sorted(run) if k not in known]
    spacelift = document.get("spacelift")
    if isinstance(spacelift, Mapping):
        workspace = _text_at(spacelift, "stack", "name") or workspace
        run = spacelift.get("run")
        _spacelift_context(spacelift, context)
        if isinstance(run, Mapping):
            kind = "plan_only" if run.get("type") == "PROPOSED" else kind
            known = {"type", "state", "id", "created_at", "drift_detection", "commit"}
            # Runplane derives the changes from the plan: a mock giving them without a
            # plan stands for a plan it does not have.
            dropped += [f"spacelift.run.{k}" for k in sorted(run) if k not in known]
        stack = _map(spacelift, "stack")
        dropped += [f"spacelift.stack.{k}" for k in sorted(stack) if k not in ("name", "labels")]
        dropped += [
            f"spacelift.{k}" for k in sorted(spacelift) if k not in ("run", "stack", "commit")
        ]
    plan: Any = next(
        (
            document[k]
            for k in ("tfplan", "plan", "terraform")
            if isinstance(document.get(k), Mapping)
        ),
        None,
    )
    if plan is not None:
        plan = dict(plan)
        # HCP gives the configuration beside the plan as well as in it.
        if "configuration" not in plan and isinstance(document.get("configuration"), Mapping):
            plan["configuration"] = document["configuration"]
    elif any(k in document for k in _BARE_PLAN_KEYS):
        plan = document
    elif any(isinstance(document.get(k), Mapping) for k in ("tfrun", "run", "spacelift")):
        plan = {}
    else:
        return None
    plan_roots = {"terraform", "spacelift", "tfplan", "tfrun", "plan", "run", "configuration"}
    if plan is not document:
        dropped += [k for k in sorted(document) if k not in plan_roots]
    return MockPlan(dict(plan), workspace, kind, tuple(dropped), context)


def _scalr_context(run: Mapping[str, Any], context: dict[str, Any]) -> None:
    """Scalr's tags (an object keyed by name), message and commit, as a run context."""
    workspace = run.get("workspace")
    if isinstance(workspace, Mapping) and isinstance(workspace.get("tags"), Mapping):
        context["tags"] = [str(k) for k in workspace["tags"]]
    if isinstance(run.get("message"), str):
        context["message"] = run["message"]
    vcs = run.get("vcs")
    if isinstance(vcs, Mapping):
        commit = _map(vcs, "commit")
        author = _map(commit, "author")
        pr = _map(vcs, "pull_request") or None
        context["vcs"] = _strings(
            repository=vcs.get("repository_id") or "mock/repository",
            branch=vcs.get("branch") or "main",
            commit_sha=commit.get("sha") or "0" * 40,
            working_directory=vcs.get("path"),
            commit_message=commit.get("message"),
            sender=author.get("username"),
            pull_request_title=pr.get("title") if pr else None,
            pull_request_author=pr.get("author") if pr else None,
        ) | ({"pull_request": pr["id"]} if pr and isinstance(pr.get("id"), int) else {})


def _spacelift_context(spacelift: Mapping[str, Any], context: dict[str, Any]) -> None:
    """Spacelift's labels, drift flag and commit, as a run context."""
    stack = spacelift.get("stack")
    if isinstance(stack, Mapping) and isinstance(stack.get("labels"), list):
        context["tags"] = [t for t in stack["labels"] if isinstance(t, str)]
    run = spacelift.get("run")
    if isinstance(run, Mapping) and isinstance(run.get("drift_detection"), bool):
        context["drift_detection"] = run["drift_detection"]
    commit = spacelift.get("commit")
    if not isinstance(commit, Mapping) and isinstance(run, Mapping):
        commit = run.get("commit")
    if isinstance(commit, Mapping):
        context["vcs"] = _strings(
            repository="mock/repository",
            branch=commit.get("branch") or "main",
            commit_sha=commit.get("hash") or "0" * 40,
            commit_message=commit.get("message"),
            sender=commit.get("author"),
        )


def _map(value: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``value[key]`` if it is an object, else an empty one."""
    found = value.get(key)
    return found if isinstance(found, Mapping) else {}


def _strings(**values: Any) -> dict[str, str]:
    return {k: v for k, v in values.items() if isinstance(v, str)}


def _text_at(value: Mapping[str, Any], *path: str) -> str | None:
    current: Any = value
    for part in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current if isinstance(current, str) and current else None


# -- measuring through Runplane ------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str

    @property
    def module(self) -> str | None:
        found = re.search(r"[\w./+-]+\.rego\b", self.message)
        return found.group(0) if found else None


class _Accepted(Exception):
    """Raised by the store when the service would write: every check has passed."""


class _NothingKept:
    """The policy service's store, artifacts and directory, keeping nothing: the
    service runs its publication checks and stops where it would write."""

    def find(self, org_id: str, name: str) -> None:
        return None

    def version_artifact_id(self, org_id: str, name: str, digest: str) -> None:
        return None

    def publish(self, *args: Any, **kwargs: Any) -> None:
        raise _Accepted

    def put(self, organization_id: str, kind: Any, plaintext: Iterable[bytes]) -> Any:
        from runplane.domain.artifacts import Artifact, ArtifactStatus

        size = sum(len(chunk) for chunk in plaintext)
        return Artifact(
            "art-policy-compat",
            organization_id,
            kind,
            ArtifactStatus.REGISTERED,
            size,
            None,
            datetime.now(UTC),
        )

    def discard(self, artifact_id: str) -> None:
        return None

    def now(self) -> datetime:
        return datetime.now(UTC)


def publication_refusal(document: Mapping[str, Any]) -> Refusal | None:
    """What ``Policies.publish`` says of a set's document: None if it would publish."""
    from runplane.adapters.rego import RegoEvaluator
    from runplane.domain.errors import RunplaneError
    from runplane.domain.identity import Permission, Principal, PrincipalKind
    from runplane.services.policy import Policies

    kept = _NothingKept()
    evaluator = RegoEvaluator()
    service = Policies(
        kept,
        kept,  # type: ignore[arg-type]
        lambda: evaluator,
        kept,  # type: ignore[arg-type]
        kept,  # type: ignore[arg-type]
        units=kept,  # type: ignore[arg-type]
        sources=kept,  # type: ignore[arg-type]
        records=kept,  # type: ignore[arg-type]
    )
    principal = Principal(
        PrincipalKind.USER,
        "policy-compat",
        "org-policy-compat",
        frozenset({Permission.POLICY_MANAGE}),
        "policy-compat",
    )
    try:
        service.publish(principal, document)
    except _Accepted:
        return None
    except RunplaneError as error:
        return Refusal(error.code, str(error))
    except Exception as error:  # the service crashing on an author's files is a finding
        return Refusal("crash", f"{type(error).__name__}: {error}")
    return Refusal("crash", "the service returned without writing")


def load_refusal(directory: Path) -> tuple[PolicySetContent | None, Refusal | None]:
    """``load_policy_set_dir``, as ``runplane policy publish/test`` read a directory."""
    from runplane.domain.errors import RunplaneError
    from runplane.domain.policy import load_policy_set_dir

    try:
        return load_policy_set_dir(directory), None
    except RunplaneError as error:
        return None, Refusal(error.code, str(error))
    except Exception as error:
        return None, Refusal("crash", f"{type(error).__name__}: {error}")


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """``runplane ARGV`` in this process: exit code, stdout, stderr."""
    from runplane import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _cli_error(stderr: str) -> Refusal:
    line = next((x for x in stderr.splitlines() if x.startswith("error: ")), stderr.strip())
    line = line.removeprefix("error: ")
    code = re.search(r"\(([a-z_]+)\)$", line)
    return Refusal(code.group(1) if code else "error", line)


def _json_tail(stdout: str) -> Any:
    """The last JSON document the CLI printed."""
    start = stdout.rfind("\n{")
    try:
        return json.loads(stdout[start + 1 :] if start >= 0 else stdout)
    except ValueError:
        return None


@dataclass
class TestRecord:
    query: str
    module: str
    outcome: str
    """``PASS``, ``FAIL``, ``ERROR``, ``BLOCKED`` (the set was refused),
    ``NOT_DISCOVERED`` (Runplane does not read the file as a test) or ``NOT_RUN``."""
    cause: str = ""


@dataclass
class MockRecord:
    test: str
    module: str
    source: str
    label: str
    expected: int | None
    outcome: str
    """``passed``, ``failed``, ``errored``, ``no_policy`` (no policy of the unit is the
    asserted rule), ``no_plan`` (the input holds no plan) or ``not_evaluated``."""
    findings: int = 0
    matches: bool = False
    violating_passed: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class Probe:
    shape: str
    refusal: Refusal | None
    tests: list[TestRecord] = field(default_factory=list)
    mocks: list[MockRecord] = field(default_factory=list)


@dataclass
class UnitReport:
    unit: Unit
    refusal: Refusal | None
    tests: list[TestRecord]
    mocks: list[MockRecord]
    test_refusal: Refusal | None = None
    probe: Probe | None = None

    @property
    def accepted(self) -> bool:
        return self.refusal is None


def _test_cause(test: AuthorTest, modules: Sequence[RegoFile]) -> str:
    """What a failing test reads outside the modules: the library's JSON data (which
    ``--unit`` may not load, or load elsewhere than ``opa test`` did)."""
    packages = {m.package for m in modules if m.package}
    foreign = sorted(
        ref
        for ref in data_refs(test.body)
        if not any(ref == p or ref.startswith(p + ".") or p.startswith(ref + ".") for p in packages)
    )
    if foreign:
        return f"FAIL; the test reads data.{foreign[0].split('.')[0]} (the library's JSON files)"
    return ""


def _policy_for(rule: str, content: PolicySetContent, test_package: str | None) -> str | None:
    """The policy of the unit that reads ``rule`` as a test names it."""
    last = rule.rsplit(".", 1)[-1]
    decisions = {
        m.group(1): m.group(2)
        for module in content.modules
        for m in re.finditer(
            rf"(?m)^({_IDENT}) := \[\] if \{{ (data\.{_REF}) == true \}}", module.source
        )
    }
    candidates = []
    for policy in content.policies:
        query = policy.query
        rule_in_decisions = query.rsplit(".", 1)[-1]
        query = decisions.get(rule_in_decisions, query) if "decisions" in query else query
        if query.rsplit(".", 1)[-1] == last:
            candidates.append((query, policy.name))
    if len(candidates) > 1 and test_package:
        exact = [c for c in candidates if c[0] == f"data.{test_package}.{last}"]
        candidates = exact or candidates
    return candidates[0][1] if candidates else None


def _mock_record(
    mock: Mock,
    content: PolicySetContent | None,
    evaluate: Callable[[MockPlan], tuple[list[PolicyResult] | None, list[str]]] | None,
    test_package: str | None,
) -> MockRecord:
    record = MockRecord(
        mock.test, mock.module, mock.source, mock.label, mock.expected, "not_evaluated"
    )
    if content is None or evaluate is None:
        return record
    policy = _policy_for(mock.rule, content, test_package)
    if policy is None:
        record.outcome = "no_policy"
        record.notes = [f"no policy of the unit reads {mock.rule}"]
        return record
    plan = mock_plan(mock.document)
    if plan is None:
        keys = sorted(mock.document) if isinstance(mock.document, Mapping) else []
        record.outcome = "no_plan"
        record.notes = [f"the mock input holds no plan (input has {', '.join(keys) or 'no keys'})"]
        return record
    results, notes = evaluate(plan)
    # Run metadata Runplane lacks matters only where a module reads it.
    read = " ".join(re.sub(r"#[^\n]*", "", m.source) for m in content.modules)
    dropped = [
        k for k in plan.dropped if re.search(rf"\b{re.escape(k.rsplit('.', 1)[-1])}\b", read)
    ]
    record.notes = [*notes, *(f"the mock gives {k}, which Runplane does not" for k in dropped)]
    result = next((r for r in results or () if r.policy == policy), None)
    if result is None:
        record.outcome = "errored"
        record.notes.insert(0, "no result for the policy")
        return record
    record.outcome = str(result.outcome)
    if record.outcome == "errored":
        record.notes.insert(0, "; ".join(result.messages))
    record.findings = len(result.messages) + result.omitted if record.outcome == "failed" else 0
    record.matches = (mock.label == "violating" and record.outcome == "failed") or (
        mock.label == "passing" and record.outcome == "passed"
    )
    record.violating_passed = mock.label == "violating" and record.outcome == "passed"
    if not record.matches:
        record.notes += _differences(mock.document, plan, content, read)
        record.notes.append(_raw_decision(content, policy, mock))
    return record


def _raw_decision(content: PolicySetContent, policy: str, mock: Mock) -> str:
    """Separate the engine from the input: the decision on the author's own input, as
    ``opa test`` gave it, with Runplane's evaluator (a diagnosis, not a measure)."""
    from runplane.adapters.rego import RegoEvaluator

    try:
        results = RegoEvaluator().evaluate([content], mock.document)
    except Exception as error:  # a diagnosis must not stop the measurement
        return f"on the author's own input: {type(error).__name__}"
    result = next((r for r in results if r.policy == policy), None)
    outcome = "no result" if result is None else str(result.outcome)
    same = (mock.label == "violating") == (outcome == "failed")
    return (
        f"on the author's own input the policy {outcome} as the author expects: the input "
        "Runplane built made the difference"
        if same
        else f"on the author's own input the policy {outcome} too: the evaluation differs "
        "from OPA's, not the input"
    )


def _differences(document: Any, plan: MockPlan, content: PolicySetContent, read: str) -> list[str]:
    """Where the document Runplane built from the mock's plan lacks or changes what the
    author's input had, at paths whose last name the modules mention: what the policy
    read differently. A diagnosis only (the decision was measured through the CLI)."""
    from runplane.domain.policy_input import PolicyInputs

    meta = plan.metadata()
    try:
        ours: Any = PolicyInputs(plan.plan, meta).document(content.input_shape)
    except Exception:  # a diagnosis must not stop the measurement
        return []
    if content.input_shape == "runplane":
        return []  # a different document by design: nothing to compare path by path
    lost: set[str] = set()

    def walk(theirs: Any, mine: Any, path: str, depth: int) -> None:
        if len(lost) > 200 or depth > 12:
            return
        if isinstance(theirs, Mapping):
            if not isinstance(mine, Mapping):
                lost.add(path)
                return
            for key, value in theirs.items():
                if key in mine:
                    walk(value, mine[key], f"{path}.{key}", depth + 1)
                else:
                    lost.add(f"{path}.{key} (absent)")
        elif isinstance(theirs, list):
            if not isinstance(mine, list) or len(mine) != len(theirs):
                lost.add(f"{path} (length or type)")
                return
            for a, b in zip(theirs, mine, strict=True):
                walk(a, b, f"{path}[*]", depth + 1)
        elif theirs != mine:
            lost.add(f"{path} (changed)")

    walk(document, ours, "input", 0)
    mentioned = sorted(
        (path for path in lost if re.search(rf"\b{re.escape(_leaf(path))}\b", read)),
        key=lambda path: (path.count("."), path),
    )
    return (
        [f"Runplane's input differs where the policy reads: {', '.join(mentioned[:3])}"]
        if mentioned
        else []
    )


def _leaf(path: str) -> str:
    last = path.split(" ")[0].rsplit(".", 1)[-1]
    return last.replace("[*]", "")


def _cli_evaluator(
    directory: Path, scratch: Path
) -> Callable[[MockPlan], tuple[list[PolicyResult] | None, list[str]]]:
    def evaluate(plan: MockPlan) -> tuple[list[PolicyResult] | None, list[str]]:
        from runplane.domain.policy_results import PolicyResult

        path = scratch / MOCK_PLAN_FILE
        path.write_text(json.dumps(plan.plan), encoding="utf-8")
        argv = ["policy", "test", str(directory), "--plan", str(path)]
        # The exit code says the overall verdict, which the results say per policy.
        context = scratch / MOCK_CONTEXT_FILE
        context.write_text(json.dumps(dict(plan.context)), encoding="utf-8")
        argv += ["--run-context", str(context), "--workspace", plan.workspace]
        _, out, err = run_cli([*argv, "--kind", plan.kind, "--json"])
        notes = [
            line.removeprefix("warning: ")
            for line in err.splitlines()
            if line.startswith("warning: the plan")
        ]
        parsed = _json_tail(out)
        if not isinstance(parsed, Mapping):
            return None, [_cli_error(err).message, *notes]
        return [PolicyResult.from_dict(r) for r in parsed.get("results", [])], notes

    return evaluate


def _direct_evaluator(
    content: PolicySetContent,
) -> Callable[[MockPlan], tuple[list[PolicyResult] | None, list[str]]]:
    def evaluate(plan: MockPlan) -> tuple[list[PolicyResult] | None, list[str]]:
        from runplane.adapters.rego import RegoEvaluator
        from runplane.domain.policy_input import PolicyInputs

        inputs = PolicyInputs(plan.plan, plan.metadata())
        hidden = inputs.hidden_whole
        notes = [f"no sensitivity map: {len(hidden)} value(s) hidden whole"] if hidden else []
        return RegoEvaluator().evaluate([content], inputs), notes

    return evaluate


def _tests_from_cli(
    authored: Sequence[AuthorTest], modules: Sequence[RegoFile], parsed: Any
) -> list[TestRecord]:
    ran = {
        r["test"]: r
        for r in (parsed.get("unit_tests", []) if isinstance(parsed, Mapping) else [])
        if isinstance(r, Mapping)
    }
    records = []
    for test in authored:
        found = ran.get(test.query)
        if found is None:
            outcome = "NOT_DISCOVERED" if test.module.endswith(".test.rego") else "NOT_RUN"
            cause = (
                "a *.test.rego file: Runplane reads only *_test.rego as tests "
                "(and publishes it as a module)"
                if outcome == "NOT_DISCOVERED"
                else "not reported by runplane policy test --unit"
            )
            records.append(TestRecord(test.query, test.module, outcome, cause))
            continue
        outcome = str(found.get("outcome", "ERROR"))
        cause = ""
        if outcome == "FAIL":
            cause = _test_cause(test, modules) or "FAIL"
        elif outcome == "ERROR":
            cause = str(found.get("message", ""))
        records.append(TestRecord(test.query, test.module, outcome, cause))
    return records


def _implied_shape(content: PolicySetContent) -> str:
    """The shape providing the most of the roots the modules read (``bare`` on a tie
    with ``runplane``, as a plan read directly is what conftest users wrote for)."""
    from runplane.domain.policy_input import SHAPE_ROOTS

    roots = set().union(*(input_roots(m.source) for m in content.modules))
    return min(SHAPE_ROOTS, key=lambda s: (-len(roots & SHAPE_ROOTS[s]), s != "bare", s))


def _probe(
    directory: Path,
    content: PolicySetContent,
    authored: Sequence[AuthorTest],
    files: Sequence[RegoFile],
    mocks: Sequence[tuple[Mock, str | None]],
) -> Probe:
    from runplane.adapters.rego_unit import run_unit_tests
    from runplane.domain.policy import policy_set_from_document
    from runplane.domain.policy_files import read_modules
    from runplane.domain.policy_unit_tests import discover

    shape = _implied_shape(content)
    document = content.to_document()
    document["input_shape"] = shape
    probe = Probe(shape, publication_refusal(document))
    if probe.refusal is not None:
        return probe
    shaped = policy_set_from_document(document)
    try:
        tests = read_modules(directory, tests=True)
        results = run_unit_tests([*shaped.modules, *tests], discover(tests))
        parsed = {"unit_tests": [r.to_dict() for r in results]}
    except Exception as error:
        parsed = {}
        probe.refusal = Refusal("tests", f"{type(error).__name__}: {error}")
    probe.tests = _tests_from_cli(authored, files, parsed)
    evaluate = _direct_evaluator(shaped)
    probe.mocks = [_mock_record(m, shaped, evaluate, package) for m, package in mocks]
    return probe


def measure_unit(root: Path, unit: Unit, scratch: Path, probe: bool) -> UnitReport:
    """Publication, unit tests and mock decisions of one unit, as shipped."""
    directory = (
        root / unit.directory if unit.kind != "conventions" else materialize(root, unit, scratch)
    )
    sources = {
        p: (root / p).read_text(encoding="utf-8", errors="replace")
        for p in [*unit.modules, *unit.tests]
    }
    files = [RegoFile(p, s, package_of(s)) for p, s in sources.items()]
    authored = [t for p in unit.tests for t in author_tests(p, sources[p])]
    data = merged_data(root, unit.data_files)
    mocks = [
        (mock, package_of(sources[test.module]))
        for test in authored
        for mock in mocks_of(test, sources[test.module], data)
    ]
    content, refusal = load_refusal(directory)
    if content is not None:
        refusal = publication_refusal(content.to_document())
    report = UnitReport(unit, refusal, [], [])
    if refusal is not None:
        report.tests = [TestRecord(t.query, t.module, "BLOCKED", refusal.code) for t in authored]
        report.mocks = [_mock_record(m, None, None, p) for m, p in mocks]
        if probe and content is not None and refusal.code == "policy_input_root_unknown":
            report.probe = _probe(directory, content, authored, files, mocks)
        return report
    code, out, err = run_cli(["policy", "test", str(directory), "--unit", "--json"])
    parsed = _json_tail(out)
    if code == 2 and not isinstance(parsed, Mapping):
        # The set publishes but a test module is refused: no test ran.
        report.test_refusal = _cli_error(err)
        report.tests = [
            TestRecord(t.query, t.module, "NOT_RUN", report.test_refusal.message) for t in authored
        ]
    else:
        report.tests = _tests_from_cli(authored, files, parsed)
    evaluate = _cli_evaluator(directory, scratch)
    report.mocks = [_mock_record(m, content, evaluate, p) for m, p in mocks]
    return report


# -- a library's report and the totals -------------------------------------------------------


@dataclass
class LibraryReport:
    name: str
    source: Mapping[str, Any]
    units: list[UnitReport]
    out_of_scope: dict[str, str]
    orphan_tests: list[TestRecord]
    one_set: tuple[str, Refusal | None] | None

    @property
    def role(self) -> str:
        return str(self.source.get("role", "unseen"))

    def modules(self) -> dict[str, UnitReport | None]:
        """Each module, and the refused unit that refused it (None: accepted)."""
        out: dict[str, UnitReport | None] = {}
        for report in self.units:
            for module in report.unit.modules:
                if report.accepted:
                    out[module] = None
                elif module not in out or (
                    # Refused everywhere: its own unit's refusal names its cause.
                    out[module] is not None and module == report.unit.modules[0]
                ):
                    out[module] = report
        return out

    def tests(self) -> list[TestRecord]:
        return [t for r in self.units for t in r.tests] + self.orphan_tests

    def mocks(self) -> list[MockRecord]:
        return [m for r in self.units for m in r.mocks]

    def figures(self) -> dict[str, int]:
        modules = self.modules()
        tests = self.tests()
        mocks = self.mocks()
        evaluated = [m for m in mocks if m.outcome in ("passed", "failed", "errored")]
        return {
            "units": len(self.units),
            "units_accepted": sum(r.accepted for r in self.units),
            "modules": len(modules),
            "modules_accepted": sum(v is None for v in modules.values()),
            "tests": len(tests),
            "tests_passing": sum(t.outcome == "PASS" for t in tests),
            "mocks": len(mocks),
            "mocks_violating": sum(m.label == "violating" for m in mocks),
            "mocks_evaluated": len(evaluated),
            "mocks_matching": sum(m.matches for m in evaluated),
            "violating_evaluated": sum(m.label == "violating" for m in evaluated),
            "violating_passing": sum(m.violating_passed for m in evaluated),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "library": self.name,
            "source": dict(self.source),
            "figures": self.figures(),
            "units": [_unit_dict(r) for r in self.units],
            "out_of_scope": self.out_of_scope,
            "orphan_tests": [dataclasses.asdict(t) for t in self.orphan_tests],
            "as_one_set": None
            if self.one_set is None
            else {
                "directory": self.one_set[0],
                "refusal": None if self.one_set[1] is None else dataclasses.asdict(self.one_set[1]),
            },
        }


def _unit_dict(report: UnitReport) -> dict[str, Any]:
    unit = report.unit
    return {
        "name": unit.name,
        "kind": unit.kind,
        "directory": unit.directory,
        "modules": unit.modules,
        "test_modules": unit.tests,
        "data_files": unit.data_files,
        "accepted": report.accepted,
        "refusal": None if report.refusal is None else dataclasses.asdict(report.refusal),
        "test_refusal": None
        if report.test_refusal is None
        else dataclasses.asdict(report.test_refusal),
        "tests": [dataclasses.asdict(t) for t in report.tests],
        "mocks": [dataclasses.asdict(m) for m in report.mocks],
        "probe": None if report.probe is None else dataclasses.asdict(report.probe),
    }


def measure_library(root: Path, source: Mapping[str, Any], probe: bool = False) -> LibraryReport:
    cut = layout(root)
    orphans = [
        TestRecord(
            t.query, t.module, "NOT_RUN", "a test module paired with no module of the library"
        )
        for path in cut.orphan_tests
        for t in author_tests(path, (root / path).read_text(encoding="utf-8", errors="replace"))
    ]
    with tempfile.TemporaryDirectory(prefix="policy-compat-") as tmp:
        reports = []
        for index, unit in enumerate(cut.units):
            scratch = Path(tmp) / str(index)
            scratch.mkdir()
            reports.append(measure_unit(root, unit, scratch, probe))
    one_set = None
    if cut.one_set is not None:
        content, refusal = load_refusal(root / cut.one_set)
        if content is not None:
            refusal = publication_refusal(content.to_document())
        one_set = (cut.one_set, refusal)
    return LibraryReport(root.name, source, reports, cut.out_of_scope, orphans, one_set)


def cause_of(message: str) -> str:
    """A refusal or error message with its particulars (files, lines, numbers, quoted
    values, names) taken out, so that the same cause groups together."""
    text = re.sub(r"[\w./+-]+\.(?:rego|hcl|json)\b", "<file>", message)
    text = re.sub(r"\bline \d+", "line N", text)
    # Quoted values, not apostrophes (OPA's, Runplane's).
    text = re.sub(r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|`[^`]*`", "'…'", text)
    text = re.sub(r"\bpolicy set [\w.+-]+", "policy set <set>", text)
    text = re.sub(r"\bpolicy [\w.+-]+:", "policy <name>:", text)
    text = re.sub(r"\b\d[\d,.]*\b", "N", text)
    return " ".join(text.split())[:240]


def mock_cause(mock: MockRecord) -> str:
    """Why a mock's decision did not match, in words that group: the particulars
    (addresses, counts) stay in the example."""
    head = f"{mock.label} mock, policy {mock.outcome}"
    if mock.outcome in ("no_plan", "no_policy", "errored"):
        detail = cause_of(mock.notes[0]) if mock.notes else ""
        return f"{head}: {detail}" if detail else head
    reasons = []
    sensitivity = next((note for note in mock.notes if "sensitivity map" in note), None)
    if sensitivity is not None:
        # Runplane's own words say what it did with the values (hidden, or read as given).
        treated = "hidden whole" if "hidden whole as" in sensitivity else "read as not sensitive"
        if "marking nothing sensitive" in sensitivity:
            treated = "read as not sensitive"
        reasons.append(f"the mock plan has no before_sensitive/after_sensitive maps ({treated})")
    reasons += sorted({note for note in mock.notes if note.startswith("the mock gives")})
    for note in mock.notes:
        if note.startswith("on the author's own input"):
            reasons.insert(0, note.split(": ", 1)[-1])
        if note.startswith("Runplane's input differs"):
            paths = note.split(": ", 1)[1].split(", ")
            leaves = sorted({_leaf(path) + path[len(path.split(" ")[0]) :] for path in paths})
            reasons.append(f"Runplane's input differs where the policy reads {', '.join(leaves)}")
    return f"{head}: " + ("; ".join(reasons) or "the policy decided otherwise on the same plan")


@dataclass
class Cause:
    kind: str
    key: str
    modules: set[str] = field(default_factory=set)
    tests: int = 0
    mocks: int = 0
    example: str = ""
    where: str = ""


def taxonomy(  # noqa: C901 - one branch per cause
    reports: Sequence[LibraryReport], *, probe: bool = False
) -> list[Cause]:
    """Causes across libraries, by how many modules, then tests, then mocks they block."""
    causes: dict[tuple[str, str], Cause] = {}

    def add(kind: str, message: str, where: str) -> Cause:
        key = (kind, cause_of(message))
        if key not in causes:
            causes[key] = Cause(kind, key[1], example=message, where=where)
        return causes[key]

    for library in reports:
        if not probe:
            for module, refused in library.modules().items():
                if refused is not None and refused.refusal is not None:
                    cause = add(
                        f"refused ({refused.refusal.code})",
                        refused.refusal.message,
                        f"{library.name}/{refused.unit.directory}",
                    )
                    cause.modules.add(f"{library.name}/{module}")
        for report in library.units:
            refusal = report.refusal
            tests, mocks = report.tests, report.mocks
            if probe:
                if report.probe is None:
                    continue
                refusal, tests, mocks = report.probe.refusal, report.probe.tests, report.probe.mocks
                if refusal is not None:
                    cause = add(
                        f"probe refused ({refusal.code})",
                        refusal.message,
                        f"{library.name}/{report.unit.directory}",
                    )
                    cause.modules.update(f"{library.name}/{m}" for m in report.unit.modules)
            where = f"{library.name}/{report.unit.directory}"
            for test in tests:
                if test.outcome == "PASS":
                    continue
                if test.outcome == "BLOCKED" and refusal is not None:
                    add(f"refused ({refusal.code})", refusal.message, where).tests += 1
                else:
                    message = test.cause or test.outcome
                    add(
                        f"test {test.outcome}",
                        message,
                        f"{library.name}/{test.module} {test.query}",
                    ).tests += 1
            for mock in mocks:
                if mock.matches or mock.outcome == "not_evaluated":
                    continue
                what = "violating mock passed" if mock.violating_passed else f"mock {mock.outcome}"
                cause = add(what, mock_cause(mock), f"{library.name}/{mock.module} {mock.test}")
                cause.mocks += 1
                if cause.mocks == 1:
                    cause.example = f"({mock.source}) " + ("; ".join(mock.notes) or mock.outcome)
        if not probe:
            for test in library.orphan_tests:
                add("test NOT_RUN", test.cause, f"{library.name}/{test.module}").tests += 1
    return sorted(
        causes.values(), key=lambda c: (-len(c.modules), -c.tests, -c.mocks, c.kind, c.key)
    )


# -- output --------------------------------------------------------------------------------


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "    -"


def _figures_line(f: Mapping[str, int]) -> str:
    modules, accepted = f["modules"], f["modules_accepted"]
    return (
        f"modules {accepted}/{modules} {_percent(accepted, modules)}"
        f"  tests {f['tests_passing']}/{f['tests']} {_percent(f['tests_passing'], f['tests'])}"
        f"  mocks matching {f['mocks_matching']}/{f['mocks_evaluated']} evaluated"
        f" (of {f['mocks']})  violating passing {f['violating_passing']}/{f['violating_evaluated']}"
    )


def totals(reports: Iterable[LibraryReport]) -> dict[str, int]:
    out: dict[str, int] = {}
    for report in reports:
        for key, value in report.figures().items():
            out[key] = out.get(key, 0) + value
    return out


def _probe_figures(reports: Iterable[LibraryReport]) -> dict[str, int]:
    """The figures if the probed units had declared their shape (others as shipped)."""
    out = {
        "modules": 0,
        "modules_accepted": 0,
        "tests": 0,
        "tests_passing": 0,
        "mocks": 0,
        "mocks_evaluated": 0,
        "mocks_matching": 0,
        "violating_evaluated": 0,
        "violating_passing": 0,
    }
    for library in reports:
        accepted: set[str] = set()
        every: set[str] = set()
        for report in library.units:
            every.update(report.unit.modules)
            probe = report.probe
            ok = report.accepted or (probe is not None and probe.refusal is None)
            if ok:
                accepted.update(report.unit.modules)
            tests = probe.tests if probe is not None and probe.refusal is None else report.tests
            mocks = probe.mocks if probe is not None and probe.refusal is None else report.mocks
            out["tests"] += len(tests)
            out["tests_passing"] += sum(t.outcome == "PASS" for t in tests)
            out["mocks"] += len(mocks)
            evaluated = [m for m in mocks if m.outcome in ("passed", "failed", "errored")]
            out["mocks_evaluated"] += len(evaluated)
            out["mocks_matching"] += sum(m.matches for m in evaluated)
            out["violating_evaluated"] += sum(m.label == "violating" for m in evaluated)
            out["violating_passing"] += sum(m.violating_passed for m in evaluated)
        out["modules"] += len(every)
        out["modules_accepted"] += len(accepted)
        out["tests"] += len(library.orphan_tests)
    return out


def text_report(reports: Sequence[LibraryReport], probe: bool) -> str:
    lines = []
    for library in reports:
        source = library.source
        origin = (
            f"{source.get('repository', '?')}@{str(source.get('commit', '?'))[:12]}"
            if source
            else "(no sources.json entry)"
        )
        lines.append(f"== {library.name}  {origin}  ({library.role})")
        f = library.figures()
        lines.append(f"   units {f['units_accepted']}/{f['units']} accepted  " + _figures_line(f))
        for cause in taxonomy([library]):
            counts = f"{len(cause.modules)} modules, {cause.tests} tests, {cause.mocks} mocks"
            lines.append(f"   - {counts}: [{cause.kind}] {cause.key}")
            lines.append(f"       e.g. {cause.where}: {cause.example}")
        if library.out_of_scope:
            kinds: dict[str, int] = {}
            for why in library.out_of_scope.values():
                kinds[why] = kinds.get(why, 0) + 1
            lines.append(
                "   out of scope: " + "; ".join(f"{n} files: {k}" for k, n in sorted(kinds.items()))
            )
        if library.one_set is not None:
            directory, refusal = library.one_set
            verdict = (
                "accepted" if refusal is None else f"refused: {refusal.message} ({refusal.code})"
            )
            lines.append(f"   as one set ({directory}): {verdict}")
        lines.append("")
    header = f"{'library':48} {'role':6}  figures"
    lines.append(header)
    for library in reports:
        lines.append(f"{library.name[:48]:48} {library.role:6}  {_figures_line(library.figures())}")
    for role in ("seen", "unseen"):
        chosen = [r for r in reports if r.role == role]
        if chosen:
            lines.append(f"{'total ' + role:48} {'':6}  {_figures_line(totals(chosen))}")
    lines.append(f"{'total':48} {'':6}  {_figures_line(totals(reports))}")
    if probe:
        lines.append("")
        lines.append(
            "probe: units refused for an input root, with the shape their modules read declared"
        )
        for library in reports:
            figures = _figures_line(_probe_figures([library]))
            lines.append(f"{library.name[:48]:48} {library.role:6}  {figures}")
        lines.append(f"{'total':48} {'':6}  {_figures_line(_probe_figures(reports))}")
        for cause in taxonomy(reports, probe=True):
            counts = f"{len(cause.modules)} modules, {cause.tests} tests, {cause.mocks} mocks"
            lines.append(f" - {counts}: [{cause.kind}] {cause.key}")
            lines.append(f"     e.g. {cause.where}: {cause.example}")
    return "\n".join(lines)


def libraries(directory: Path, only: Sequence[str] = ()) -> list[tuple[Path, dict[str, Any]]]:
    manifest: dict[str, Any] = {}
    path = directory / SOURCES_FILE
    if path.is_file():
        loaded = json.loads(path.read_text(encoding="utf-8"))
        manifest = loaded if isinstance(loaded, dict) else {}
    return [
        (child, dict(manifest.get(child.name) or {}))
        for child in sorted(directory.iterdir())
        if child.is_dir() and not child.name.startswith(".") and (not only or child.name in only)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.policy_compat",
        description="Measure how third-party Rego policy libraries run on Runplane, unedited.",
    )
    parser.add_argument("dir", type=Path, help="a directory holding one directory per library")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="also try units refused for an input root with the shape their modules read",
    )
    parser.add_argument(
        "--library", action="append", default=[], help="only this library (repeatable)"
    )
    args = parser.parse_args(argv)
    if not args.dir.is_dir():
        print(f"error: {args.dir} is not a directory", file=sys.stderr)
        return 2
    reports = [
        measure_library(path, source, args.probe)
        for path, source in libraries(args.dir, args.library)
    ]
    if args.json:
        document: dict[str, Any] = {
            "libraries": [r.to_dict() for r in reports],
            "totals": {
                "all": totals(reports),
                **{
                    role: totals([r for r in reports if r.role == role])
                    for role in ("seen", "unseen")
                },
            },
            "taxonomy": [_cause_dict(c) for c in taxonomy(reports)],
        }
        if args.probe:
            document["probe"] = {
                "totals": _probe_figures(reports),
                "taxonomy": [_cause_dict(c) for c in taxonomy(reports, probe=True)],
            }
        print(json.dumps(document, indent=2, default=str))
    else:
        print(text_report(reports, args.probe))
    return 0


def _cause_dict(cause: Cause) -> dict[str, Any]:
    return {
        "kind": cause.kind,
        "cause": cause.key,
        "modules": len(cause.modules),
        "tests": cause.tests,
        "mocks": cause.mocks,
        "example": cause.example,
        "where": cause.where,
    }


if __name__ == "__main__":
    sys.exit(main())
