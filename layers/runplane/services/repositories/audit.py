"""The security audit trail's store (``domain.audit``).

- ``append`` puts one record on its own (a refusal with nothing else to write); a
  record whose ID is already stored raises ``ConcurrentChange``. Records that go with
  a change are written in that change's transaction instead (each store's ``audit``
  argument).
- ``page`` reads one organization's records, oldest first, within the query's time
  range; another organization's records are never read.
"""

from __future__ import annotations

from typing import Protocol

from runplane.domain.audit import AuditPage, AuditQuery, AuditRecord


class SecurityTrailStore(Protocol):
    def append(self, record: AuditRecord) -> None: ...

    def page(self, org_id: str, query: AuditQuery) -> AuditPage: ...
