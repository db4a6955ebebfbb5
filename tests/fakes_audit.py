"""The in-memory ``SecurityTrailStore``: the table's order (time, then ID), its
half-open time range, and its cursor (the last record's sort key)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runplane.domain.audit import AuditPage, AuditQuery, AuditRecord
from runplane.domain.errors import ConcurrentChange, InvalidInput


def _sort_key(record: AuditRecord) -> str:
    return f"{record.at.isoformat()}#{record.id}"


@dataclass
class InMemorySecurityTrail:
    records: list[AuditRecord] = field(default_factory=list)

    def append(self, record: AuditRecord) -> None:
        if any(held.id == record.id for held in self.records):
            raise ConcurrentChange(f"audit record {record.id} exists")
        self.records.append(record)

    def page(self, org_id: str, query: AuditQuery) -> AuditPage:
        found = sorted(
            (
                r
                for r in self.records
                if r.organization_id == org_id
                and (query.since is None or r.at >= query.since)
                and (query.until is None or r.at < query.until)
                and (query.action is None or r.action is query.action)
            ),
            key=_sort_key,
        )
        if query.cursor is not None:
            if not any(_sort_key(r) == query.cursor for r in self.records):
                raise InvalidInput("page[cursor] is not a cursor this API gave", "/page[cursor]")
            found = [r for r in found if _sort_key(r) > query.cursor]
        shown = found[: query.size]
        more = len(found) > query.size
        return AuditPage(shown, _sort_key(shown[-1]) if more and shown else None)
