"""The security audit trail's records (``domain.audit.AuditRecord``): put once, in the
transaction of what they record; read per organization in time order; walked by day
for the export, behind a watermark advanced by a conditional write."""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pynamodb.expressions.condition import Condition

from runplane.domain.audit import AuditAction, AuditOutcome, AuditPage, AuditQuery, AuditRecord
from runplane.domain.audit_export import ExportMark, export_position, position_at, trail_time
from runplane.domain.errors import ConcurrentChange, InvalidInput
from runplane.store.models import (
    AuditExportWatermarkItem,
    SecurityRecordItem,
    security_record_key,
)
from runplane.store.transaction import Transaction


def _as_dict(details: Any) -> dict[str, Any]:
    # A raw MapAttribute reads back as an attribute container, a fresh one as a dict.
    return details.as_dict() if hasattr(details, "as_dict") else dict(details)


def _export_partition(day: date) -> str:
    return f"AUDITLOG#DAY#{day.isoformat()}"


def security_record(record: AuditRecord) -> Transaction:
    """The security record ``record``, put once (never updated), to commit in the same
    transaction as what it records."""
    sort = f"{trail_time(record.at)}#{record.id}"
    key = security_record_key(record.organization_id, sort)
    item = SecurityRecordItem(
        key[0],
        key[1],
        gsi1pk=_export_partition(record.at.astimezone(UTC).date()),
        gsi1sk=export_position(record),
        record_id=record.id,
        org_id=record.organization_id,
        at=record.at,
        action=record.action.value,
        actor=record.actor,
        actor_display=record.actor_display,
        source_address=record.source_address,
        object_kind=record.object_kind,
        object_id=record.object_id,
        outcome=record.outcome.value,
        details=dict(record.details),
    )
    return Transaction().put_new(item)


def append(record: AuditRecord) -> None:
    """A record with nothing else to commit (a refused webhook delivery)."""
    security_record(record).commit()


def to_record(item: SecurityRecordItem) -> AuditRecord:
    return AuditRecord(
        id=item.record_id,
        organization_id=item.org_id,
        at=item.at,
        action=AuditAction(item.action),
        actor=item.actor,
        actor_display=item.actor_display,
        source_address=item.source_address,
        object_kind=item.object_kind,
        object_id=item.object_id,
        outcome=AuditOutcome(item.outcome),
        details={str(k): str(v) for k, v in _as_dict(item.details).items()},
    )


def _encode_cursor(sort_key: str) -> str:
    return base64.urlsafe_b64encode(sort_key.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        decoded = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        decoded = ""
    if "#" not in decoded:
        raise InvalidInput("page[cursor] is not a cursor this API gave", "/page[cursor]")
    return decoded


def trail_page(org_id: str, query: AuditQuery) -> AuditPage:
    """One page of an organization's records, oldest first, within [since, until)."""
    partition = security_record_key(org_id, "")[0]
    low = trail_time(query.since) if query.since else "0"
    if query.cursor:
        low = max(low, _decode_cursor(query.cursor) + "\x00")
    high = trail_time(query.until) if query.until else "\U0010ffff"
    condition = SecurityRecordItem.sk.between(low, high)
    action_filter = (
        SecurityRecordItem.action == query.action.value if query.action is not None else None
    )
    found: list[SecurityRecordItem] = []
    for item in SecurityRecordItem.query(
        partition,
        condition,
        filter_condition=action_filter,
        consistent_read=True,
        page_size=min(query.size + 1, 100),
    ):
        # ``between`` is inclusive: ``until`` itself is outside the half-open range.
        if query.until is not None and item.sk >= high:
            break
        found.append(item)
        if len(found) > query.size:
            break
    shown = found[: query.size]
    more = len(found) > query.size
    return AuditPage(
        [to_record(item) for item in shown],
        _encode_cursor(shown[-1].sk) if more and shown else None,
    )


# -- the export's reads and watermark ------------------------------------------------------


def export_mark() -> ExportMark:
    """The export's watermark (an empty mark before the first export)."""
    try:
        item = AuditExportWatermarkItem.get(*_WATERMARK_KEY, consistent_read=True)
    except AuditExportWatermarkItem.DoesNotExist:
        return ExportMark()
    return ExportMark(item.exported_through, item.pending)


def trail_start() -> datetime:
    """No record is older than the table: the first export walks from its creation."""
    created = SecurityRecordItem.describe_table()["CreationDateTime"]
    if isinstance(created, datetime):
        return created.astimezone(UTC)
    return datetime.fromtimestamp(float(created), UTC)


def _walk(after: str, before: str, limit: int) -> list[AuditRecord]:
    """Up to ``limit`` records with ``after < position < before``, in position order,
    one index partition (day) after another."""
    day = date.fromisoformat(after[:10])
    last = date.fromisoformat(before[:10])
    found: list[AuditRecord] = []
    while day <= last and len(found) < limit:
        for item in SecurityRecordItem.gsi1.query(
            _export_partition(day),
            SecurityRecordItem.gsi1sk > after,
            limit=limit - len(found),
        ):
            if item.gsi1sk >= before:
                break
            found.append(to_record(item))
        day += timedelta(days=1)
    return found


def records_to_export(after: str, settled_before: datetime, limit: int) -> list[AuditRecord]:
    """Up to ``limit`` records after the position ``after`` and written before
    ``settled_before``, in position order (every organization's)."""
    return _walk(after, position_at(settled_before), limit)


def records_through(after: str, through: str) -> list[AuditRecord]:
    """Every record after ``after`` up to ``through`` included (a claimed batch)."""
    # Positions end with the organization: "<through>\x00" is the first one past it.
    return _walk(after, through + "\x00", _MAX_BATCH)


def advance_mark(previous: ExportMark, new: ExportMark) -> bool:
    """Replace the watermark ``previous`` with ``new``; False when another exporter
    moved it first (nothing is written then)."""
    item = AuditExportWatermarkItem(
        *_WATERMARK_KEY, exported_through=new.through, pending=new.pending
    )
    condition: Condition
    if not previous.through:
        condition = AuditExportWatermarkItem.pk.does_not_exist()
    else:
        condition = AuditExportWatermarkItem.exported_through == previous.through
        if previous.pending is None:
            condition &= AuditExportWatermarkItem.pending.does_not_exist()
        else:
            condition &= AuditExportWatermarkItem.pending == previous.pending
    try:
        Transaction().put(item, condition=condition).commit()
    except ConcurrentChange:
        return False
    return True


_WATERMARK_KEY = ("AUDITEXPORT", "WATERMARK")
# A claimed batch is at most this many records (the exporter's own limit is lower).
_MAX_BATCH = 10_000


class DynamoAuditExport:
    """``services.repositories.audit.AuditExportStore`` on the table."""

    def mark(self) -> ExportMark:
        return export_mark()

    def trail_start(self) -> datetime:
        return trail_start()

    def records_after(self, after: str, settled_before: datetime, limit: int) -> list[AuditRecord]:
        return records_to_export(after, settled_before, limit)

    def records_through(self, after: str, through: str) -> list[AuditRecord]:
        return records_through(after, through)

    def advance(self, previous: ExportMark, new: ExportMark) -> bool:
        return advance_mark(previous, new)


class DynamoSecurityTrail:
    """``services.repositories.audit.SecurityTrailStore`` on the table."""

    def append(self, record: AuditRecord) -> None:
        append(record)

    def page(self, org_id: str, query: AuditQuery) -> AuditPage:
        return trail_page(org_id, query)
