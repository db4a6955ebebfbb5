"""Telling the engine which of the run's variables are sensitive.

A sensitive workspace variable reaches the engine as a plain string in the run's
variables file; the engine only treats it as sensitive if its ``variable`` block says
so. :func:`write_sensitive_override` writes an override file that sets
``sensitive = true`` on each such variable the root module declares. The engine then
masks every value derived from it in plans and its own messages, and refuses a
non-sensitive output derived from it ("Output refers to sensitive values"), as HCP
Terraform does for its sensitive variables.

Only declared variables are named: an override of an undeclared one fails the engine
("Missing base variable declaration to override"). A value for an undeclared variable
stays in the variables file, where the engine only warns, naming the variable and not
its value.

Override files are merged in lexical order of their names, so a configuration's own
override file that sorts after ours and declares one of these variables could set
``sensitive = false`` again: such a configuration is refused, as is a
``runplane_sensitive_override.tofu`` file, which OpenTofu would read instead of ours.

Declarations are found with the tokenizer of :mod:`runplane.runner.config_check`
(comments, strings with nested interpolations, heredocs) and its JSON reader that keeps
duplicate keys, in every root-module ``.tf``, ``.tofu``, ``.tf.json`` and ``.tofu.json``
file. Both engines' files are read whichever engine runs, so a variable declared only
where one engine looks (a ``.tofu`` file, which Terraform ignores; a ``.tf`` file that a
``.tofu`` twin hides from OpenTofu) is marked anyway, and that engine then fails the run
("Missing base variable declaration to override"): a failure, never an unmarked
variable. Standard library only: this runs in the sandbox.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from runplane.domain.variables import name_problem
from runplane.runner.config_check import JSON_SUFFIXES, NATIVE_SUFFIXES, _is_override
from runplane.runner.hcl_blocks import Scanner, Unreadable, json_bodies, json_document
from runplane.runner.refusal import Refused, shown

SENSITIVE_OVERRIDE_NAME: Final = "runplane_sensitive_override.tf"
"""The override file :func:`write_sensitive_override` writes in the root module."""

_VARIABLE_BLOCK: Final = "variable"
# OpenTofu reads "x.tofu" instead of "x.tf" when both exist.
_TOFU_TWIN: Final = SENSITIVE_OVERRIDE_NAME.removesuffix(".tf") + ".tofu"
# The engine's quoted-string escapes, and the template escapes "$${" and "%%{".
_LABEL_ESCAPE = re.compile(r"\\(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)|\$\$\{|%%\{", re.DOTALL)
_SIMPLE_ESCAPES: Final = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


def write_sensitive_override(config_dir: Path, names: Iterable[str]) -> Path | None:
    """Mark each of ``names`` that the root module in ``config_dir`` declares as a
    variable ``sensitive = true``; return the override file, or None if none is declared.

    Raises :class:`Refused` for a name the engine would not accept, a configuration file
    that cannot be read, or a configuration whose own override files could undo ours.
    """
    wanted = set(names)
    for name in sorted(wanted):
        problem = name_problem(name)
        if problem is not None:
            raise Refused(problem)
    if not wanted:
        return None
    root = Path(config_dir)
    declarations = dict(_declarations(root))
    marked = sorted(
        name for name in wanted if any(name in found for found in declarations.values())
    )
    if not marked:
        return None
    _refuse_undoing(root, declarations, set(marked))
    return _write(root / SENSITIVE_OVERRIDE_NAME, marked)


def declared_variables(config_dir: Path) -> set[str]:
    """The names of the variables the root module in ``config_dir`` declares (override
    files included), as the engine reads them. Raises :class:`Refused` for a file that
    cannot be read."""
    return {name for found in dict(_declarations(Path(config_dir))).values() for name in found}


def _declarations(root: Path) -> Iterator[tuple[str, set[str]]]:
    """Each root-module file's name and the variable names it declares (ours skipped:
    it is about to be replaced)."""
    for path in sorted(root.iterdir()):
        name = path.name
        if name == SENSITIVE_OVERRIDE_NAME or not path.is_file():
            continue
        is_json = name.endswith(JSON_SUFFIXES)
        if not (is_json or name.endswith(NATIVE_SUFFIXES)):
            continue
        try:
            text = path.read_bytes().decode("utf-8-sig")
            found = _json_variables(text) if is_json else _native_variables(text)
        except (Unreadable, UnicodeDecodeError, ValueError, RecursionError):
            raise Refused(
                f"configuration file {shown(name)} cannot be read for its variable "
                "declarations (it is not valid UTF-8 HCL or JSON)"
            ) from None
        yield name, found


def _refuse_undoing(root: Path, declarations: dict[str, set[str]], marked: set[str]) -> None:
    """Refuse configuration files that the engine would merge over ours."""
    if os.path.lexists(root / _TOFU_TWIN):
        raise Refused(
            f"configuration file {shown(_TOFU_TWIN)} has a name the runner reserves: rename it"
        )
    ours = os.fsencode(SENSITIVE_OVERRIDE_NAME)
    for name, found in declarations.items():
        undone = sorted(found & marked)
        if undone and _is_override(name) and os.fsencode(name) > ours:
            raise Refused(
                f"configuration file {shown(name)} overrides sensitive variable "
                f"{shown(undone[0])} after the runner's {SENSITIVE_OVERRIDE_NAME}: rename "
                "the file to sort before it, or remove the variable block"
            )


def _write(path: Path, names: list[str]) -> Path:
    blocks = "".join(f'variable "{name}" {{\n  sensitive = true\n}}\n\n' for name in names)
    content = (
        "# Written by the Runplane runner: these variables are sensitive workspace "
        "variables.\n\n" + blocks
    )
    # Replaces a file of that name the configuration may have shipped; never follows a link.
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError:
        raise Refused(
            f"configuration entry {shown(path.name)} has a name the runner reserves: rename it"
        ) from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(content)
    return path


# --------------------------------------------------------------------------- JSON


def _json_variables(text: str) -> set[str]:
    """The labels of the top-level ``variable`` blocks: ``{"variable": {"NAME": ...}}``,
    or an array of such objects."""
    names: set[str] = set()
    for key, value in json_document(text):
        if key == _VARIABLE_BLOCK:
            for labelled in json_bodies(value):
                names.update(str(label) for label, _ in labelled)
    return names


# --------------------------------------------------------------------------- native HCL


class _LabelScanner(Scanner):
    """The configuration tokenizer, also keeping the text of the last quoted string."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.last: str | None = None

    def _string(self) -> None:
        start = self.at
        super()._string()
        # Set after the nested strings of its interpolations: this string's own text.
        self.last = _unescaped(self.text[start : self.at - 1])

    def _heredoc(self, marker: str) -> None:
        super()._heredoc(marker)
        self.last = None  # a heredoc is no block label


def _native_variables(text: str) -> set[str]:
    """The labels of the top-level ``variable`` blocks, quoted or bare."""
    scanner = _LabelScanner(text)
    names: set[str] = set()
    depth = 0
    statement: list[str] = []  # the tokens since the last newline or brace
    label: str | None = None  # the statement's second token's text
    for token in scanner.tokens():
        if token == "{":
            declares = depth == 0 and len(statement) == 2 and statement[0] == _VARIABLE_BLOCK
            if declares and label is not None:
                names.add(label)
            depth += 1
            statement = []
        elif token == "}":
            depth -= 1
            if depth < 0:
                raise Unreadable
            statement = []
        elif token == "\n":
            statement = []
        else:
            if len(statement) == 1:
                label = scanner.last if token == '"' else token
            statement.append(token)
    if depth != 0:
        raise Unreadable
    return names


def _unescaped(literal: str) -> str:
    """A quoted string's value, its escapes decoded. A template sequence is kept as
    written: no variable name can hold one, so such a label never matches a name."""
    return _LABEL_ESCAPE.sub(_escape_value, literal)


def _escape_value(match: re.Match[str]) -> str:
    escape = match.group()
    if escape in ("$${", "%%{"):
        return escape[1:]
    if escape[1] in "uU":
        code = int(escape[2:], 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code < 0xE000 else "\ufffd"
    return _SIMPLE_ESCAPES.get(escape[1], "\ufffd")
