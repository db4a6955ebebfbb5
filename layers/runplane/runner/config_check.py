"""Refusing configurations that declare their own backend or read modules from outside.

A run's state lives in the Runplane Cloud API; a configuration that declares a
``backend`` or ``cloud`` block (in any root-module file, override files included)
could send the state elsewhere, so it is refused before the engine sees it. HCL is
read with a small tokenizer that knows comments, quoted strings with nested template
interpolations, and heredocs, which is enough to find blocks nested directly in a
top-level ``terraform`` block. JSON files are read with every duplicate key kept.
A file that cannot be read this way is refused too: the check never guesses.

The same reading finds every ``module`` block in every directory of the
configuration, and refuses a ``source`` that would make the engine load files from
outside the configuration directory (the sandbox's other files, or the host's).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from runplane.runner.refusal import Refused, shown

# The engine's root-module file extensions (OpenTofu adds .tofu and .tofu.json).
NATIVE_SUFFIXES: Final = (".tf", ".tofu")
JSON_SUFFIXES: Final = (".tf.json", ".tofu.json")
FORBIDDEN_BLOCKS: Final = ("backend", "cloud")
MODULE_BLOCK: Final = "module"

_IDENT = re.compile(r"[^\W\d][\w-]*")
_HEREDOC = re.compile(r"<<-?([^\W\d][\w-]*)\r?\n")
_HEREDOC_STOP = re.compile(r"[\n$%]")
# What Go's unicode.IsSpace accepts: the engine trims these around a heredoc's end marker.
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006" + (
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# A go-getter forced getter: "git::https://...", "file::/etc".
_FORCED_GETTER = re.compile(r"([A-Za-z0-9]+)::(.*)", re.DOTALL)
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]:")
# The engine's quoted-string escapes, and the template escapes "$${" and "%%{".
_STRING_ESCAPE = re.compile(r"\\(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)|\$\$\{|%%\{", re.DOTALL)
_SIMPLE_ESCAPES: Final = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


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

    Then every directory's module sources are checked (:func:`check_module_sources`),
    with the same ``skip``.
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
    check_module_sources(directory, skip)


def check_module_sources(directory: Path, skip: frozenset[str] = frozenset()) -> None:
    """Raise :class:`Refused` naming the first file and module whose ``source`` is outside
    ``directory``.

    Every ``.tf``, ``.tofu``, ``.tf.json`` and ``.tofu.json`` file in every directory is
    read (modules call modules), and each top-level ``module`` block's ``source`` must
    be a literal string that is not an absolute path, a home directory (``~``), a
    ``file::`` getter or ``file:`` URL, nor a Windows drive path; a relative path
    (``./x``, ``../x``) must stay inside ``directory`` once resolved against the
    directory of the file declaring it, and no other address may have a ``..``
    component. Registry and remote addresses (``hashicorp/consul/aws``,
    ``git::https://...``, ``github.com/...``, ``s3::...``) are left to the engine, which
    fetches them over the network as before. ``skip`` names files in ``directory``
    itself that the runner wrote. A file that cannot be read is refused.
    """
    root = Path(directory)
    for path in _configuration_files(root):
        relative = path.relative_to(root).as_posix()
        if relative in skip:
            continue
        declared_in = posixpath.dirname(relative)
        for module, source in _module_sources(path, relative):
            if source is None:
                raise Refused(
                    f"configuration file {shown(relative)}: module {shown(module)} has a "
                    "source that is not a plain quoted string (no interpolation, heredoc or "
                    "expression): write the module's source literally"
                )
            problem = _source_problem(source, declared_in)
            if problem is not None:
                raise Refused(
                    f"configuration file {shown(relative)}: module {shown(module)} source "
                    f"{shown(source)} {problem}; modules come from inside the configuration "
                    'directory (a relative path such as "./modules/x"), a registry or a '
                    "remote repository"
                )


def _configuration_files(root: Path) -> Iterator[Path]:
    """The engine's configuration files under ``root``, directory by directory, sorted."""
    # Links are not followed: the extracted configuration has none to follow.
    for top, directories, names in os.walk(root):
        directories.sort()
        for name in sorted(names):
            path = Path(top, name)
            if name.endswith((*NATIVE_SUFFIXES, *JSON_SUFFIXES)) and path.is_file():
                yield path


def _module_sources(path: Path, relative: str) -> list[tuple[str, str | None]]:
    """Each module block's name and source in the file (None for a source not literal)."""
    data = path.read_bytes()
    is_json = path.name.endswith(JSON_SUFFIXES)
    # A native module block starts with the bare word: a file without it declares none.
    # (JSON keys may be escaped, so JSON files are always read.)
    if not is_json and MODULE_BLOCK.encode() not in data:
        return []
    try:
        text = data.decode("utf-8-sig")
        return _json_module_sources(text) if is_json else _native_module_sources(text)
    except (_Unreadable, UnicodeDecodeError, ValueError, RecursionError):
        raise Refused(
            f"configuration file {shown(relative)} cannot be checked for module sources "
            "(it is not valid UTF-8 HCL or JSON)"
        ) from None


def _source_problem(source: str, declared_in: str) -> str | None:
    """What makes ``source``, declared in ``declared_in`` (a directory relative to the
    configuration's root, "" for the root), reach outside the configuration; or None."""
    # The engine takes ".\\" and "..\\" for local paths too: read backslashes as slashes.
    address = source.replace("\\", "/")
    forced = _FORCED_GETTER.fullmatch(address)
    if forced is not None:
        if forced.group(1).lower() == "file":
            return "uses the file:: getter"
        address = forced.group(2)
    problem = _local_address_problem(address)
    if problem is not None:
        return problem
    if forced is None and (address in (".", "..") or address.startswith(("./", "../"))):
        resolved = posixpath.normpath(posixpath.join(declared_in, address))
        if resolved == ".." or resolved.startswith("../"):
            return "resolves outside the configuration directory"
        return None
    if ".." in address.split("/"):
        # Not a local path, yet the getters would join it to a directory of the sandbox.
        return "has a '..' component"
    return None


def _local_address_problem(address: str) -> str | None:
    """Why ``address`` (after any forced getter) names the host's files directly, if it does."""
    if address.lower().startswith("file:"):
        return "is a file: URL"
    if address.startswith("/"):
        return "is an absolute path"
    if address.startswith("~"):
        return "starts with '~' (a home directory)"
    if _WINDOWS_DRIVE.match(address):
        return "is a Windows drive path"
    return None


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


def _json_bodies(value: Any) -> list[Any]:
    """A JSON block's bodies: one object, or an array of objects."""
    if _is_object(value):
        return [value]
    return [item for item in value if _is_object(item)] if isinstance(value, list) else []


def _json_module_sources(text: str) -> list[tuple[str, str | None]]:
    """Each module block's name and source; a source that is not a string, or holds a
    template sequence the engine may evaluate, is None."""
    document = json.loads(text, object_pairs_hook=_pairs)
    if not _is_object(document):
        raise _Unreadable
    found: list[tuple[str, str | None]] = []
    for key, value in document:
        if key != MODULE_BLOCK:
            continue
        for labelled in _json_bodies(value):
            for name, block in labelled:
                for body in _json_bodies(block):
                    found.extend((str(name), _json_literal(v)) for k, v in body if k == "source")
    return found


def _json_literal(value: Any) -> str | None:
    if not isinstance(value, str) or "${" in value or "%{" in value:
        return None
    return value


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


def _native_module_sources(text: str) -> list[tuple[str, str | None]]:
    """Each top-level module block's name and ``source`` attribute: its text when the
    value is one plain quoted string, else None."""
    scanner = _LiteralScanner(text)
    found: list[tuple[str, str | None]] = []
    depth = 0
    module: str | None = None  # the name of the module block being read
    statement: list[str] = []  # the tokens since the last newline or brace
    values: list[str | None] = []  # each token's text, a string's literal value
    for token in scanner.tokens():
        if token not in ("{", "}", "\n"):
            statement.append(token)
            values.append(scanner.last if token == '"' else token)
            continue
        # A newline or brace ends the statement: an attribute's value stops here.
        if module is not None and depth == 1 and statement[:2] == ["source", "="]:
            found.append((module, values[2] if statement[2:] == ['"'] else None))
        if token == "{":
            if depth == 0 and statement[:1] == [MODULE_BLOCK]:
                module = _label(values[1:])
            depth += 1
        elif token == "}":
            depth -= 1
            if depth < 0:
                raise _Unreadable
            if depth == 0:
                module = None
        statement, values = [], []
    if depth != 0:
        raise _Unreadable
    return found


def _label(values: list[str | None]) -> str:
    """A block's first label as written (the engine refuses a block with another count)."""
    return values[0] if values and values[0] is not None else ""


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


class _LiteralScanner(_Scanner):
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
