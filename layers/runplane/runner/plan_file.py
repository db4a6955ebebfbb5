"""Check that a saved plan's ``show -json`` document describes the plan file itself.

The engine writes the saved plan (``plan -out``) and prints its JSON (``show -json``);
the control plane, the policy evaluator and the reviewer read the JSON, while ``apply``
reads the file. Both come from the untrusted side of the sandbox, so a hostile engine
can print a harmless JSON for a harmful file. :func:`check_plan_json` reads the file
itself (a zip holding the protobuf ``tfplan``, plan format 3 of Terraform 1.0 and
OpenTofu, with cty msgpack values, and the JSON states ``tfstate``/``tfstate-prev``)
and raises :class:`PlanMismatch` at the first thing the JSON misdescribes. It executes
nothing from the archive and bounds every size, count and depth it reads
(:class:`PlanFileError` past them, or for anything it cannot read as a saved plan).

The file is read the way the engine that wrote it reads it: Terraform 1.0.x spells a
change's address in parts and keeps drift in the two states; later versions (and
OpenTofu) spell ``addr`` and record ``resource_drift`` in the plan.

Checked against the plan file
-----------------------------
- ``terraform_version``.
- ``resource_changes``: the multiset of (``address``, ``deposed``) both ways (a missing,
  extra or renamed change is a mismatch; the engine leaves data-source deletes out of
  the JSON, and so does the check); per change ``actions``, ``mode``, ``type``, ``name``,
  ``module_address``, ``index``, ``provider_name``, ``action_reason``,
  ``previous_address``, ``change.before``, ``change.after``, the set of ``after_unknown``
  paths (exactly), ``replace_paths``; every path the file marks sensitive must be marked
  in ``before_sensitive``/``after_sensitive``. Values compare exactly (numbers by value,
  booleans apart from numbers, sets and lists in order: cty writes a set in the same
  order to both). A value the file leaves unknown must be left out of an object, and
  null or left out in an array (the file does not say whether an array is a list,
  where the engine writes null, or a set or tuple, where it drops the element).
- ``output_changes``: the same names both ways, ``actions``, ``before``, ``after`` (left
  out while not wholly known), ``after_unknown``, and ``sensitive``/``before_sensitive``/
  ``after_sensitive`` equal to the file's flag. Sensitive values are compared too (the
  JSON carries them).
- ``planned_values``: every resource in ``root_module`` and its ``child_modules`` is a
  planned object of the file (not a delete, not deposed) listed in the module it
  belongs to, with the same identity, ``values`` equal to the planned after value's
  known attributes, and the file's sensitive paths marked in ``sensitive_values``;
  every planned object is listed; ``outputs`` match the file's outputs (names,
  ``sensitive``, ``value`` while known).
- ``resource_drift``: like ``resource_changes`` (``index`` only when given: Terraform
  1.0 leaves it out), against the file's drift (Terraform 1.0.x: computed as the engine
  does, by comparing ``tfstate-prev`` with ``tfstate``).
- ``prior_state``: its resources (including deposed objects: address, identity,
  ``values``, ``tainted``, sensitive paths) and outputs against ``tfstate``.
- ``variables``: the same names and values as the file's.
- ``configuration.root_module.module_calls``: the same module keys as the file's
  configuration snapshot manifest (``tfconfig/modules.json``) and, for Terraform 1.0.x
  (whose manifest records the source as written), the same ``source``.
- ``configuration``'s resources in each module and their provisioners' types, against
  the snapshot's files (``runplane.runner.plan_config``): policies read them.

Not checked (the plan file does not carry it, or the check cannot evaluate it)
-----------------------------------------------------------------------------
- The rest of ``configuration`` (``provider_config``, expressions, variables, outputs,
  version constraints): the file carries only the configuration's source files
  (``tfconfig/``), whose expressions this check does not evaluate. ``apply`` re-evaluates them, so
  provider configuration (e.g. a region or account), provisioners and values unknown
  at plan time are whatever those files say, not what the JSON says.
- ``format_version`` and ``schema_version``: they come from the engine and the provider
  schema, which the file does not hold.
- Sensitivity the JSON adds: the engine also marks attributes its provider schema calls
  sensitive, and the file does not hold the schema, so only "every path the file marks
  is marked in the JSON" is checked (a path below a null, unknown or scalar value,
  where the engine has nothing to mark, counts as marked). Marking more only hides
  values.
- Values are read without the provider schema. A hostile file can encode a value in a
  way no honest engine does but the engine still reads per its schema: a string as
  msgpack ``bin`` is refused everywhere except as the type of a dynamic value
  (``[type, value]``); in a list or tuple of strings that the schema types as such,
  a first element encoded that way (it must spell a cty type matching the second) is
  read as a dynamic wrapper, so that element is not shown. Numbers encoded as strings
  compare by value with JSON numbers. A JSON document parsed with floats (the
  runner's) is compared at float precision for non-integers; integers compare exactly.
- Fields later versions add (``checks``, ``relevant_attributes``, ``importing``,
  ``generated_config``, ``timestamp``, ``errored``, identities), and what the 1.0 JSON
  does not show at all: the plan's backend, provider hashes, mode, ``target_addrs`` and
  ``force_replace_addrs``. The last three are read by :func:`read_plan`, and the runner
  checks them against the run's options (``runplane.runner.plan_options``).

Limits
------
Members are read from the zip's central directory with their declared sizes, at most
200 MiB inflated each (inflating stops one byte past the declared size: zip bombs are
refused), and checked against their CRC. Archives Go's zip reader (the engine's) and
Python's could read differently are refused: a trailing comment, bytes before the
archive or between its central directory and its end record (zip64 among them), more
than 100,000 entries, a member named twice, a local header naming another file.
Protobuf: varints of at most 10 bytes, lengths within the message, no groups, no
repeated singular fields. Msgpack: nesting of at most 100, element counts within the
bytes left, at most 5 million values per plan file.

Messages name sections, addresses, attribute paths and actions, never values.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

MAX_MEMBER_BYTES: Final = 200 * 1024 * 1024
"""The largest uncompressed ``tfplan``, ``tfstate`` or ``tfstate-prev`` read."""
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
MAX_ARCHIVE_ENTRIES: Final = 100_000
MAX_DEPTH: Final = 100
"""The deepest nesting of values, types, modules and paths read or compared."""
MAX_VALUES: Final = 5_000_000
"""The most values (scalars and containers) decoded from one plan file."""
MAX_NUMBER_TEXT: Final = 10_000
MAX_UNKNOWN_REFINEMENTS: Final = 1024  # what cty itself accepts

PLAN_FORMAT_VERSION: Final = 3


class PlanFileError(Exception):
    """The plan file cannot be read as a saved plan (the message is a human sentence)."""


class PlanMismatch(Exception):
    """The plan JSON does not describe the plan file (the message names the first
    difference by section, address, attribute path and actions, never by value)."""


class _Unknown:
    """A value the plan leaves unknown until apply."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()


# -- the saved plan ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AttributeStep:
    name: str


@dataclass(frozen=True)
class IndexStep:
    key: Any


PathStep = AttributeStep | IndexStep
Path = tuple[PathStep, ...]


@dataclass(frozen=True)
class Change:
    """A planned change of one object. ``before``/``after`` are decoded values (``None``
    for null and where the action has no such value; :data:`UNKNOWN` where unknown):
    str, bool, int, Decimal, list, dict."""

    actions: tuple[str, ...]
    before: Any = None
    after: Any = None
    before_sensitive: tuple[Path, ...] = ()
    after_sensitive: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ResourceChange:
    address: str
    module_address: str
    mode: str
    type: str
    name: str
    index: int | str | None
    deposed: str
    provider_name: str
    change: Change
    action_reason: str = ""
    previous_address: str = ""
    replace_paths: tuple[Path, ...] = ()


@dataclass(frozen=True)
class OutputChange:
    name: str
    sensitive: bool
    change: Change


@dataclass(frozen=True)
class StateObject:
    """One object of the plan's prior state (``tfstate``): current or deposed."""

    address: str
    module_address: str
    mode: str
    type: str
    name: str
    index: int | str | None
    deposed: str
    provider_name: str
    values: Any
    sensitive: tuple[Path, ...]
    tainted: bool


@dataclass(frozen=True)
class StateOutput:
    value: Any
    sensitive: bool


@dataclass(frozen=True)
class SavedPlan:
    terraform_version: str
    ui_mode: str
    variables: Mapping[str, Any]
    resource_changes: tuple[ResourceChange, ...]
    resource_drift: tuple[ResourceChange, ...]
    output_changes: tuple[OutputChange, ...]
    target_addrs: tuple[str, ...]
    force_replace_addrs: tuple[str, ...]
    prior_state: tuple[StateObject, ...]
    prior_outputs: Mapping[str, StateOutput]
    module_sources: Mapping[str, str]
    """Module key (``a.b``) to source, from the configuration snapshot's manifest."""


# -- the archive -------------------------------------------------------------------------------

_EOCD = struct.Struct("<IHHHHIIH")
_EOCD_SIGNATURE: Final = 0x06054B50
_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_SIGNATURE: Final = 0x04034B50


def _check_archive_layout(archive: bytes) -> None:
    """Refuse what Go's zip reader (the engine's) and Python's could read differently:
    a trailing comment, bytes before the archive, zip64, or too many entries."""
    if len(archive) < _EOCD.size:
        raise PlanFileError("the plan file is not a zip archive")
    signature, disk, cd_disk, _, entries, cd_size, cd_offset, comment = _EOCD.unpack_from(
        archive, len(archive) - _EOCD.size
    )
    if signature != _EOCD_SIGNATURE:
        raise PlanFileError("the plan file is not a zip archive (or it ends with a comment)")
    if disk or cd_disk or comment:
        raise PlanFileError("the plan file is a zip archive of a kind the engine does not write")
    if entries > MAX_ARCHIVE_ENTRIES:
        raise PlanFileError("the plan file's archive has too many entries")
    if cd_offset + cd_size != len(archive) - _EOCD.size:
        raise PlanFileError("the plan file's archive has bytes outside its entries")


def _open_archive(archive: bytes) -> zipfile.ZipFile:
    _check_archive_layout(archive)
    try:
        return zipfile.ZipFile(io.BytesIO(archive))
    except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError, OSError) as error:
        raise PlanFileError(f"the plan file is not a readable zip archive ({error})") from None


def _entry(zf: zipfile.ZipFile, name: str) -> zipfile.ZipInfo | None:
    found = [info for info in zf.infolist() if info.orig_filename == name]
    if len(found) > 1:
        raise PlanFileError(f"the plan file's archive holds {name} twice")
    return found[0] if found else None


def _member(archive: bytes, zf: zipfile.ZipFile, name: str, limit: int) -> bytes | None:
    """The member's bytes, inflated under ``limit`` and checked against its declared
    size and CRC, or None if the archive has no such member."""
    info = _entry(zf, name)
    if info is None:
        return None
    if info.file_size > limit:
        raise PlanFileError(f"the plan file's {name} is larger than the check reads")
    data = _compressed_data(archive, info, name)
    if info.compress_type == zipfile.ZIP_STORED:
        content = data
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        content = _inflate(data, info.file_size, name)
    else:
        raise PlanFileError(f"the plan file's {name} uses a compression the engine does not")
    if len(content) != info.file_size or zlib.crc32(content) != info.CRC:
        raise PlanFileError(f"the plan file's {name} does not match its size or checksum")
    return content


def _compressed_data(archive: bytes, info: zipfile.ZipInfo, name: str) -> bytes:
    offset = info.header_offset
    if offset + _LOCAL_HEADER.size > len(archive):
        raise PlanFileError(f"the plan file's {name} entry is truncated")
    fields = _LOCAL_HEADER.unpack_from(archive, offset)
    signature, flags, name_length, extra_length = fields[0], fields[2], fields[9], fields[10]
    if signature != _LOCAL_SIGNATURE or flags & 0x1:
        raise PlanFileError(f"the plan file's {name} entry is damaged or encrypted")
    start = offset + _LOCAL_HEADER.size
    if archive[start : start + name_length] != name.encode("ascii"):
        raise PlanFileError(f"the plan file's {name} entry names another file")
    start += name_length + extra_length
    end = start + info.compress_size
    if end > len(archive):
        raise PlanFileError(f"the plan file's {name} entry is truncated")
    return archive[start:end]


def _inflate(data: bytes, size: int, name: str) -> bytes:
    inflater = zlib.decompressobj(-15)
    try:
        content = inflater.decompress(data, size + 1)
    except zlib.error:
        raise PlanFileError(f"the plan file's {name} is not valid deflate data") from None
    if len(content) > size or not inflater.eof or inflater.unused_data:
        raise PlanFileError(f"the plan file's {name} inflates to other than its declared size")
    return content


# -- protobuf wire format ----------------------------------------------------------------------


class _Budget:
    """How many more values one plan file may decode into."""

    def __init__(self) -> None:
        self.left = MAX_VALUES

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise PlanFileError("the plan file holds more values than the check reads")


_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise PlanFileError("the plan file's tfplan is truncated")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift >= 70:
            raise PlanFileError("the plan file's tfplan has an overlong varint")
    if result >> 64:
        raise PlanFileError("the plan file's tfplan has a varint over 64 bits")
    return result, pos


class _Message:
    """One protobuf message's fields: number -> [(wire type, int or bytes)]. Unknown
    fields are kept and ignored; groups, truncation and bad lengths are refused."""

    def __init__(self, data: memoryview, what: str, budget: _Budget) -> None:
        self.what = what
        self._budget = budget
        self._fields: dict[int, list[tuple[int, int | memoryview]]] = {}
        pos = 0
        while pos < len(data):
            budget.spend()
            key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 0x7
            value, pos = self._read(data, pos, wire)
            if number == 0:
                raise PlanFileError(f"the plan file's {what} has a field numbered 0")
            self._fields.setdefault(number, []).append((wire, value))

    def _read(self, data: memoryview, pos: int, wire: int) -> tuple[int | memoryview, int]:
        if wire == _VARINT:
            return _varint(data, pos)
        width = {_I64: 8, _I32: 4}.get(wire)
        if width is not None:
            if pos + width > len(data):
                raise PlanFileError(f"the plan file's {self.what} is truncated")
            return int.from_bytes(data[pos : pos + width], "little"), pos + width
        if wire == _LEN:
            length, pos = _varint(data, pos)
            if length > len(data) - pos:
                raise PlanFileError(f"the plan file's {self.what} has a length past its end")
            return data[pos : pos + length], pos + length
        raise PlanFileError(f"the plan file's {self.what} uses a wire type it may not (groups)")

    def _values(self, number: int, wire: int) -> list[int | memoryview]:
        entries = self._fields.get(number, [])
        if any(found != wire for found, _ in entries):
            raise PlanFileError(f"the plan file's {self.what} field {number} has the wrong type")
        return [value for _, value in entries]

    def _single(self, number: int, wire: int) -> int | memoryview | None:
        values = self._values(number, wire)
        if len(values) > 1:
            # The engine would merge or override; an honest writer never repeats it.
            raise PlanFileError(f"the plan file's {self.what} repeats field {number}")
        return values[0] if values else None

    def has(self, number: int) -> bool:
        return number in self._fields

    def varint(self, number: int) -> int:
        value = self._single(number, _VARINT)
        return value if isinstance(value, int) else 0

    def signed(self, number: int) -> int:
        value = self.varint(number)
        return value - (1 << 64) if value >> 63 else value

    def bytes(self, number: int) -> memoryview:
        value = self._single(number, _LEN)
        return value if isinstance(value, memoryview) else memoryview(b"")

    def text(self, number: int) -> str:
        return _utf8(self.bytes(number), self.what)

    def message(self, number: int, what: str) -> _Message | None:
        value = self._single(number, _LEN)
        return _Message(value, what, self._budget) if isinstance(value, memoryview) else None

    def messages(self, number: int, what: str) -> list[_Message]:
        return [_Message(value, what, self._budget) for value in self._repeated_bytes(number)]

    def texts(self, number: int) -> list[str]:
        return [_utf8(value, self.what) for value in self._repeated_bytes(number)]

    def _repeated_bytes(self, number: int) -> list[memoryview]:
        return [value for value in self._values(number, _LEN) if isinstance(value, memoryview)]


def _utf8(data: memoryview, what: str) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise PlanFileError(f"the plan file's {what} has a string that is not UTF-8") from None


# -- cty types and msgpack values --------------------------------------------------------------

CtyType = str | tuple[str, Any]
_PRIMITIVES: Final = frozenset({"string", "number", "bool", "dynamic"})
_NUMBER_TEXT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


def _cty_type(raw: Any, depth: int = 0) -> CtyType:
    """A cty type from its JSON form (what wraps a dynamic value)."""
    if depth > MAX_DEPTH:
        raise PlanFileError("a value's type in the plan file is nested too deeply")
    if isinstance(raw, str) and raw in _PRIMITIVES:
        return raw
    if isinstance(raw, list) and len(raw) in (2, 3) and isinstance(raw[0], str):
        kind, inner = raw[0], raw[1]
        if kind in ("list", "set", "map") and len(raw) == 2:
            return (kind, _cty_type(inner, depth + 1))
        if kind == "tuple" and len(raw) == 2 and isinstance(inner, list):
            return (kind, tuple(_cty_type(item, depth + 1) for item in inner))
        if kind == "object" and isinstance(inner, dict):
            # A third element lists optional attributes: a constraint, not a value's type.
            return (kind, {name: _cty_type(item, depth + 1) for name, item in inner.items()})
    raise PlanFileError("a value in the plan file names a type the check does not know")


def parse_number(text: str) -> Decimal | None:
    """The exact number a cty number string spells, or None."""
    if len(text) > MAX_NUMBER_TEXT or not _NUMBER_TEXT.fullmatch(text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


_FIXED_WIDTH: Final = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
_LENGTH_WIDTH: Final = {
    0xC4: ("bin", 1),
    0xC5: ("bin", 2),
    0xC6: ("bin", 4),
    0xD9: ("str", 1),
    0xDA: ("str", 2),
    0xDB: ("str", 4),
    0xDC: ("array", 2),
    0xDD: ("array", 4),
    0xDE: ("map", 2),
    0xDF: ("map", 4),
    0xC7: ("ext", 1),
    0xC8: ("ext", 2),
    0xC9: ("ext", 4),
}
_FIXEXT: Final = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
_BIN_CODES: Final = frozenset({0xC4, 0xC5, 0xC6})


class _Msgpack:
    """cty's msgpack encoding, read with or without the value's type.

    Without a type (resource values: the file does not hold the provider schema) the
    value is read as its honest encoding means it; ``[bin type-json, value]`` is a
    dynamic value. With a type (outputs, variables, inside dynamic values) it is read
    as cty reads it. Any extension is an unknown value, as in cty.
    """

    def __init__(self, data: memoryview, budget: _Budget, what: str) -> None:
        self._data = data
        self._pos = 0
        self._budget = budget
        self._what = what

    def decode(self, ty: CtyType | None) -> Any:
        value = self._untyped(0) if ty is None else self._typed(ty, 0)
        if self._pos != len(self._data):
            raise self._error("has bytes after its value")
        return value

    def _error(self, problem: str) -> PlanFileError:
        return PlanFileError(f"a value of {self._what} in the plan file {problem}")

    def _take(self, count: int) -> memoryview:
        if count > len(self._data) - self._pos:
            raise self._error("is truncated")
        chunk = self._data[self._pos : self._pos + count]
        self._pos += count
        return chunk

    def _uint(self, width: int) -> int:
        return int.from_bytes(self._take(width), "big")

    def _head(self) -> tuple[str, Any]:
        """The next item's kind and argument: a scalar's value, a string's bytes, a
        container's length, an extension's (type, payload)."""
        code = self._uint(1)
        if code <= 0x7F or code >= 0xE0:
            return "int", code if code <= 0x7F else code - 0x100
        if code <= 0x8F:
            return self._container("map", code & 0x0F)
        if code <= 0x9F:
            return self._container("array", code & 0x0F)
        if code <= 0xBF:
            return "str", self._take(code & 0x1F)
        return self._coded_head(code)

    def _coded_head(self, code: int) -> tuple[str, Any]:
        if code in (0xC0, 0xC2, 0xC3):
            return ("nil", None) if code == 0xC0 else ("bool", code == 0xC3)
        if code in _FIXED_WIDTH:
            raw = self._uint(_FIXED_WIDTH[code])
            width = _FIXED_WIDTH[code] * 8
            signed = code >= 0xD0 and raw >> (width - 1)
            return "int", raw - (1 << width) if signed else raw
        if code in (0xCA, 0xCB):
            fmt, width = (">f", 4) if code == 0xCA else (">d", 8)
            return "float", struct.unpack(fmt, self._take(width))[0]
        if code in _FIXEXT:
            ext_type = self._uint(1)
            return "ext", (ext_type, self._take(_FIXEXT[code]))
        if code in _LENGTH_WIDTH:
            kind, width = _LENGTH_WIDTH[code]
            length = self._uint(width)
            if kind == "ext":
                ext_type = self._uint(1)
                return "ext", (ext_type, self._take(length))
            if kind in ("array", "map"):
                return self._container(kind, length)
            return kind, self._take(length)
        raise self._error(f"uses msgpack code {code:#04x}, which cty never writes")

    def _container(self, kind: str, length: int) -> tuple[str, int]:
        # Every element takes at least one byte: a larger count is a lie.
        if length * (2 if kind == "map" else 1) > len(self._data) - self._pos:
            raise self._error("declares more elements than it holds")
        return kind, length

    def _enter(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self._error("is nested too deeply")
        self._budget.spend()

    def _unknown(self, extension: tuple[int, memoryview]) -> _Unknown:
        ext_type, payload = extension
        if len(payload) <= 1:
            return UNKNOWN
        if ext_type == 0x0C and len(payload) <= MAX_UNKNOWN_REFINEMENTS:
            return UNKNOWN  # an unknown value with refinements (cty 1.13+)
        raise self._error("holds a msgpack extension cty does not write")

    def _untyped(self, depth: int) -> Any:
        self._enter(depth)
        kind, arg = self._head()
        if kind == "array":
            if arg == 2 and self._pos < len(self._data) and self._data[self._pos] in _BIN_CODES:
                return self._dynamic_body(depth)
            return [self._untyped(depth + 1) for _ in range(arg)]
        if kind == "map":
            return self._map(arg, lambda: self._untyped(depth + 1))
        if kind == "bin":
            raise self._error("holds binary data outside a dynamic value's type")
        return self._scalar(kind, arg)

    def _scalar(self, kind: str, arg: Any) -> Any:
        if kind in ("nil", "bool", "int"):
            return arg
        if kind == "float":
            return self._float(arg)
        if kind == "str":
            return unicodedata.normalize("NFC", self._text(arg))  # as cty.StringVal does
        if kind == "ext":
            return self._unknown(arg)
        raise self._error(f"holds a {kind} where it may not")

    def _float(self, value: float) -> Decimal:
        if math.isnan(value):
            raise self._error("holds NaN, which cty cannot")
        return Decimal(value)  # exact

    def _text(self, data: memoryview) -> str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise self._error("holds a string that is not UTF-8") from None

    def _map(self, length: int, item: Callable[[], Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _ in range(length):
            kind, arg = self._head()
            if kind != "str":
                raise self._error("has a map key that is not a string")
            key = self._text(arg)
            if key in out:
                raise self._error("repeats a map key")
            out[key] = item()
        return out

    def _dynamic_body(self, depth: int) -> Any:
        """The rest of ``[type-json, value]``, after its array header."""
        kind, arg = self._head()
        if kind not in ("bin", "str"):
            raise self._error("has a dynamic value without its type")
        try:
            raw_type = json.loads(bytes(arg))
        except (ValueError, RecursionError):
            raise self._error("has a dynamic value whose type is not JSON") from None
        return self._typed(_cty_type(raw_type), depth + 1)

    def _typed(self, ty: CtyType, depth: int) -> Any:
        self._enter(depth)
        kind, arg = self._head()
        if kind == "ext":
            return self._unknown(arg)
        if ty == "dynamic":
            if kind == "nil":
                return None
            if kind != "array" or arg != 2:
                raise self._error("has a dynamic value that is not [type, value]")
            return self._dynamic_body(depth)
        if kind == "nil":
            return None
        if isinstance(ty, str):
            return self._typed_primitive(ty, kind, arg)
        return self._typed_collection(ty, kind, arg, depth)

    def _typed_primitive(self, ty: str, kind: str, arg: Any) -> Any:
        if ty == "string" and kind in ("str", "bin"):
            return unicodedata.normalize("NFC", self._text(arg))
        if ty == "bool" and kind == "bool":
            return arg
        if ty == "number" and kind in ("int", "float"):
            return arg if kind == "int" else self._float(arg)
        if ty == "number" and kind in ("str", "bin"):
            number = parse_number(self._text(arg))
            if number is None:
                raise self._error("has a number it cannot read")
            return number
        raise self._error(f"holds a {kind} where its type says {ty}")

    def _typed_collection(self, ty: tuple[str, Any], kind: str, arg: Any, depth: int) -> Any:
        name, inner = ty
        if name in ("list", "set") and kind == "array":
            return [self._typed(inner, depth + 1) for _ in range(arg)]
        if name == "tuple" and kind == "array" and arg == len(inner):
            return [self._typed(item, depth + 1) for item in inner]
        if name == "map" and kind == "map":
            return self._map(arg, lambda: self._typed(inner, depth + 1))
        if name == "object" and kind == "map" and arg == len(inner):
            return self._object(inner, arg, depth)
        raise self._error(f"holds a {kind} where its type says {name}")

    def _object(self, attributes: Mapping[str, CtyType], length: int, depth: int) -> Any:
        out: dict[str, Any] = {}
        for _ in range(length):
            kind, arg = self._head()
            key = self._text(arg) if kind in ("str", "bin") else None
            if key is None or key not in attributes or key in out:
                raise self._error("has an object attribute its type does not declare")
            out[key] = self._typed(attributes[key], depth + 1)
        return out


def _decode(raw: memoryview, ty: CtyType | None, budget: _Budget, what: str) -> Any:
    if not raw:
        raise PlanFileError(f"a value of {what} in the plan file is empty")
    return _Msgpack(raw, budget, what).decode(ty)


# -- addresses ---------------------------------------------------------------------------------

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_INTEGER_KEY: Final = re.compile(r"-?[0-9]+")


def _escape(char: str, *, go: bool) -> str:
    code = ord(char)
    # DEL too is \u007f: so Terraform 1.0.3 (built with Go 1.16) writes it in its
    # addresses, checked with the pinned engine.
    if go and code < 0x20:
        named = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r"}
        return named.get(code, f"\\x{code:02x}")
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def go_quoted(text: str) -> str:
    """``text`` as Go's ``%q`` quotes it (Terraform 1.0's instance keys)."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        else:
            out.append(_escape(char, go=True))
    return "".join(out) + '"'


def hcl_quoted(text: str) -> str:
    """``text`` as later engines quote instance keys (HCL's string syntax)."""
    out = ['"']
    for position, char in enumerate(text):
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
        if char in named:
            out.append(named[char])
        elif char in "$%" and text[position + 1 : position + 2] == "{":
            out.append(char + char)
        elif char.isprintable():
            out.append(char)
        else:
            out.append(_escape(char, go=False))
    return "".join(out) + '"'


def _key_text(index: int | str | None, quote: Callable[[str], str]) -> str:
    if index is None:
        return ""
    return f"[{index}]" if isinstance(index, int) else f"[{quote(index)}]"


def resource_address(
    module_address: str, mode: str, type_: str, name: str, index: int | str | None
) -> str:
    """A resource instance's address as Terraform 1.0 spells it."""
    resource = ("data." if mode == "data" else "") + f"{type_}.{name}"
    resource += _key_text(index, go_quoted)
    return f"{module_address}.{resource}" if module_address else resource


@dataclass(frozen=True)
class AddressParts:
    module_address: str
    mode: str
    type: str
    name: str
    index: int | str | None


class _AddressReader:
    """Reads an address as later engines spell it: ``module.a["k"].data.t.n[0]``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> AddressParts:
        module_end = 0
        while self.text.startswith("module.", self.pos):
            self.pos += len("module.")
            self._identifier()
            self._optional_key()
            module_end = self.pos
            self._expect(".")
        mode = "managed"
        if self.text.startswith("data.", self.pos):
            mode, self.pos = "data", self.pos + len("data.")
        type_ = self._identifier()
        self._expect(".")
        name = self._identifier()
        index = self._optional_key()
        if self.pos != len(self.text):
            raise ValueError("trailing text")
        return AddressParts(self.text[:module_end], mode, type_, name, index)

    def respell(self, quote: Callable[[str], str]) -> str:
        """The address with each key read and written again (``quote`` for strings)."""
        out: list[str] = []
        while self.pos < len(self.text):
            if self.text.startswith("[", self.pos):
                out.append(_key_text(self._optional_key(), quote))
            else:
                out.append(self.text[self.pos])
                self.pos += 1
        return "".join(out)

    def _expect(self, text: str) -> None:
        if not self.text.startswith(text, self.pos):
            raise ValueError(f"expected {text}")
        self.pos += len(text)

    def _identifier(self) -> str:
        match = _IDENTIFIER.match(self.text, self.pos)
        if match is None:
            raise ValueError("expected a name")
        self.pos = match.end()
        return match.group()

    def _optional_key(self) -> int | str | None:
        if not self.text.startswith("[", self.pos):
            return None
        self.pos += 1
        digits = _INTEGER_KEY.match(self.text, self.pos)
        key: int | str
        if digits is not None:
            key, self.pos = int(digits.group()), digits.end()
        else:
            key = self._quoted()
        self._expect("]")
        return key

    def _quoted(self) -> str:
        self._expect('"')
        out: list[str] = []
        while self.pos < len(self.text) and self.text[self.pos] != '"':
            out.append(self._quoted_char())
        self._expect('"')
        return "".join(out)

    def _quoted_char(self) -> str:
        text, pos = self.text, self.pos
        if text.startswith(("$${", "%%{"), pos):
            self.pos += 2
            return text[pos]
        if text[pos] != "\\":
            self.pos += 1
            return text[pos]
        simple = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}
        escape = text[pos + 1 : pos + 2]
        if escape in simple:
            self.pos += 2
            return simple[escape]
        width = {"u": 4, "U": 8}.get(escape)
        hex_digits = text[pos + 2 : pos + 2 + width] if width else ""
        if not width or not re.fullmatch(r"[0-9a-fA-F]+", hex_digits) or len(hex_digits) != width:
            raise ValueError("bad escape")
        self.pos += 2 + width
        return chr(int(hex_digits, 16))


def parse_address(text: str) -> AddressParts:
    """A resource instance address as engines after 1.0 spell it, in parts."""
    try:
        return _AddressReader(text).parse()
    except (ValueError, IndexError):
        raise PlanFileError(
            f"the plan file holds an address it cannot read: {_shown(text)}"
        ) from None


def recorded_address(address: str, terraform_version: str) -> str:
    """A target or replacement address as a run's options spell it (HCL's syntax, see
    ``runplane.domain.run_options``) the way the engine of ``terraform_version`` records
    it in its saved plan: integer keys without leading zeros (``[007]`` is ``[7]``),
    string keys read as HCL reads them (``$${`` is ``${``) and quoted as the engine
    quotes its addresses (Terraform 1.0.x: Go's ``%q``; later engines: HCL's quoting).
    The rest (names, dots, ``module.``, ``data.``) is kept. Raises ``ValueError`` for a
    key it cannot read (the options' grammar never lets one through)."""
    quote = go_quoted if _version(terraform_version) < (1, 1) else hcl_quoted
    return _AddressReader(address).respell(quote)


def provider_name(config_address: str) -> str:
    """The provider's source address in a provider configuration's address
    (``module.a.provider["registry.terraform.io/ns/name"].alias``)."""
    marker = 'provider["'
    start = config_address.rfind(marker)
    end = config_address.find('"]', start + len(marker))
    rest = config_address[end + 2 :] if end >= 0 else "?"
    prefix = config_address[:start]
    if start < 0 or end < 0 or (prefix and not prefix.endswith(".")):
        raise PlanFileError("the plan file holds a provider address it cannot read")
    if rest and not re.fullmatch(r"\.[A-Za-z_][A-Za-z0-9_-]*", rest):
        raise PlanFileError("the plan file holds a provider address it cannot read")
    return config_address[start + len(marker) : end]


def _shown(text: object, limit: int = 200) -> str:
    """Text from either side, safe to put in a message: escaped and cut short."""
    value = text if isinstance(text, str) else repr(text)
    escaped = "".join(char if char.isprintable() else _escape(char, go=False) for char in value)
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


# -- reading the tfplan message ----------------------------------------------------------------

_ACTIONS: Final[Mapping[int, tuple[tuple[str, ...], int | None, int | None]]] = {
    # action -> (the JSON's actions, index of the before value, index of the after value)
    0: (("no-op",), 0, 0),
    1: (("create",), None, 0),
    2: (("read",), 0, 1),
    3: (("update",), 0, 1),
    5: (("delete",), 0, None),
    6: (("delete", "create"), 0, 1),
    7: (("create", "delete"), 0, 1),
    8: (("forget",), 0, None),
    10: (("forget", "create"), 0, 1),
}
_LEGACY_ACTIONS: Final = frozenset({0, 1, 2, 3, 5, 6, 7})
_REASONS: Final[Mapping[int, str]] = {
    0: "",
    1: "replace_because_tainted",
    2: "replace_by_request",
    3: "replace_because_cannot_update",
    4: "delete_because_no_resource_config",
    5: "delete_because_wrong_repetition",
    6: "delete_because_count_index",
    7: "delete_because_each_key",
    8: "delete_because_no_module",
    9: "replace_by_triggers",
    10: "read_because_config_unknown",
    11: "read_because_dependency_pending",
    12: "delete_because_no_move_target",
    13: "read_because_check_nested",
    14: "delete_because_enabled_false",
    15: "forgot_because_lifecycle_destroy_in_state",
    16: "forgot_because_lifecycle_destroy_in_config",
}
_LEGACY_MODULE_PATH: Final = re.compile(
    r'(?:module\.[A-Za-z_][A-Za-z0-9_-]*(?:\[(?:-?[0-9]+|"(?:[^"\\]|\\.)*")\])?'
    r"(?:\.(?=module\.)|$))*"
)
"""A module instance path as Terraform 1.0 spells it (``module.a["k"].module.b[0]``)."""
_UI_MODES: Final[Mapping[int, str]] = {0: "normal", 1: "destroy", 2: "refresh-only"}


class _PlanReader:
    def __init__(self, legacy: bool, budget: _Budget) -> None:
        self.legacy = legacy
        self.budget = budget

    def value(self, holder: _Message, number: int, ty: CtyType | None, what: str) -> Any:
        dynamic = holder.message(number, what)
        raw = dynamic.bytes(1) if dynamic is not None else memoryview(b"")
        return _decode(raw, ty, self.budget, what)

    def change(self, message: _Message | None, ty: CtyType | None, what: str) -> Change:
        if message is None:
            raise PlanFileError(f"the plan file's change of {what} is absent")
        code = message.varint(1)
        if code not in _ACTIONS or (self.legacy and code not in _LEGACY_ACTIONS):
            raise PlanFileError(f"the plan file's change of {what} has an unknown action")
        actions, before_at, after_at = _ACTIONS[code]
        raw_values = message.messages(2, f"a value of {what}")
        expected = 1 + max(at for at in (before_at, after_at) if at is not None)
        if len(raw_values) != expected:
            raise PlanFileError(f"the plan file's change of {what} has {len(raw_values)} values")
        values = [_decode(raw.bytes(1), ty, self.budget, what) for raw in raw_values]
        return Change(
            actions=actions,
            before=values[before_at] if before_at is not None else None,
            after=values[after_at] if after_at is not None else None,
            before_sensitive=self.paths(message.messages(3, what)),
            after_sensitive=self.paths(message.messages(4, what)),
        )

    def paths(self, messages: Sequence[_Message]) -> tuple[Path, ...]:
        return tuple(self.path(message) for message in messages)

    def path(self, message: _Message) -> Path:
        steps = message.messages(1, "a path step")
        if len(steps) > MAX_DEPTH:
            raise PlanFileError("the plan file holds a path that is too long")
        return tuple(self.step(step) for step in steps)

    def step(self, step: _Message) -> PathStep:
        if step.has(1) == step.has(2):
            raise PlanFileError("the plan file holds a path step that is not one selector")
        if step.has(1):
            return AttributeStep(step.text(1))
        return IndexStep(self.value(step, 2, None, "a path step"))

    def resource_change(self, message: _Message) -> ResourceChange:
        parts = self.legacy_address(message) if self.legacy else self.address(message)
        address = parts[0]
        deposed = message.text(7)
        if self.legacy and deposed and len(deposed) != 8:
            raise PlanFileError(
                f"the plan file's change of {_shown(address)} has a bad deposed key"
            )
        reason = message.varint(12)
        if reason not in _REASONS:
            raise PlanFileError(
                f"the plan file's change of {_shown(address)} has an unknown reason"
            )
        parsed = parts[1]
        return ResourceChange(
            address=address,
            module_address=parsed.module_address,
            mode=parsed.mode,
            type=parsed.type,
            name=parsed.name,
            index=parsed.index,
            deposed=deposed,
            provider_name=provider_name(message.text(8)),
            change=self.change(message.message(9, "a change"), None, _shown(address)),
            action_reason=_REASONS[reason],
            previous_address="" if self.legacy else message.text(14),
            replace_paths=self.paths(message.messages(11, "a replace path")),
        )

    def legacy_address(self, message: _Message) -> tuple[str, AddressParts]:
        """Terraform 1.0's address in parts: module path, mode, type, name, key."""
        mode = {0: "managed", 1: "data"}.get(message.varint(2))
        if mode is None:
            raise PlanFileError("the plan file holds a resource change of an unknown mode")
        if message.has(5) and message.has(6):
            raise PlanFileError("the plan file holds a resource change with two keys")
        index: int | str | None = None
        if message.has(5):
            index = message.text(5)
        elif message.has(6):
            index = message.signed(6)
        parsed = AddressParts(message.text(1), mode, message.text(3), message.text(4), index)
        names_ok = _IDENTIFIER.fullmatch(parsed.type) and _IDENTIFIER.fullmatch(parsed.name)
        if not names_ok or not _LEGACY_MODULE_PATH.fullmatch(parsed.module_address):
            raise PlanFileError("the plan file holds a resource change with a bad address")
        address = resource_address(*_fields_of(parsed))
        return address, parsed

    def address(self, message: _Message) -> tuple[str, AddressParts]:
        address = message.text(13)
        return address, parse_address(address)

    def output_change(self, message: _Message) -> OutputChange:
        name = message.text(1)
        change = self.change(message.message(2, "an output change"), "dynamic", f"output {name}")
        return OutputChange(name=name, sensitive=bool(message.varint(3)), change=change)

    def variables(self, plan: _Message) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for entry in plan.messages(2, "a variable"):
            name = entry.text(1)
            if name in out:
                raise PlanFileError("the plan file sets a variable twice")
            out[name] = self.value(entry, 2, "dynamic", f"variable {name}")
        return out


def _fields_of(parsed: AddressParts) -> tuple[str, str, str, str, int | str | None]:
    return parsed.module_address, parsed.mode, parsed.type, parsed.name, parsed.index


def _version(text: str) -> tuple[int, int]:
    match = re.match(r"([0-9]+)\.([0-9]+)\.[0-9]+", text)
    if match is None:
        raise PlanFileError("the plan file names an engine version the check cannot read")
    return int(match.group(1)), int(match.group(2))


# -- states (tfstate, tfstate-prev) ------------------------------------------------------------


def _json_member(raw: bytes, what: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(raw, parse_float=Decimal, parse_constant=refuse)
    except (ValueError, RecursionError):
        raise PlanFileError(f"the plan file's {what} is not JSON the engine writes") from None


def _state_path(raw: Any) -> Path:
    if not isinstance(raw, list) or len(raw) > MAX_DEPTH:
        raise PlanFileError("the plan file's state holds a sensitive path it cannot read")
    steps: list[PathStep] = []
    for step in raw:
        kind = step.get("type") if isinstance(step, dict) else None
        value = step.get("value") if isinstance(step, dict) else None
        if kind == "get_attr" and isinstance(value, str):
            steps.append(AttributeStep(value))
        elif kind == "index" and isinstance(value, dict) and "value" in value:
            steps.append(IndexStep(value["value"]))
        else:
            raise PlanFileError("the plan file's state holds a sensitive path it cannot read")
    return tuple(steps)


def _state_objects(document: Any, what: str) -> tuple[list[StateObject], dict[str, StateOutput]]:
    if not isinstance(document, dict) or document.get("version") != 4:
        raise PlanFileError(f"the plan file's {what} is not a version 4 state")
    resources = document.get("resources") or []
    outputs = document.get("outputs") or {}
    if not isinstance(resources, list) or not isinstance(outputs, dict):
        raise PlanFileError(f"the plan file's {what} is not a state the engine writes")
    objects = [obj for resource in resources for obj in _resource_objects(resource, what)]
    return objects, {name: _state_output(output, what) for name, output in outputs.items()}


def _state_output(output: Any, what: str) -> StateOutput:
    if not isinstance(output, dict) or "value" not in output:
        raise PlanFileError(f"the plan file's {what} holds an output it cannot read")
    return StateOutput(output["value"], output.get("sensitive") is True)


def _resource_objects(resource: Any, what: str) -> Iterator[StateObject]:
    if not isinstance(resource, dict) or not isinstance(resource.get("instances"), list):
        raise PlanFileError(f"the plan file's {what} holds a resource it cannot read")
    texts = [resource.get(name, "") for name in ("module", "mode", "type", "name", "provider")]
    module, mode, type_, name, provider = (text if isinstance(text, str) else "" for text in texts)
    if mode not in ("managed", "data") or not (type_ and name and provider):
        raise PlanFileError(f"the plan file's {what} holds a resource it cannot read")
    for instance in resource["instances"]:
        yield _state_object(instance, (module, mode, type_, name), provider_name(provider), what)


def _state_object(
    instance: Any, resource: tuple[str, str, str, str], provider: str, what: str
) -> StateObject:
    if not isinstance(instance, dict) or "attributes" not in instance:
        raise PlanFileError(f"the plan file's {what} holds an object it cannot read")
    index = instance.get("index_key")
    deposed = instance.get("deposed", "")
    if isinstance(index, bool) or not isinstance(index, int | str | None):
        raise PlanFileError(f"the plan file's {what} holds an instance key it cannot read")
    if not isinstance(deposed, str):
        raise PlanFileError(f"the plan file's {what} holds a deposed key it cannot read")
    module, mode, type_, name = resource
    sensitive = instance.get("sensitive_attributes") or []
    return StateObject(
        address=resource_address(module, mode, type_, name, index),
        module_address=module,
        mode=mode,
        type=type_,
        name=name,
        index=index,
        deposed=deposed,
        provider_name=provider,
        values=instance["attributes"],
        sensitive=tuple(_state_path(path) for path in _list_of(sensitive, what)),
        tainted=instance.get("status") == "tainted",
    )


def _list_of(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise PlanFileError(f"the plan file's {what} holds a list it cannot read")
    return value


def _path_key(path: Path) -> str:
    steps = [
        ["a", step.name] if isinstance(step, AttributeStep) else ["i", step.key] for step in path
    ]
    return json.dumps(steps, default=str, sort_keys=True)


def _legacy_drift(
    previous: Sequence[StateObject], prior: Sequence[StateObject]
) -> tuple[ResourceChange, ...]:
    """Drift as Terraform 1.0 shows it: managed objects of the previous run's state
    whose refreshed value (or sensitivity) differs, as updates, or that are gone, as
    deletes."""
    current = {obj.address: obj for obj in prior if not obj.deposed and obj.mode == "managed"}
    drift = []
    for old in previous:
        if old.deposed or old.mode != "managed":
            continue
        new = current.get(old.address)
        if new is not None and same_value(old.values, new.values) and _same_paths(old, new):
            continue
        change = Change(
            actions=("update",) if new is not None else ("delete",),
            before=old.values,
            after=new.values if new is not None else None,
            before_sensitive=old.sensitive,
            after_sensitive=new.sensitive if new is not None else (),
        )
        drift.append(_drift_change(old, change))
    return tuple(drift)


def _same_paths(old: StateObject, new: StateObject) -> bool:
    return sorted(map(_path_key, old.sensitive)) == sorted(map(_path_key, new.sensitive))


def _drift_change(old: StateObject, change: Change) -> ResourceChange:
    return ResourceChange(
        address=old.address,
        module_address=old.module_address,
        mode=old.mode,
        type=old.type,
        name=old.name,
        index=old.index,
        deposed="",
        provider_name=old.provider_name,
        change=change,
    )


def same_value(left: Any, right: Any, depth: int = 0) -> bool:
    """Whether two decoded values are equal (numbers by value, booleans apart)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(left, bool) or isinstance(right, bool) or left is None or right is None:
        return left is right
    if isinstance(left, int | Decimal) and isinstance(right, int | Decimal):
        return Decimal(left) == Decimal(right)
    if isinstance(left, list) and isinstance(right, list):
        pairs = zip(left, right, strict=False)
        return len(left) == len(right) and all(same_value(a, b, depth + 1) for a, b in pairs)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            same_value(item, right[key], depth + 1) for key, item in left.items()
        )
    return type(left) is type(right) and bool(left == right)


# -- read_plan ---------------------------------------------------------------------------------


def read_plan(plan: bytes) -> SavedPlan:
    """The saved plan in ``plan`` (the bytes of a ``plan -out`` file)."""
    zf = _open_archive(plan)
    with zf:
        tfplan = _member(plan, zf, "tfplan", MAX_MEMBER_BYTES)
        if tfplan is None:
            raise PlanFileError("the plan file has no tfplan: it is not a saved plan")
        budget = _Budget()
        message = _Message(memoryview(tfplan), "tfplan", budget)
        if message.varint(1) != PLAN_FORMAT_VERSION:
            raise PlanFileError("the plan file is not in plan format 3")
        version = message.text(14)
        legacy = _version(version) < (1, 1)
        states = {
            name: _member(plan, zf, name, MAX_MEMBER_BYTES) for name in ("tfstate", "tfstate-prev")
        }
        manifest = _member(plan, zf, "tfconfig/modules.json", MAX_MANIFEST_BYTES)
    return _saved_plan(message, _PlanReader(legacy, budget), states, manifest)


def _saved_plan(
    message: _Message,
    reader: _PlanReader,
    states: Mapping[str, bytes | None],
    manifest: bytes | None,
) -> SavedPlan:
    prior, prior_outputs = _state("tfstate", states["tfstate"])
    changes = tuple(map(reader.resource_change, message.messages(3, "a resource change")))
    if reader.legacy:
        previous, _ = _state("tfstate-prev", states["tfstate-prev"])
        drift = _legacy_drift(previous, prior)
    else:
        drift = tuple(map(reader.resource_change, message.messages(18, "a drifted resource")))
    ui_mode = _UI_MODES.get(message.varint(17))
    if ui_mode is None:
        raise PlanFileError("the plan file has an unknown plan mode")
    return SavedPlan(
        terraform_version=message.text(14),
        ui_mode=ui_mode,
        variables=reader.variables(message),
        resource_changes=changes,
        resource_drift=drift,
        output_changes=tuple(map(reader.output_change, message.messages(4, "an output change"))),
        target_addrs=tuple(message.texts(5)),
        force_replace_addrs=tuple(message.texts(16)),
        prior_state=tuple(prior),
        prior_outputs=prior_outputs,
        module_sources=_module_sources(manifest),
    )


def _state(name: str, raw: bytes | None) -> tuple[list[StateObject], dict[str, StateOutput]]:
    if raw is None:
        raise PlanFileError(f"the plan file has no {name}")
    return _state_objects(_json_member(raw, name), name)


def _module_sources(manifest: bytes | None) -> dict[str, str]:
    if manifest is None:
        raise PlanFileError("the plan file has no configuration snapshot manifest")
    records = _json_member(manifest, "tfconfig/modules.json")
    sources: dict[str, str] = {}
    for record in _list_of(records, "tfconfig/modules.json"):
        key = record.get("Key") if isinstance(record, dict) else None
        source = record.get("Source", "") if isinstance(record, dict) else None
        if not isinstance(key, str) or not isinstance(source, str) or key in sources:
            raise PlanFileError("the plan file's configuration manifest cannot be read")
        sources[key] = source
    sources.pop("", None)  # the root module
    return sources


# -- comparing values --------------------------------------------------------------------------

JsonPath = tuple[str | int, ...]


def _number_matches(shown: Any, number: int | Decimal) -> bool:
    if isinstance(shown, bool) or not isinstance(shown, int | float | Decimal):
        return False
    if isinstance(shown, float):
        # The reader of this JSON sees the float: compare at its precision.
        return math.isfinite(shown) and float(Decimal(number)) == shown
    return Decimal(shown) == Decimal(number)


def value_difference(shown: Any, planned: Any, depth: int = 0) -> JsonPath | None:
    """Where the JSON value ``shown`` first differs from the file's ``planned`` value
    (``()`` for the value itself), or None. Unknown values must be left out of objects
    and be null or left out in arrays, as the engine writes them."""
    if depth > MAX_DEPTH:
        return ()
    if planned is UNKNOWN or planned is None:
        return None if shown is None else ()
    if isinstance(planned, bool):
        return None if shown is planned else ()
    if isinstance(planned, int | Decimal):
        return None if _number_matches(shown, planned) else ()
    if isinstance(planned, str):
        if isinstance(shown, str):
            return None if shown == planned else ()
        number = parse_number(planned)  # without the schema a number may be a string
        return None if number is not None and _number_matches(shown, number) else ()
    if isinstance(planned, list):
        return _list_difference(shown, planned, depth)
    if isinstance(planned, dict):
        return _dict_difference(shown, planned, depth)
    return ()


def _list_difference(shown: Any, planned: list[Any], depth: int) -> JsonPath | None:
    if not isinstance(shown, list):
        return ()
    known = [item for item in planned if item is not UNKNOWN]
    if len(shown) == len(planned):
        pairs = list(zip(shown, planned, strict=True))
    elif len(shown) == len(known):
        pairs = list(zip(shown, known, strict=True))  # sets and tuples drop unknowns
    else:
        return ()
    for position, (item, expected) in enumerate(pairs):
        difference = value_difference(item, expected, depth + 1)
        if difference is not None:
            return (position, *difference)
    return None


def _dict_difference(shown: Any, planned: dict[str, Any], depth: int) -> JsonPath | None:
    if not isinstance(shown, Mapping):
        return ()
    expected = {key for key, item in planned.items() if item is not UNKNOWN}
    unmatched = set(shown) ^ expected
    if unmatched:
        return (min(unmatched, key=str),)
    for key in sorted(expected):
        difference = value_difference(shown[key], planned[key], depth + 1)
        if difference is not None:
            return (key, *difference)
    return None


def _unknown_paths(value: Any, path: JsonPath, out: set[JsonPath], depth: int = 0) -> None:
    if value is UNKNOWN:
        out.add(path)
    elif depth > MAX_DEPTH:
        raise PlanFileError("a value in the plan file is nested too deeply")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _unknown_paths(item, (*path, position), out, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _unknown_paths(item, (*path, key), out, depth + 1)


def has_unknown(value: Any) -> bool:
    found: set[JsonPath] = set()
    _unknown_paths(value, (), found)
    return bool(found)


def _marked_paths(
    marks: Any, path: JsonPath, out: set[JsonPath], where: str, depth: int = 0
) -> None:
    """The paths a JSON bool structure (``after_unknown`` and the like) marks true."""
    if marks is True:
        out.add(path)
    elif depth > MAX_DEPTH:
        raise PlanMismatch(f"{where} is nested too deeply")
    elif isinstance(marks, list):
        for position, item in enumerate(marks):
            _marked_paths(item, (*path, position), out, where, depth + 1)
    elif isinstance(marks, Mapping):
        for key, item in marks.items():
            _marked_paths(item, (*path, key), out, where, depth + 1)
    elif marks not in (False, None):
        raise PlanMismatch(f"{where} is not a structure of booleans")


def _first_uncovered(marks: Any, value: Any, paths: Sequence[Path]) -> Path | None:
    """The first of the file's sensitive ``paths`` the JSON ``marks`` leave unmarked."""
    for path in paths:
        if not _covered(marks, value, path):
            return path
    return None


def _covered(marks: Any, value: Any, path: Path) -> bool:
    for step in path:
        if marks is True:
            return True
        if not isinstance(value, list | dict):
            # Below a null, unknown or scalar the engine has nothing to mark.
            return True
        position = _position(value, step)
        if position is None:
            return False
        if isinstance(marks, Mapping) and isinstance(value, dict) and isinstance(position, str):
            marks, value = marks.get(position, False), value[position]
        elif isinstance(marks, list) and isinstance(value, list) and isinstance(position, int):
            marks = marks[position] if position < len(marks) else False
            value = value[position]
        else:
            return False
    return marks is True


def _position(value: list[Any] | dict[str, Any], step: PathStep) -> str | int | None:
    key = step.name if isinstance(step, AttributeStep) else step.key
    if isinstance(value, dict):
        return key if isinstance(key, str) and key in value else None
    if isinstance(key, int) and not isinstance(key, bool):
        return key if 0 <= key < len(value) else None
    # A set element is addressed by its value; its place is where that value is.
    return next((at for at, item in enumerate(value) if same_value(item, key)), None)


def _path_text(path: Sequence[Any]) -> str:
    """A path for a message: names and positions only, other keys elided."""
    out = []
    for step in path[:20]:
        key = step.name if isinstance(step, AttributeStep) else step
        key = key.key if isinstance(key, IndexStep) else key
        if isinstance(key, int) and not isinstance(key, bool):
            out.append(f"[{key}]")
        elif isinstance(key, str) and _IDENTIFIER.fullmatch(key) and len(key) <= 64:
            out.append(f".{key}")
        else:
            out.append("[…]")
    return "".join(out) + ("…" if len(path) > 20 else "")


def _json_path(path: Path) -> list[Any]:
    return [step.name if isinstance(step, AttributeStep) else step.key for step in path]


def _canonical(value: Any) -> str:
    """One spelling per value, numbers by value (for comparing paths as sets)."""
    return json.dumps(_numbers_spelled(value), sort_keys=True)


def _numbers_spelled(item: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise PlanMismatch("replace_paths is nested too deeply")
    if isinstance(item, bool) or item is None or isinstance(item, str):
        return item
    if isinstance(item, int | float | Decimal):
        return {"#": str(Decimal(item).normalize()) if math.isfinite(item) else str(item)}
    if isinstance(item, list):
        return [_numbers_spelled(element, depth + 1) for element in item]
    if isinstance(item, Mapping):
        return {str(key): _numbers_spelled(element, depth + 1) for key, element in item.items()}
    return repr(item)


# -- reading the JSON side ---------------------------------------------------------------------


def _mapping(value: Any, where: str, *, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise PlanMismatch(f"{where} is not an object")
    return value


def _entries(value: Any, where: str) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise PlanMismatch(f"{where} is not a list of objects")
    return value


def _actions_of(change: Mapping[str, Any]) -> tuple[str, ...] | None:
    actions = change.get("actions")
    if not isinstance(actions, list) or not all(isinstance(item, str) for item in actions):
        return None
    return tuple(actions)


_KNOWN_ACTIONS: Final = frozenset(actions for actions, _, _ in _ACTIONS.values())


def _actions_text(actions: tuple[str, ...] | None) -> str:
    if actions is None or actions not in _KNOWN_ACTIONS:
        return "unrecognised actions"
    return ", ".join(actions)


# -- check_plan_json ---------------------------------------------------------------------------


def check_plan_json(plan: bytes, document: Mapping[str, Any]) -> SavedPlan:
    """The saved plan in ``plan``, once ``document`` (its ``show -json``) is found to
    describe it: :class:`PlanMismatch` if it does not, :class:`PlanFileError` if ``plan``
    cannot be read as a saved plan. See the module's docstring for what is compared."""
    saved = read_plan(plan)
    if not isinstance(document, Mapping):
        raise PlanMismatch("the plan JSON is not an object")
    if document.get("terraform_version") != saved.terraform_version:
        raise PlanMismatch("terraform_version: the plan JSON names another engine version")
    _check_resource_changes(saved, document)
    _check_output_changes(saved, document)
    _check_planned_values(saved, document)
    _compare_changes("resource_drift", document.get("resource_drift"), saved.resource_drift)
    _check_prior_state(saved, document)
    _check_variables(saved, document)
    _check_module_calls(saved, document)
    # Policies read the configuration's resources and provisioners: see plan_config.
    from runplane.runner.plan_config import check_configuration

    check_configuration(plan, document)
    return saved


def _check_resource_changes(saved: SavedPlan, document: Mapping[str, Any]) -> None:
    # The engine leaves data sources' deletes (state clean-up) out of its JSON.
    shown = [
        change
        for change in saved.resource_changes
        if not (change.mode == "data" and change.change.actions == ("delete",))
    ]
    _compare_changes("resource_changes", document.get("resource_changes"), shown)


def _label(address: str, deposed: str, actions: tuple[str, ...] | None) -> str:
    deposed_text = f" (deposed {_shown(deposed)})" if deposed else ""
    return f"{_shown(address)}{deposed_text} ({_actions_text(actions)})"


def _compare_changes(section: str, raw: Any, expected: Sequence[ResourceChange]) -> None:
    by_key: dict[tuple[str, str], ResourceChange] = {}
    for change in expected:
        key = (change.address, change.deposed)
        if key in by_key:
            raise PlanFileError(f"the plan file holds two changes of {_shown(change.address)}")
        by_key[key] = change
    shown = _keyed_entries(section, raw)
    _same_keys(section, shown, by_key)
    for key, change in by_key.items():
        _compare_change(section, shown[key], change)


def _keyed_entries(section: str, raw: Any) -> dict[tuple[str, str], Mapping[str, Any]]:
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for entry in _entries(raw, section):
        address, deposed = entry.get("address"), entry.get("deposed", "")
        if not isinstance(address, str) or not isinstance(deposed, str):
            raise PlanMismatch(f"{section}: the plan JSON lists a change without an address")
        if (address, deposed) in out:
            raise PlanMismatch(f"{section}: the plan JSON lists {_shown(address)} twice")
        out[(address, deposed)] = entry
    return out


def _same_keys(
    section: str,
    shown: Mapping[tuple[str, str], Mapping[str, Any]],
    expected: Mapping[tuple[str, str], ResourceChange],
) -> None:
    extra = [key for key in shown if key not in expected]
    missing = [key for key in expected if key not in shown]
    if not extra and not missing:
        return
    shown_label = [
        _label(*key, _actions_of(_mapping(shown[key].get("change"), section))) for key in extra
    ]
    file_label = [_label(*key, expected[key].change.actions) for key in missing]
    if extra and missing:
        message = f"the plan JSON lists {shown_label[0]}, the plan file {file_label[0]}"
    elif extra:
        message = f"the plan JSON lists {shown_label[0]}, which the plan file does not hold"
    else:
        message = f"the plan file holds {file_label[0]}, which the plan JSON does not list"
    raise PlanMismatch(f"{section}: {message}")


_IDENTITY: Final = ("module_address", "mode", "type", "name", "provider_name")


def _compare_change(section: str, entry: Mapping[str, Any], expected: ResourceChange) -> None:
    where = f"{section}: {_shown(expected.address)}"
    change = _mapping(entry.get("change"), f"{where} change", optional=False)
    actions = _actions_of(change)
    if actions != expected.change.actions:
        raise PlanMismatch(
            f"{where} is {_actions_text(actions)} in the plan JSON, "
            f"{_actions_text(expected.change.actions)} in the plan file"
        )
    # Terraform 1.0 leaves the index out of drift (its address still carries it).
    _compare_identity(where, entry, expected, index_optional=section == "resource_drift")
    _compare_values(where, change, expected.change)
    replace = change.get("replace_paths")
    if section == "resource_changes" and _path_set(replace) != _path_set(
        [_json_path(path) for path in expected.replace_paths]
    ):
        raise PlanMismatch(f"{where} change.replace_paths differs from the plan file")


def _path_set(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PlanMismatch("replace_paths is not a list")
    return sorted(_canonical(path) for path in raw)


def _compare_identity(
    where: str, entry: Mapping[str, Any], expected: ResourceChange, *, index_optional: bool
) -> None:
    fields = {name: getattr(expected, name) for name in _IDENTITY}
    fields |= {
        "deposed": expected.deposed,
        "action_reason": expected.action_reason,
        "previous_address": expected.previous_address,
    }
    for name, value in fields.items():
        # The engine leaves out empty strings (the root module, no reason, ...).
        if entry.get(name, "") != value:
            raise PlanMismatch(f"{where} {name} differs from the plan file")
    if (not index_optional or "index" in entry) and not _same_index(
        entry.get("index"), expected.index
    ):
        raise PlanMismatch(f"{where} index differs from the plan file")


def _same_index(shown: Any, index: int | str | None) -> bool:
    if isinstance(shown, bool) or isinstance(index, bool):
        return False
    return type(shown) is type(index) and shown == index


def _compare_values(where: str, change: Mapping[str, Any], expected: Change) -> None:
    for side in ("before", "after"):
        difference = value_difference(change.get(side), getattr(expected, side))
        if difference is not None:
            raise PlanMismatch(
                f"{where} change.{side}{_path_text(difference)} differs from the plan file"
            )
    _compare_unknowns(f"{where} change.after_unknown", change.get("after_unknown"), expected.after)
    for side in ("before", "after"):
        marks_name = f"{side}_sensitive"
        paths = getattr(expected, marks_name)
        uncovered = _first_uncovered(change.get(marks_name), getattr(expected, side), paths)
        if uncovered is not None:
            raise PlanMismatch(
                f"{where} change.{marks_name} does not mark{_path_text(uncovered) or ' the value'}"
                ", which the plan file marks sensitive"
            )


def _compare_unknowns(where: str, marks: Any, planned: Any) -> None:
    shown: set[JsonPath] = set()
    _marked_paths(marks, (), shown, where)
    expected: set[JsonPath] = set()
    _unknown_paths(planned, (), expected)
    for path in sorted(shown ^ expected, key=repr):
        place = _path_text(path) or " the whole value"
        raise PlanMismatch(f"{where} differs from the plan file at{place}")


# -- outputs -----------------------------------------------------------------------------------


def _check_output_changes(saved: SavedPlan, document: Mapping[str, Any]) -> None:
    shown = _mapping(document.get("output_changes"), "output_changes")
    expected = {output.name: output for output in saved.output_changes}
    _same_names("output_changes", "output", shown, expected)
    for name, output in expected.items():
        where = f"output_changes: output {_shown(name)}"
        change = _mapping(shown[name], where, optional=False)
        actions = _actions_of(change)
        if actions != output.change.actions:
            raise PlanMismatch(
                f"{where} is {_actions_text(actions)} in the plan JSON, "
                f"{_actions_text(output.change.actions)} in the plan file"
            )
        _compare_output_values(where, change, output)


def _same_names(
    section: str, kind: str, shown: Mapping[str, Any], expected: Mapping[str, Any]
) -> None:
    extra = sorted(set(shown) - set(expected), key=str)
    missing = sorted(set(expected) - set(shown))
    if extra:
        raise PlanMismatch(
            f"{section}: the plan JSON lists {kind} {_shown(extra[0])}, "
            "which the plan file does not hold"
        )
    if missing:
        raise PlanMismatch(
            f"{section}: the plan file holds {kind} {_shown(missing[0])}, "
            "which the plan JSON does not list"
        )


def _compare_output_values(where: str, change: Mapping[str, Any], output: OutputChange) -> None:
    for flag in ("sensitive", "before_sensitive", "after_sensitive"):
        if (flag in change or flag != "sensitive") and (
            change.get(flag) is True
        ) != output.sensitive:
            raise PlanMismatch(f"{where} {flag} differs from the plan file")
    before = value_difference(change.get("before"), output.change.before)
    if before is not None:
        raise PlanMismatch(f"{where} before{_path_text(before)} differs from the plan file")
    after, unknown = output.change.after, has_unknown(output.change.after)
    # The engine leaves out an output's after value until it is wholly known.
    shown_after = change.get("after")
    if not (unknown and shown_after is None):
        difference = value_difference(shown_after, after)
        if difference is not None:
            raise PlanMismatch(f"{where} after{_path_text(difference)} differs from the plan file")
    if change.get("after_unknown") is True:
        if not unknown:
            raise PlanMismatch(f"{where} after_unknown differs from the plan file")
    else:
        _compare_unknowns(f"{where} after_unknown", change.get("after_unknown"), after)


# -- planned_values ----------------------------------------------------------------------------


def _modules(
    module: Mapping[str, Any], address: str, depth: int = 0
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each module of a ``planned_values``/``prior_state`` tree with its address."""
    if depth > MAX_DEPTH:
        raise PlanMismatch("the plan JSON's modules are nested too deeply")
    yield address, module
    for child in _entries(module.get("child_modules"), "child_modules"):
        child_address = child.get("address")
        if not isinstance(child_address, str) or not child_address.startswith(
            f"{address}." if address else "module."
        ):
            raise PlanMismatch(
                f"the plan JSON lists module {_shown(child_address)} "
                f"under {_shown(address or 'the root module')}"
            )
        yield from _modules(child, child_address, depth + 1)


def _module_resources(
    section: str, root: Mapping[str, Any], key: Callable[[Mapping[str, Any]], tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, Mapping[str, Any]]]:
    out: dict[tuple[str, str], tuple[str, Mapping[str, Any]]] = {}
    for module_address, module in _modules(root, ""):
        for resource in _entries(module.get("resources"), f"{section} resources"):
            resource_key = key(resource)
            if resource_key in out:
                raise PlanMismatch(
                    f"{section}: the plan JSON lists {_shown(resource_key[0])} twice"
                )
            out[resource_key] = (module_address, resource)
    return out


def _address_key(resource: Mapping[str, Any], deposed_field: str | None = None) -> tuple[str, str]:
    address = resource.get("address")
    deposed = resource.get(deposed_field, "") if deposed_field else ""
    if not isinstance(address, str) or not isinstance(deposed, str):
        raise PlanMismatch("the plan JSON lists a resource without an address")
    return address, deposed


def _check_planned_values(saved: SavedPlan, document: Mapping[str, Any]) -> None:
    section = "planned_values"
    planned = _mapping(document.get("planned_values"), section)
    expected = {
        (change.address, ""): change
        for change in saved.resource_changes
        if change.change.actions not in (("delete",), ("forget",)) and not change.deposed
    }
    root = _mapping(planned.get("root_module"), f"{section} root_module")
    shown = _module_resources(section, root, _address_key)
    _same_objects(section, shown, expected, ("plans", "plan"))
    for key, change in expected.items():
        module_address, resource = shown[key]
        where = f"{section}: {_shown(change.address)}"
        if module_address != change.module_address:
            raise PlanMismatch(f"{where} is listed under another module than in the plan file")
        _compare_object(where, resource, change, change.change.after, change.change.after_sensitive)
    _check_planned_outputs(saved, _mapping(planned.get("outputs"), f"{section} outputs"))


def _same_objects(
    section: str,
    shown: Mapping[tuple[str, str], Any],
    expected: Mapping[tuple[str, str], Any],
    verbs: tuple[str, str],
) -> None:
    """Both sides list the same objects; ``verbs`` say what the file does with them."""
    for key in shown:
        if key not in expected:
            raise PlanMismatch(
                f"{section}: the plan JSON lists {_label_key(key)}, "
                f"which the plan file does not {verbs[1]}"
            )
    for key in expected:
        if key not in shown:
            raise PlanMismatch(
                f"{section}: the plan file {verbs[0]} {_label_key(key)}, "
                "which the plan JSON does not list"
            )


def _label_key(key: tuple[str, str]) -> str:
    address, deposed = key
    return _shown(address) + (f" (deposed {_shown(deposed)})" if deposed else "")


def _compare_object(
    where: str,
    resource: Mapping[str, Any],
    expected: ResourceChange | StateObject,
    value: Any,
    sensitive: Sequence[Path],
) -> None:
    for name in ("mode", "type", "name", "provider_name"):
        if resource.get(name) != getattr(expected, name):
            raise PlanMismatch(f"{where} {name} differs from the plan file")
    if not _same_index(resource.get("index"), expected.index):
        raise PlanMismatch(f"{where} index differs from the plan file")
    # The engine writes the attributes of a non-null object (and leaves out "{}").
    shown = resource.get("values")
    if isinstance(value, dict) and shown is None:
        shown = {}
    elif not isinstance(value, dict) and shown == {}:
        shown = None
    difference = value_difference(shown, value)
    if difference is not None:
        raise PlanMismatch(f"{where} values{_path_text(difference)} differs from the plan file")
    uncovered = _first_uncovered(resource.get("sensitive_values"), value, sensitive)
    if uncovered is not None:
        raise PlanMismatch(
            f"{where} sensitive_values does not mark{_path_text(uncovered) or ' the value'}"
            ", which the plan file marks sensitive"
        )


def _check_planned_outputs(saved: SavedPlan, shown: Mapping[str, Any]) -> None:
    expected = {
        output.name: output
        for output in saved.output_changes
        if output.change.actions != ("delete",)
    }
    _same_names("planned_values outputs", "output", shown, expected)
    for name, output in expected.items():
        where = f"planned_values outputs: output {_shown(name)}"
        entry = _mapping(shown[name], where, optional=False)
        if entry.get("sensitive") is not output.sensitive:
            raise PlanMismatch(f"{where} sensitive differs from the plan file")
        value = output.change.after
        if has_unknown(value):
            if entry.get("value") is not None:
                raise PlanMismatch(f"{where} value is shown, but the plan file leaves it unknown")
            continue
        difference = value_difference(entry.get("value"), value)
        if difference is not None:
            raise PlanMismatch(f"{where} value{_path_text(difference)} differs from the plan file")


# -- prior_state, variables, module calls ------------------------------------------------------


def _check_prior_state(saved: SavedPlan, document: Mapping[str, Any]) -> None:
    section = "prior_state"
    prior = document.get("prior_state")
    if prior is None:
        if saved.prior_state or saved.prior_outputs:
            raise PlanMismatch(
                f"{section}: the plan JSON has none, the plan file's state is not empty"
            )
        return
    values = _mapping(_mapping(prior, section).get("values"), f"{section} values")
    root = _mapping(values.get("root_module"), f"{section} root_module")
    shown = _module_resources(section, root, lambda entry: _address_key(entry, "deposed_key"))
    expected = {(obj.address, obj.deposed): obj for obj in saved.prior_state}
    if len(expected) != len(saved.prior_state):
        raise PlanFileError("the plan file's state holds an object twice")
    _same_objects(section, shown, expected, ("holds", "hold"))
    for key, obj in expected.items():
        module_address, resource = shown[key]
        where = f"{section}: {_label_key(key)}"
        if module_address != obj.module_address:
            raise PlanMismatch(f"{where} is listed under another module than in the plan file")
        if (resource.get("tainted") is True) != obj.tainted:
            raise PlanMismatch(f"{where} tainted differs from the plan file")
        _compare_object(where, resource, obj, obj.values, obj.sensitive)
    _check_prior_outputs(saved, _mapping(values.get("outputs"), f"{section} outputs"))


def _check_prior_outputs(saved: SavedPlan, shown: Mapping[str, Any]) -> None:
    _same_names("prior_state outputs", "output", shown, saved.prior_outputs)
    for name, output in saved.prior_outputs.items():
        where = f"prior_state outputs: output {_shown(name)}"
        entry = _mapping(shown[name], where, optional=False)
        if (entry.get("sensitive") is True) != output.sensitive:
            raise PlanMismatch(f"{where} sensitive differs from the plan file")
        difference = value_difference(entry.get("value"), output.value)
        if difference is not None:
            raise PlanMismatch(f"{where} value{_path_text(difference)} differs from the plan file")


def _check_variables(saved: SavedPlan, document: Mapping[str, Any]) -> None:
    shown = _mapping(document.get("variables"), "variables")
    _same_names("variables", "variable", shown, saved.variables)
    for name, value in saved.variables.items():
        entry = _mapping(shown[name], f"variables: variable {_shown(name)}", optional=False)
        difference = value_difference(entry.get("value"), value)
        if difference is not None:
            raise PlanMismatch(
                f"variables: variable {_shown(name)} value{_path_text(difference)} "
                "differs from the plan file"
            )


def _module_calls(
    module: Mapping[str, Any], prefix: str, out: dict[str, Any], depth: int = 0
) -> None:
    if depth > MAX_DEPTH:
        raise PlanMismatch("configuration: module calls are nested too deeply")
    calls = _mapping(module.get("module_calls"), "configuration module_calls")
    for name, call in calls.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        body = _mapping(call, f"configuration: module call {_shown(key)}", optional=False)
        out[key] = body.get("source")
        _module_calls(_mapping(body.get("module"), "configuration module"), key, out, depth + 1)


def _check_module_calls(saved: SavedPlan, document: Mapping[str, Any]) -> None:
    configuration = _mapping(document.get("configuration"), "configuration")
    shown: dict[str, Any] = {}
    _module_calls(
        _mapping(configuration.get("root_module"), "configuration root_module"), "", shown
    )
    _same_names("configuration", "module call", shown, saved.module_sources)
    if _version(saved.terraform_version) >= (1, 1):
        return  # later manifests record the source normalised, not as written
    for key, source in saved.module_sources.items():
        if shown[key] != source:
            raise PlanMismatch(
                f"configuration: module call {_shown(key)} source differs from the plan file"
            )
