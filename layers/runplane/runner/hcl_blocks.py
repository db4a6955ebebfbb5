"""Reading HCL configuration files block by block: one scanner for the runner's checks.

Native HCL (``.tf``, ``.tofu``) is read with a small tokenizer that knows comments,
quoted strings with nested template interpolations, and heredocs (``Scanner``; with the
values of quoted strings, ``LiteralScanner``), and cut into statements, each ended by a
newline or a brace, with the depth of braces it stands at (``statements``): enough to
find blocks and their labels and the attributes written directly in them. JSON files
(``.tf.json``, ``.tofu.json``) are read with every duplicate key kept (``json_document``,
``json_bodies``). What cannot be read this way raises ``Unreadable``: a check never
guesses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

IDENT = re.compile(r"[^\W\d][\w-]*")
_HEREDOC = re.compile(r"<<-?([^\W\d][\w-]*)\r?\n")
_HEREDOC_STOP = re.compile(r"[\n$%]")
# What Go's unicode.IsSpace accepts: the engine trims these around a heredoc's end marker.
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" + (
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# The engine's quoted-string escapes, and the template escapes "$${" and "%%{".
_STRING_ESCAPE = re.compile(r"\\(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)|\$\$\{|%%\{", re.DOTALL)
_SIMPLE_ESCAPES: Final = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


class Unreadable(Exception):
    """The file is not HCL or JSON this reading can follow."""


# --------------------------------------------------------------------------- JSON


def _pairs(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return pairs  # keep duplicate keys: the engine may read any of them


def json_document(text: str) -> list[tuple[str, Any]]:
    """A JSON configuration file's top-level object as key/value pairs, duplicate keys
    kept (so is every object in it); raises ``Unreadable`` for anything but an object
    (``ValueError`` for text that is not JSON)."""
    document = json.loads(text, object_pairs_hook=_pairs)
    if not is_object(document):
        raise Unreadable
    return list(document)


def is_object(value: Any) -> bool:
    """Whether ``value`` is a decoded JSON object (key/value pairs, as read here)."""
    return isinstance(value, list) and all(isinstance(item, tuple) for item in value)


def json_bodies(value: Any) -> list[Any]:
    """A JSON block's bodies: one object, or an array of objects."""
    if is_object(value):
        return [value]
    return [item for item in value if is_object(item)] if isinstance(value, list) else []


# --------------------------------------------------------------------------- native HCL


@dataclass(frozen=True)
class Statement:
    """The tokens since the last newline or brace, ended by ``end``."""

    tokens: list[str]
    """Identifiers, ``"`` for a quoted string or heredoc, other single characters."""
    values: list[str | None]
    """Each token's text; a quoted string's literal value (``LiteralScanner.last``)."""
    depth: int
    """How many blocks enclose the statement (0: top level)."""
    end: str
    """``{`` (the statement is a block's header), ``}`` or a newline."""

    @property
    def closes_top_block(self) -> bool:
        return self.end == "}" and self.depth == 1


def statements(text: str) -> Iterator[Statement]:
    """The statements of a native HCL file, in order; raises ``Unreadable`` (as soon as
    it is met) for a brace closing nothing, and at the end for a block left open."""
    scanner = LiteralScanner(text)
    depth = 0
    tokens: list[str] = []
    values: list[str | None] = []
    for token in scanner.tokens():
        if token not in ("{", "}", "\n"):
            tokens.append(token)
            values.append(scanner.last if token == '"' else token)
            continue
        if token == "}" and depth == 0:
            raise Unreadable
        yield Statement(tokens, values, depth, token)
        depth += 1 if token == "{" else -1 if token == "}" else 0
        tokens, values = [], []
    if depth != 0:
        raise Unreadable


class Scanner:
    """The engine's HCL scanner, reduced to what block detection needs.

    Tokens are identifiers, ``{``, ``}``, newlines and other single characters. Comments
    are dropped (a line comment still ends its line); a quoted string or heredoc, with
    any interpolations nested in it, is one ``"`` token. Where the engine's scanner
    would find a syntax error this raises ``Unreadable``.
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
                    raise Unreadable
                self.at = close + 2  # (a block comment is no newline, even spanning lines)
            elif char == '"':
                self.at += 1
                self._string()
                yield '"'
            elif text.startswith("<<", at) and (heredoc := _HEREDOC.match(text, at)):
                self.at = heredoc.end()
                self._heredoc(heredoc.group(1))
                yield '"'
            elif ident := IDENT.match(text, at):
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
            raise Unreadable

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
                raise Unreadable
            elif text.startswith(("$${", "%%{"), at):
                self.at += 3
            elif text.startswith(("${", "%{"), at):
                self.at += 2
                self._interpolation()
            else:
                self.at += 1
        raise Unreadable

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
        raise Unreadable


class LiteralScanner(Scanner):
    """The scanner, also telling the value of each ``"`` token it yields.

    After a quoted string, ``last`` is its text with the engine's escapes applied, or
    None when it holds an interpolation or directive (the engine may evaluate those) or
    an escape the engine refuses; after a heredoc, ``last`` is None.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.last: str | None = None
        self._templates = 0

    def _interpolation(self) -> None:
        self._templates += 1
        super()._interpolation()

    def _string(self) -> None:
        start, templates = self.at, self._templates
        super()._string()
        raw = self.text[start : self.at - 1]  # without the closing quote
        self.last = _unescaped(raw) if self._templates == templates else None

    def _heredoc(self, marker: str) -> None:
        super()._heredoc(marker)
        self.last = None


def _unescaped(raw: str) -> str | None:
    """A quoted string's content as the engine reads it, or None for an invalid escape."""
    invalid = False

    def replacement(match: re.Match[str]) -> str:
        nonlocal invalid
        escape = match.group()
        if escape in ("$${", "%%{"):
            return escape[1:]
        code = escape[1:]
        if code in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[code]
        if len(code) > 1:  # \uNNNN or \UNNNNNNNN
            point = int(code[1:], 16)
            if point <= 0x10FFFF and not 0xD800 <= point <= 0xDFFF:
                return chr(point)
        invalid = True
        return ""

    text = _STRING_ESCAPE.sub(replacement, raw)
    return None if invalid else text
