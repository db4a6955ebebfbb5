"""The audit trail's export: every record written once, as JSON lines, by day.

One export step:

1. read the watermark; if a batch is pending (claimed, not finished), rewrite it;
2. else read the records after the watermark that are *settled* (written before
   ``now - settle margin``), and claim them by writing the batch's end as the
   watermark's ``pending`` with a conditional write: an exporter that loses this
   race stops, having written nothing;
3. write the batch's objects (one per organization and UTC day, keyed by its first
   record, so writing the same batch again overwrites them with the same bytes);
4. move the watermark to the batch's end (conditional again).

A record's time is read from the clock before its transaction commits, and the index
the export reads is updated shortly after the commit: a record can appear with a time
earlier than records already read. The settle margin is longer than any function may
run (Lambda stops every invocation within 15 minutes), so a record older than it is
either stored or never will be.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from runplane.domain.audit import AuditRecord
from runplane.domain.audit_export import (
    ExportMark,
    ExportResult,
    export_objects,
    export_position,
    position_at,
)
from runplane.domain.clock import Clock

if TYPE_CHECKING:
    from runplane.services.repositories.audit import AuditExportStore, AuditSink

# Lambda's longest invocation is 15 minutes: no record older than that is uncommitted.
DEFAULT_SETTLE_SECONDS = 900
# Records per step; a schedule that fires every few minutes catches up step by step.
DEFAULT_BATCH = 1000


class AuditExporter:
    def __init__(
        self,
        clock: Clock,
        store: AuditExportStore,
        sink: AuditSink,
        *,
        settle_seconds: int = DEFAULT_SETTLE_SECONDS,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        self._clock = clock
        self._store = store
        self._sink = sink
        self._settle = timedelta(seconds=settle_seconds)
        self._batch = batch

    def export(self, settled_before: datetime | None = None) -> ExportResult:
        """One export step; ``settled_before`` overrides ``now - settle margin`` (the
        embedded stack's tests export what they just wrote)."""
        settled = settled_before or self._clock.now() - self._settle
        mark = self._store.mark()
        if mark.pending is not None:
            # A batch claimed by an exporter that stopped before finishing: its records
            # are settled and fixed, so its objects are written again byte for byte.
            return self._write_and_finish(
                mark, self._store.records_through(mark.through, mark.pending)
            )
        base = mark.through or position_at(self._store.trail_start())
        batch = self._store.records_after(base, settled, self._batch)
        if not batch:
            # Nothing settled is left: later steps need not walk these days again.
            floor = position_at(settled)
            if floor > base and self._store.advance(mark, ExportMark(floor)):
                return ExportResult(0, 0, floor)
            return ExportResult(0, 0, mark.through)
        claimed = ExportMark(base, export_position(batch[-1]))
        if not self._store.advance(mark, claimed):
            return ExportResult(0, 0, mark.through, lost_race=True)
        return self._write_and_finish(claimed, batch)

    def _write_and_finish(self, claimed: ExportMark, batch: list[AuditRecord]) -> ExportResult:
        assert claimed.pending is not None
        objects = export_objects(batch)
        for exported in objects:
            self._sink.put(exported.key, exported.body)
        # Losing here means another exporter finished the same batch (same bytes).
        finished = self._store.advance(claimed, ExportMark(claimed.pending))
        return ExportResult(len(batch), len(objects), claimed.pending, lost_race=not finished)
