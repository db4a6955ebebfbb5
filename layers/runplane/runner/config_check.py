"""Refusing configurations that declare their own backend.

A run's state lives in the Runplane Cloud API; a configuration that declares a
``backend`` or ``cloud`` block (in any root-module file, override files included)
could send the state elsewhere, so it is refused before the engine sees it. HCL is
read with a small tokenizer that knows comments, quoted strings with nested template
interpolations, and heredocs, which is enough to find blocks nested directly in a
top-level ``terraform`` block. JSON files are read with every duplicate key kept.
A file that cannot be read this way is refused too: the check never guesses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from runplane.runner.refusal import Refused, shown

# The engine's root-module file extensions (OpenTofu adds .tofu and .tofu.json).
NATIVE_SUFFIXES: Final = (".tf", ".tofu")
JSON_SUFFIXES: Final = (".tf.json", ".tofu.json")
FORBIDDEN_BLOCKS: Final = ("backend", "cloud")

_IDENT = re.compile(r"[^\W\d][\w-]*")
_HEREDOC = re.compile(r"<<-?([^\W\d][\w-]*)\r?\n")
_HEREDOC_STOP = re.compile(r"[\n$%]")
# What Go's unicode.IsSpace accepts: the engine trims these around a heredoc's end marker.
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" + (
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class _Unreadable(Exception):
    pass


def check_root_module(
    directory: Path, skip: frozenset[str] = frozenset(), *, replaced_backend: bool = False
) -> None:
    """Raise :class:`Refused` naming the first root-module file that declares a backend.

    ``skip`` names files the runner wrote itself. With ``replaced_backend`` (a remote
    operation: the client's configuration necessarily names its ``remote`` backend), a
    ``backend`` block in a primary file is accepted: the runner's override file replaces
    it whole. Override files and ``cloud`` blocks are still refused.
    """
    for path in sorted(Path(directory).iterdir()):
        name = path.name
        if name in skip or not path.is_file():
            continue
        is_json = name.endswith(JSON_SUFFIXES)
        if not (is_json or name.endswith(NATIVE_SUFFIXES)):
            continue
        primary = not _is_override(name)
        try:
            text = path.read_bytes().decode("utf-8-sig")
            found = _json_blocks(text) if is_json else _native_blocks(text)
        except (_Unreadable, UnicodeDecodeError, ValueError):
            raise Refused(
                f"configuration file {shown(name)} cannot be checked for a backend block "
                "(it is not valid UTF-8 HCL or JSON)"
            ) from None
        if found == "backend" and replaced_backend and primary:
            continue
        if found is not None:
            raise Refused(
                f"configuration file {shown(name)} declares a terraform {found!r} block: "
                "runs keep their state in Runplane, remove the block"
            )


def _is_override(name: str) -> bool:
    """The engine's override files: ``override`` or ``*_override`` with a module suffix."""
    for suffix in (*JSON_SUFFIXES, *NATIVE_SUFFIXES):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            return stem == "override" or stem.endswith("_override")
    return False


# --------------------------------------------------------------------------- JSON


def _pairs(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return pairs  # keep duplicate keys: the engine may read any of them


def _is_object(value: Any) -> bool:
    """Whether ``value`` is a decoded JSON object (key/value pairs, as ``_pairs`` keeps them)."""
    return isinstance(value, list) and all(isinstance(item, tuple) for item in value)


def _json_blocks(text: str) -> str | None:
    document = json.loads(text, object_pairs_hook=_pairs)
    if not _is_object(document):
        raise _Unreadable
    for key, value in document:
        if key != "terraform":
            continue
        # A block is one object, or an array of objects.
        bodies = [value] if _is_object(value) else value if isinstance(value, list) else []
        for body in bodies:
            if not _is_object(body):
                continue
            for inner, _ in body:
                if inner in FORBIDDEN_BLOCKS:
                    return str(inner)
    return None


# --------------------------------------------------------------------------- native HCL


def _native_blocks(text: str) -> str | None:
    """The first forbidden block type nested directly in a top-level ``terraform`` block."""
    depth = 0
    in_terraform = False
    statement: list[str] = []  # the tokens since the last newline or brace
    for token in _Scanner(text).tokens():
        if token == "{":
            depth += 1
            if depth == 1 and statement == ["terraform"]:
                in_terraform = True
            elif in_terraform and depth == 2 and statement and statement[0] in FORBIDDEN_BLOCKS:
                return statement[0]
            statement = []
        elif token == "}":
            depth -= 1
            if depth < 0:
                raise _Unreadable
            if depth == 0:
                in_terraform = False
            statement = []
        elif token == "\n":
            statement = []
        else:
            statement.append(token)
    if depth != 0:
        raise _Unreadable
    return None


class _Scanner:
    """The engine's HCL scanner, reduced to what block detection needs.

    Tokens are identifiers, ``{``, ``}``, newlines and other single characters. Comments
    are dropped (a line comment still ends its line); a quoted string or heredoc, with
    any interpolations nested in it, is one ``"`` token. Where the engine's scanner
    would find a syntax error this raises ``_Unreadable``.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def tokens(self, nested: bool = False) -> Iterator[str]:
        """The tokens up to the end, or (``nested``) up to the ``}`` closing an interpolation."""
        text, end = self.text, len(self.text)
        depth = 0
        while self.at < end:
            at = self.at
            char = text[at]
            if char in " \t\r":
                self.at += 1
            elif char == "#" or text.startswith("//", at):
                newline = text.find("\n", at)
                self.at = end if newline == -1 else newline
            elif text.startswith("/*", at):
                close = text.find("*/", at + 2)
                if close == -1:
                    raise _Unreadable
                self.at = close + 2  # (a block comment is no newline, even spanning lines)
            elif char == '"':
                self.at += 1
                self._string()
                yield '"'
            elif text.startswith("<<", at) and (heredoc := _HEREDOC.match(text, at)):
                self.at = heredoc.end()
                self._heredoc(heredoc.group(1))
                yield '"'
            elif ident := _IDENT.match(text, at):
                self.at = ident.end()
                yield ident.group()
            else:
                self.at += 1
                if char == "{":
                    depth += 1
                elif char == "}":
                    if nested and depth == 0:
                        return
                    depth -= 1
                yield char
        if nested:
            raise _Unreadable

    def _interpolation(self) -> None:
        for _ in self.tokens(nested=True):
            pass

    def _string(self) -> None:
        """Skip past the closing quote of the string whose content starts here."""
        text, end = self.text, len(self.text)
        while self.at < end:
            at = self.at
            char = text[at]
            if char == "\\":
                self.at += 2
            elif char == '"':
                self.at += 1
                return
            elif char in "\r\n":
                raise _Unreadable
            elif text.startswith(("$${", "%%{"), at):
                self.at += 3
            elif text.startswith(("${", "%{"), at):
                self.at += 2
                self._interpolation()
            else:
                self.at += 1
        raise _Unreadable

    def _heredoc(self, marker: str) -> None:
        """Skip to the newline ending the line that closes the heredoc whose body starts here.

        As in the engine, a closing line is a whole line (begun after a newline, with no
        interpolation on it) that is the marker once trimmed of white space.
        """
        text, end = self.text, len(self.text)
        start_of_line = True
        while self.at < end:
            at = self.at
            found = _HEREDOC_STOP.search(text, at)
            stop = end if found is None else found.start()
            if stop == end:
                break
            if text[stop] == "\n":
                if start_of_line and text[at:stop].strip(_GO_SPACE) == marker:
                    self.at = stop
                    return
                start_of_line = True
                self.at = stop + 1
                continue
            start_of_line = False
            if text.startswith(("$${", "%%{"), stop):
                self.at = stop + 3
            elif text.startswith(("${", "%{"), stop):
                self.at = stop + 2
                self._interpolation()
            else:
                self.at = stop + 1
        raise _Unreadable
