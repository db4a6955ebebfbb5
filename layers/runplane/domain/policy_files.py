"""The files of a policy set directory: its Rego modules and its data files.

Pure: standard library only. One reader for every layout (``policy_packaging``) and for
the unit tests (``policy_unit_tests``): files are read from subdirectories too, named by
their path relative to the directory, in name order; hidden files and directories are
skipped. A module is a ``*.rego`` file, a test module one named ``*_test.rego`` or
``*.test.rego`` (read apart: it is never published); a data file is a ``*.json``,
``*.yaml`` or ``*.yml`` file other than ``policy-set.json`` (Runplane's own metadata).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from runplane.domain.errors import InvalidPolicySet
from runplane.domain.policy import (
    MAX_MODULE_BYTES,
    MAX_MODULES,
    POLICY_SET_METADATA_FILE,
    PolicyModule,
    is_test_module,
)

DATA_SUFFIXES: Final = (".json", ".yaml", ".yml")
MAX_DATA_BYTES: Final = 64 * 1024 * 1024
"""All data files of a directory together (a generous bound: mocks of large plans)."""


def _visible(root: Path, path: Path) -> bool:
    return path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts)


def read_modules(root: Path, *, tests: bool = False) -> list[PolicyModule]:
    """The modules under ``root``, or (``tests``) its test modules; ``InvalidPolicySet``
    for more than ``MAX_MODULES`` of them, or one too large or not UTF-8 text."""
    files = sorted(
        p for p in root.rglob("*.rego") if _visible(root, p) and is_test_module(p.name) == tests
    )
    if len(files) > MAX_MODULES:
        counted = "test modules" if tests else ".rego files"
        raise InvalidPolicySet(
            f"the directory has {len(files)} {counted}; at most {MAX_MODULES} are allowed"
        )
    what = "test module" if tests else "module"
    modules = []
    for file in files:
        name = file.relative_to(root).as_posix()
        size = file.stat().st_size
        if size > MAX_MODULE_BYTES:
            stated = f"over {MAX_MODULE_BYTES:,}" if tests else f"{size:,}"
            raise InvalidPolicySet(
                f"{what} {name} is {stated} bytes; a module may be at most "
                f"{MAX_MODULE_BYTES:,} bytes"
            )
        try:
            modules.append(PolicyModule(name, file.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            raise InvalidPolicySet(f"{what} {name} is not UTF-8 text") from None
    return modules


def data_files(root: Path) -> list[Path]:
    """The data files under ``root``; ``InvalidPolicySet`` if together they hold more
    than ``MAX_DATA_BYTES``."""
    found = sorted(
        p
        for p in root.rglob("*")
        if p.suffix in DATA_SUFFIXES
        and _visible(root, p)
        and p.relative_to(root).as_posix() != POLICY_SET_METADATA_FILE
    )
    total = sum(p.stat().st_size for p in found)
    if total > MAX_DATA_BYTES:
        raise InvalidPolicySet(
            f"the directory's data files hold {total:,} bytes; at most {MAX_DATA_BYTES:,} are read"
        )
    return found
