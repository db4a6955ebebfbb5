"""A small subset of HCL: enough for policy-set configuration files.

Pure: standard library only. Reads attributes (``key = value`` with a string, a
boolean or a number) and blocks (``type "label" ... { ... }``, nested), with ``#``,
``//`` and ``/* */`` comments. Anything else (lists, maps, expressions, heredocs,
interpolation) is refused with the file and line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Final

from runplane.domain.errors import InvalidPolicySet

Value = str | bool | int | float


@dataclass(frozen=True)
class Attribute:
    name: str
    value: Value
    line: int


@dataclass(frozen=True)
class Block:
    type: str
    labels: tuple[str, ...]
    line: int
    attributes: tuple[Attribute, ...] = ()
    blocks: tuple[Block, ...] = field(default=())

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)


_TOKEN: Final = re.compile(
    r"""
    (?P<nl>\n)
  | (?P<space>[ \t\r]+)
  | (?P<comment>\#[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_-]*)
  | (?P<punct>[={}])
    """,
    re.VERBOSE | re.DOTALL,
)


def parse(text: str, filename: str) -> Block:
    """The file as a root block (type ``""``) holding its attributes and blocks."""
    tokens = _tokenize(text, filename)
    parser = _Parser(tokens, filename)
    attributes, blocks = parser.body(top=True)
    return Block("", (), 1, attributes, blocks)


def _tokenize(text: str, filename: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    line, i = 1, 0
    while i < len(text):
        match = _TOKEN.match(text, i)
        if match is None and text.startswith("/*", i):
            raise InvalidPolicySet(f"{filename} line {line}: a /* comment is never closed")
        if match is None:
            raise InvalidPolicySet(
                f"{filename} line {line}: unexpected {text[i]!r} (this file may hold only "
                "blocks and string, boolean or number attributes)"
            )
        kind = match.lastgroup or ""
        value = match.group()
        if kind == "nl":
            tokens.append(("nl", value, line))
        elif kind not in ("space", "comment"):
            if kind == "string" and "${" in value:
                raise InvalidPolicySet(
                    f"{filename} line {line}: string interpolation is not supported here"
                )
            tokens.append((kind, value, line))
        line += value.count("\n")
        i = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, str, int]], filename: str) -> None:
        self.tokens = tokens
        self.filename = filename
        self.i = 0

    def _peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _error(self, line: int, message: str) -> InvalidPolicySet:
        return InvalidPolicySet(f"{self.filename} line {line}: {message}")

    def _skip_newlines(self) -> None:
        while (tok := self._peek()) is not None and tok[0] == "nl":
            self.i += 1

    def body(
        self, *, top: bool, opened: int = 0
    ) -> tuple[tuple[Attribute, ...], tuple[Block, ...]]:
        attributes: list[Attribute] = []
        blocks: list[Block] = []
        seen: dict[str, int] = {}
        while True:
            self._skip_newlines()
            tok = self._peek()
            if tok is None:
                if top:
                    return tuple(attributes), tuple(blocks)
                raise self._error(opened, "this block is never closed (missing '}')")
            kind, text, line = tok
            if kind == "punct" and text == "}":
                if top:
                    raise self._error(line, "unexpected '}'")
                self.i += 1
                return tuple(attributes), tuple(blocks)
            if kind != "ident":
                raise self._error(line, f"expected an attribute or block name, found {text}")
            self.i += 1
            nxt = self._peek()
            if nxt is not None and nxt[1] == "=":
                self.i += 1
                if text in seen:
                    raise self._error(line, f"{text} is set twice (first on line {seen[text]})")
                seen[text] = line
                attributes.append(Attribute(text, self._value(line), line))
                self._end_of_line()
            else:
                blocks.append(self._block(text, line))

    def _value(self, line: int) -> Value:
        tok = self._peek()
        if tok is None or tok[0] == "nl":
            raise self._error(line, "an attribute needs a value after '='")
        kind, text, _ = tok
        self.i += 1
        if kind == "string":
            decoded: str = json.loads(text)
            return decoded
        if kind == "number":
            number: int | float = json.loads(text)
            return number
        if kind == "ident" and text in ("true", "false"):
            return text == "true"
        raise self._error(
            line, f"unsupported value {text}: use a quoted string, true/false or a number"
        )

    def _end_of_line(self) -> None:
        tok = self._peek()
        if tok is not None and tok[0] != "nl" and tok[1] != "}":
            raise self._error(tok[2], f"unexpected {tok[1]} after the value")

    def _block(self, name: str, line: int) -> Block:
        labels: list[str] = []
        while (tok := self._peek()) is not None and tok[0] == "string":
            labels.append(json.loads(tok[1]))
            self.i += 1
        tok = self._peek()
        if tok is None or tok[1] != "{":
            found = "the end of the line" if tok is None or tok[0] == "nl" else tok[1]
            raise self._error(line, f"expected '=' or a block '{{' after {name}, found {found}")
        self.i += 1
        attributes, blocks = self.body(top=False, opened=line)
        return Block(name, tuple(labels), line, attributes, blocks)
