"""Refusing configurations that declare their own backend or read modules from outside.

A run's state lives in the Runplane Cloud API; a configuration that declares a
``backend`` or ``cloud`` block (in any root-module file, override files included)
could send the state elsewhere, so it is refused before the engine sees it. Files are
read block by block (:mod:`runplane.runner.hcl_blocks`: comments, quoted strings with
nested template interpolations, heredocs; JSON with every duplicate key kept), which is
enough to find blocks nested directly in a top-level ``terraform`` block. A file that
cannot be read this way is refused too: the check never guesses.

The same reading finds every ``module`` block in every directory of the
configuration, and refuses a ``source`` that would make the engine load files from
outside the configuration directory (the sandbox's other files, or the host's).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from runplane.runner.hcl_blocks import (
    Unreadable,
    json_bodies,
    json_document,
    statements,
)
from runplane.runner.refusal import Refused, shown

# The engine's root-module file extensions (OpenTofu adds .tofu and .tofu.json).
NATIVE_SUFFIXES: Final = (".tf", ".tofu")
JSON_SUFFIXES: Final = (".tf.json", ".tofu.json")
FORBIDDEN_BLOCKS: Final = ("backend", "cloud")
MODULE_BLOCK: Final = "module"

# A go-getter forced getter: "git::https://...", "file::/etc".
_FORCED_GETTER = re.compile(r"([A-Za-z0-9]+)::(.*)", re.DOTALL)
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]:")


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
        except (Unreadable, UnicodeDecodeError, ValueError):
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
    except (Unreadable, UnicodeDecodeError, ValueError, RecursionError):
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


def _json_blocks(text: str) -> str | None:
    for key, value in json_document(text):
        if key != "terraform":
            continue
        for body in json_bodies(value):
            for inner, _ in body:
                if inner in FORBIDDEN_BLOCKS:
                    return str(inner)
    return None


def _json_module_sources(text: str) -> list[tuple[str, str | None]]:
    """Each module block's name and source; a source that is not a string, or holds a
    template sequence the engine may evaluate, is None."""
    found: list[tuple[str, str | None]] = []
    for key, value in json_document(text):
        if key != MODULE_BLOCK:
            continue
        for labelled in json_bodies(value):
            for name, block in labelled:
                for body in json_bodies(block):
                    found.extend((str(name), _json_literal(v)) for k, v in body if k == "source")
    return found


def _json_literal(value: Any) -> str | None:
    if not isinstance(value, str) or "${" in value or "%{" in value:
        return None
    return value


# --------------------------------------------------------------------------- native HCL


def _native_blocks(text: str) -> str | None:
    """The first forbidden block type nested directly in a top-level ``terraform`` block."""
    in_terraform = False
    for statement in statements(text):
        tokens = statement.tokens
        if statement.end == "{":
            if statement.depth == 0 and tokens == ["terraform"]:
                in_terraform = True
            elif in_terraform and statement.depth == 1 and tokens and tokens[0] in FORBIDDEN_BLOCKS:
                return tokens[0]
        elif statement.closes_top_block:
            in_terraform = False
    return None


def _native_module_sources(text: str) -> list[tuple[str, str | None]]:
    """Each top-level module block's name and ``source`` attribute: its text when the
    value is one plain quoted string, else None."""
    found: list[tuple[str, str | None]] = []
    module: str | None = None  # the name of the module block being read
    for statement in statements(text):
        tokens, values = statement.tokens, statement.values
        # A newline or brace ends the statement: an attribute's value stops here.
        if module is not None and statement.depth == 1 and tokens[:2] == ["source", "="]:
            found.append((module, values[2] if tokens[2:] == ['"'] else None))
        if statement.end == "{" and statement.depth == 0 and tokens[:1] == [MODULE_BLOCK]:
            module = _label(values[1:])
        elif statement.closes_top_block:
            module = None
    return found


def _label(values: list[str | None]) -> str:
    """A block's first label as written (the engine refuses a block with another count)."""
    return values[0] if values and values[0] is not None else ""
