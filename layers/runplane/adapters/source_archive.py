"""A working directory of a GitHub commit archive, as a configuration archive.

The tarball is extracted with the runner's own member-by-member checks (regular
files and directories only: no symlinks, hard links or devices; no absolute or
``..`` paths; caps on entries and bytes), then the working directory is packed
exactly as ``runplane run create`` packs an upload (sorted, no local state, at
least one configuration file at its top level).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import IO

from runplane.client import ConfigurationError, pack
from runplane.domain.errors import SourceRefused
from runplane.runner.archive import ArchiveLimits, extract_configuration
from runplane.runner.refusal import Refused


def working_directory_archive(
    tarball: IO[bytes], working_directory: str, limits: ArchiveLimits
) -> bytes:
    """The configuration archive of ``working_directory`` ("" = the repository root)."""
    with tempfile.TemporaryDirectory(prefix="runplane-source-") as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        tarball.seek(0)
        try:
            extract_configuration(tarball, tree, limits)
        except Refused as refused:
            raise SourceRefused(refused.message) from None
        # GitHub puts everything under one top-level "<owner>-<repo>-<sha>/" directory.
        roots = list(tree.iterdir())
        if len(roots) != 1 or not roots[0].is_dir():
            raise SourceRefused("the commit archive does not have one top-level directory")
        directory = roots[0].joinpath(*[p for p in working_directory.split("/") if p])
        # Extraction wrote no links, so the path cannot leave the tree.
        if not directory.is_dir():
            where = working_directory or "the repository root"
            raise SourceRefused(f"working directory {where!r} is not in this commit")
        try:
            return pack(directory)
        except ConfigurationError:
            where = working_directory or "the repository root"
            raise SourceRefused(
                f"working directory {where!r} has no configuration files at its top level"
            ) from None
