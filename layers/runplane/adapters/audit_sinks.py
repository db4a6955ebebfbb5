"""Where the audit export writes its objects: the artifact bucket in AWS, a local
directory in the embedded stack (docs/audit.md, "Export")."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from runplane.adapters.object_store import ObjectStore


class BucketAuditSink:
    """Objects of the artifact bucket (under ``audit/``): a put is whole or absent."""

    def __init__(self, objects: ObjectStore) -> None:
        self._objects = objects

    def put(self, key: str, body: bytes) -> None:
        self._objects.upload_stream(key, [body])


class DirectoryAuditSink:
    """Files under ``root`` at the objects' keys, each replaced whole (written beside
    it, then renamed), so a reader never sees half a file."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def put(self, key: str, body: bytes) -> None:
        target = (self._root / key).resolve()
        if not target.is_relative_to(self._root.resolve()):
            raise ValueError("an export key stays under its directory")
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".export-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(body)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
