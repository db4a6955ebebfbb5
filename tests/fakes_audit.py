"""The in-memory ``SecurityTrailStore``: the table's order (time, then ID), its
half-open time range, and its cursor (the last record's sort key)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runplane.domain.audit import AuditPage, AuditQuery, AuditRecord
from runplane.domain.audit_export import ExportMark, export_position, position_at
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


@dataclass
class InMemoryAuditExport:
    """The export's ``AuditExportStore`` over an ``InMemorySecurityTrail``: the table's
    position order and its conditional watermark. ``before_advance`` runs once, just
    before the next watermark write (another exporter's step landing in between)."""

    trail: InMemorySecurityTrail
    started: datetime
    watermark: ExportMark | None = None
    before_advance: list[Callable[[], object]] = field(default_factory=list)

    def mark(self) -> ExportMark:
        return self.watermark or ExportMark()

    def trail_start(self) -> datetime:
        return self.started

    def _ordered(self) -> list[AuditRecord]:
        return sorted(self.trail.records, key=export_position)

    def records_after(self, after: str, settled_before: datetime, limit: int) -> list[AuditRecord]:
        before = position_at(settled_before)
        found = [r for r in self._ordered() if after < export_position(r) < before]
        return found[:limit]

    def records_through(self, after: str, through: str) -> list[AuditRecord]:
        return [r for r in self._ordered() if after < export_position(r) <= through]

    def advance(self, previous: ExportMark, new: ExportMark) -> bool:
        if self.before_advance:
            self.before_advance.pop(0)()
        if self.mark() != previous:
            return False
        self.watermark = new
        return True


@dataclass
class InMemorySink:
    """Export objects by key, and every put in order (to see rewrites)."""

    objects: dict[str, bytes] = field(default_factory=dict)
    puts: list[str] = field(default_factory=list)

    def put(self, key: str, body: bytes) -> None:
        self.objects[key] = body
        self.puts.append(key)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for body in self.objects.values() for line in body.splitlines()]
