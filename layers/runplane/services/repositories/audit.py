"""The security audit trail's store (``domain.audit``).

- ``append`` puts one record on its own (a refusal with nothing else to write); a
  record whose ID is already stored raises ``ConcurrentChange``. Records that go with
  a change are written in that change's transaction instead (each store's ``audit``
  argument).
- ``page`` reads one organization's records, oldest first, within the query's time
  range; another organization's records are never read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from runplane.domain.audit import AuditPage, AuditQuery, AuditRecord
from runplane.domain.audit_export import ExportMark


class SecurityTrailStore(Protocol):
    def append(self, record: AuditRecord) -> None: ...

    def page(self, org_id: str, query: AuditQuery) -> AuditPage: ...


class AuditExportStore(Protocol):
    """The export's reads and watermark (``domain.audit_export``).

    - ``mark`` is the watermark (an empty ``ExportMark`` before the first export).
    - ``trail_start`` is a time no record is older than.
    - ``records_after`` answers up to ``limit`` records of every organization after the
      position ``after`` and written before ``settled_before``, in position order;
      ``records_through`` every record after ``after`` up to ``through`` included.
    - ``advance`` replaces the watermark only if it still is ``previous``: True when it
      did, False (writing nothing) when another exporter moved it first.
    """

    def mark(self) -> ExportMark: ...

    def trail_start(self) -> datetime: ...

    def records_after(
        self, after: str, settled_before: datetime, limit: int
    ) -> list[AuditRecord]: ...

    def records_through(self, after: str, through: str) -> list[AuditRecord]: ...

    def advance(self, previous: ExportMark, new: ExportMark) -> bool: ...


class AuditSink(Protocol):
    """Where export objects go: ``put`` writes (or overwrites) one whole object."""

    def put(self, key: str, body: bytes) -> None: ...
