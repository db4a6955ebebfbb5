"""Extracting a configuration archive member by member, refusing anything unusual.

``tarfile``'s extraction filters are not relied on: several Python releases still
in use (3.11.7 among them) let crafted archives escape the target directory
through them (CVE-2025-4517). Instead each member is checked here and written by
this module: regular files and directories only, relative paths that stay inside
the tree, no member twice, and caps on entries, per-file and total bytes counted
while the bytes stream, so a small archive cannot expand without bound. Every
refusal is a :class:`~runplane.runner.refusal.Refused` naming the member.

Nothing extracted is executable, since the engine would run what it finds there:
members under a ``.terraform`` or ``terraform.d`` directory (the engine's working
directory and its implied local provider mirror, at any depth) are skipped and
reported, any other file named ``terraform-provider-*`` is refused, and files and
directories get modes 0644 and 0755 whatever the archive says.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import stat
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, Protocol

from runplane.runner.refusal import Refused, shown

MIB: Final = 1024 * 1024
MAX_DEPTH: Final = 64
MAX_COMPONENT_BYTES: Final = 255
_CHUNK: Final = 64 * 1024
# Headers, long-name records and padding: about a kilobyte a member, plus slack.
_HEADER_BYTES_PER_ENTRY: Final = 2048
_HEADER_SLACK: Final = MIB

ENV_MAX_BYTES: Final = "RUNPLANE_CONFIG_MAX_BYTES"
ENV_MAX_FILES: Final = "RUNPLANE_CONFIG_MAX_FILES"
ENV_MAX_FILE_BYTES: Final = "RUNPLANE_CONFIG_MAX_FILE_BYTES"

FILE_MODE: Final = 0o644
DIRECTORY_MODE: Final = 0o755
# The engine's working directory (which caches providers it would use as "previously
# installed") and its implied local provider mirror: compared in lower case, as a
# case-insensitive file system would find them.
SKIPPED_DIRECTORIES: Final = frozenset({".terraform", "terraform.d"})
PROVIDER_PREFIX: Final = "terraform-provider-"


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps on what a configuration archive may expand to."""

    max_total_bytes: int = 500 * MIB
    max_entries: int = 20_000
    """Files and directories (implied parent directories included)."""
    max_file_bytes: int = 100 * MIB

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ArchiveLimits:
        """The defaults, each overridden by its setting in ``environ`` if present."""
        default = cls()

        def setting(name: str, fallback: int) -> int:
            raw = environ.get(name)
            if raw is None or raw == "":
                return fallback
            value = int(raw)
            if value <= 0:
                raise ValueError(f"{name} must be a positive integer")
            return value

        return cls(
            max_total_bytes=setting(ENV_MAX_BYTES, default.max_total_bytes),
            max_entries=setting(ENV_MAX_FILES, default.max_entries),
            max_file_bytes=setting(ENV_MAX_FILE_BYTES, default.max_file_bytes),
        )


@dataclass(frozen=True)
class Extracted:
    """What an extraction wrote, and what it left out."""

    files: int
    directories: int
    bytes: int
    skipped: tuple[str, ...] = ()
    """The ``.terraform`` and ``terraform.d`` directories left out, sorted: each the path
    up to its first such component (``".terraform"``, ``"modules/x/terraform.d"``)."""
    skipped_members: int = 0
    """How many archive members (files and directories) were under them."""


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Budget(io.RawIOBase):
    """The decompressed archive stream, refused once it reads past what its members justify.

    Allowed = header slack + the data bytes of members already accepted, so neither a
    run of zeros nor an oversized header record can be decompressed without bound.
    """

    def __init__(self, source: _Readable, header_bytes: int) -> None:
        super().__init__()
        self._source = source
        self.allowed = header_bytes
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        data = self._source.read(len(view))
        self.read_bytes += len(data)
        if self.read_bytes > self.allowed:
            raise Refused(
                "the configuration archive expands beyond what its members declare "
                "(a decompression bomb or oversized headers)"
            )
        view[: len(data)] = data
        return len(data)


def _decompressed(source: IO[bytes]) -> _Readable:
    head = source.read(6)
    source.seek(-len(head), io.SEEK_CUR)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=source, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(source)
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(source)
    return source


def _parts(name: str) -> tuple[str, ...]:
    """The member's path as components, or a refusal saying why it cannot be one."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise _refusal(name, "has control characters in its name")
    if name.startswith("/"):
        raise _refusal(name, "is an absolute path")
    if "\\" in name:
        raise _refusal(name, "has a backslash in its name")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise _refusal(name, "has a '..' component: it would leave the configuration directory")
    if len(parts) > MAX_DEPTH:
        raise _refusal(name, f"is nested deeper than {MAX_DEPTH} directories")
    if any(len(p.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES for p in parts):
        raise _refusal(name, f"has a path component over {MAX_COMPONENT_BYTES} bytes")
    return parts


def _refusal(name: str, why: str) -> Refused:
    return Refused(f"configuration archive member {shown(name)} {why}")


def _over_file_cap(limits: ArchiveLimits) -> str:
    return f"is larger than the per-file cap of {limits.max_file_bytes} bytes"


def _over_total_cap(limits: ArchiveLimits) -> str:
    return f"takes the archive over the cap of {limits.max_total_bytes} bytes in total"


def _skipped_directory(parts: tuple[str, ...]) -> str | None:
    """The path up to the first engine directory among ``parts``, if there is one."""
    for depth, part in enumerate(parts, start=1):
        if part.lower() in SKIPPED_DIRECTORIES:
            return "/".join(parts[:depth])
    return None


def _kind_problem(member: tarfile.TarInfo) -> str | None:
    if member.issym():
        return "is a symbolic link"
    if member.islnk():
        return "is a hard link"
    if member.ischr() or member.isblk():
        return "is a device"
    if member.isfifo():
        return "is a FIFO"
    if member.issparse():
        return "is a sparse file"
    if not (member.isreg() or member.isdir()):
        return f"has unsupported type {member.type!r}"
    return None


class _Extraction:
    def __init__(self, target: Path, limits: ArchiveLimits, budget: _Budget) -> None:
        self.target = target
        self.limits = limits
        self.budget = budget
        self.kinds: dict[tuple[str, ...], str] = {}
        self.files = 0
        self.total = 0  # bytes written
        self.skipped: set[str] = set()
        self.skipped_members = 0
        # Not written, but decompressed all the same: counted against the total cap.
        self.skipped_bytes = 0

    def member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        name = member.name
        problem = _kind_problem(member)
        if problem is not None:
            raise _refusal(name, f"{problem}: only regular files and directories are accepted")
        parts = _parts(name)
        if not parts:
            if member.isdir():
                return  # the archive's own root ("./")
            raise _refusal(name, "has no file name")
        skipped = _skipped_directory(parts)
        if skipped is not None:
            self._skip(name, member, skipped)
            return
        if member.isreg() and parts[-1].lower().startswith(PROVIDER_PREFIX):
            raise _refusal(
                name,
                "is named like a provider plugin: providers come only from the "
                "runner's own provider installation, remove it",
            )
        previous = self.kinds.get(parts)
        if member.isdir():
            if previous == "file":
                raise _refusal(name, "is both a file and a directory")
            self._directories(name, parts)
            return
        if previous is not None:
            raise _refusal(name, "appears more than once (or is also a directory)")
        self._directories(name, parts[:-1])
        self._file(tar, member, parts)

    def _skip(self, name: str, member: tarfile.TarInfo, directory: str) -> None:
        """Leave a member out, counting it against the caps as if it were written."""
        self._count(name)
        self._reserve(name, member.size)
        self.skipped.add(directory)
        self.skipped_members += 1
        self.skipped_bytes += member.size

    def _count(self, name: str) -> None:
        if len(self.kinds) + self.skipped_members >= self.limits.max_entries:
            raise _refusal(
                name, f"exceeds the cap of {self.limits.max_entries} files and directories"
            )

    def _directories(self, name: str, parts: tuple[str, ...]) -> None:
        for depth in range(1, len(parts) + 1):
            prefix = parts[:depth]
            kind = self.kinds.get(prefix)
            if kind == "file":
                raise _refusal(name, "is inside a path that is a file")
            if kind == "dir":
                continue
            self._count(name)
            path = self.target.joinpath(*prefix)
            try:
                os.mkdir(path, DIRECTORY_MODE)
            except FileExistsError:
                # Only on a case-insensitive file system: two names, one directory.
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    raise _refusal(name, "collides with another member") from None
            except OSError as error:
                raise _refusal(name, f"cannot be created ({error.strerror})") from None
            _exact_mode(name, path)
            self.kinds[prefix] = "dir"

    def _reserve(self, name: str, size: int) -> None:
        """Refuse a member whose declared size breaks a cap; else let its bytes be read."""
        limits = self.limits
        if size > limits.max_file_bytes:
            raise _refusal(name, _over_file_cap(limits))
        if self._consumed() + size > limits.max_total_bytes:
            raise _refusal(name, _over_total_cap(limits))
        self.budget.allowed += size

    def _consumed(self) -> int:
        return self.total + self.skipped_bytes

    def _file(self, tar: tarfile.TarFile, member: tarfile.TarInfo, parts: tuple[str, ...]) -> None:
        name = member.name
        self._count(name)
        limits = self.limits
        self._reserve(name, member.size)
        source = tar.extractfile(member)
        if source is None:
            raise _refusal(name, "has no readable content")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            # Created without exec bits, so there is no moment when it could be run.
            descriptor = os.open(self.target.joinpath(*parts), flags, FILE_MODE)
        except FileExistsError:
            raise _refusal(name, "collides with another member") from None
        except OSError as error:
            raise _refusal(name, f"cannot be created ({error.strerror})") from None
        self.kinds[parts] = "file"
        written = 0
        with os.fdopen(descriptor, "wb") as out:
            # The umask may only have removed bits: set the mode exactly.
            os.fchmod(descriptor, FILE_MODE)
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                # Counted as the bytes arrive, whatever the header claimed.
                if written > limits.max_file_bytes:
                    raise _refusal(name, _over_file_cap(limits))
                if self._consumed() + written > limits.max_total_bytes:
                    raise _refusal(name, _over_total_cap(limits))
                try:
                    out.write(chunk)
                except OSError as error:
                    raise _refusal(name, f"cannot be written ({error.strerror})") from None
        self.total += written
        self.files += 1


def _exact_mode(name: str, directory: Path) -> None:
    """Give a directory this module created exactly DIRECTORY_MODE (the umask may have
    removed bits), through a descriptor so no link is ever followed."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(directory, flags)
    except OSError as error:
        raise _refusal(name, f"cannot be created ({error.strerror})") from None
    try:
        os.fchmod(descriptor, DIRECTORY_MODE)
    finally:
        os.close(descriptor)


def extract_configuration(source: IO[bytes], target: Path, limits: ArchiveLimits) -> Extracted:
    """Extract the (gzip, bzip2, xz or plain) tar archive ``source`` into the empty ``target``.

    Raises :class:`Refused` naming the first member that is not a regular file or
    directory, whose path is absolute, has ``..`` or control characters, repeats or
    collides with another member, or that takes the archive over ``limits``; and for
    an archive that cannot be read. What was written before a refusal stays in
    ``target`` for the caller to remove.

    Nothing written is executable: files get mode 0644 and directories 0755. A file
    named ``terraform-provider-*`` is refused (providers come only from the runner's
    provider installation). Members under a ``.terraform`` or ``terraform.d`` directory,
    at any depth, are not written but skipped, without failing: they are the engine's
    working directory and implied provider mirror, through which a provider binary
    would be used, and users' tools often pack ``.terraform/modules`` (which ``init``
    installs again). The result's ``skipped`` and ``skipped_members`` say what was left
    out, for the run's log; skipped members still count against ``limits``.
    """
    header_bytes = _HEADER_SLACK + limits.max_entries * _HEADER_BYTES_PER_ENTRY
    try:
        budget = _Budget(_decompressed(source), header_bytes)
        extraction = _Extraction(Path(target), limits, budget)
        with tarfile.open(fileobj=io.BufferedReader(budget, _CHUNK), mode="r|") as tar:
            for member in tar:
                extraction.member(tar, member)
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as error:
        raise Refused(
            f"the configuration archive cannot be read as a tar archive ({type(error).__name__})"
        ) from None
    directories = sum(1 for kind in extraction.kinds.values() if kind == "dir")
    return Extracted(
        extraction.files,
        directories,
        extraction.total,
        skipped=tuple(sorted(extraction.skipped)),
        skipped_members=extraction.skipped_members,
    )
