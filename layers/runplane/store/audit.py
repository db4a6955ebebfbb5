"""Audit events: immutable items written in the same transaction as what they record."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from runplane.domain.audit import AuditAction, AuditOutcome, AuditPage, AuditQuery, AuditRecord
from runplane.domain.entities import AuditEvent
from runplane.domain.errors import ConcurrentChange, InvalidInput
from runplane.store.models import (
    AUDIT_PREFIX,
    AuditEventItem,
    AuditExportWatermarkItem,
    SecurityRecordItem,
    org_event_key,
    security_record_key,
)
from runplane.store.transaction import Transaction


def org_audit_partition(org_id: str) -> str:
    return f"ORG#{org_id}#AUDIT"


def audit_item(
    *,
    key: tuple[str, str],
    event_id: str,
    org_id: str,
    subject_id: str,
    type: str,
    actor: str,
    at: datetime,
    details: Mapping[str, str],
) -> AuditEventItem:
    return AuditEventItem(
        key[0],
        key[1],
        gsi1pk=org_audit_partition(org_id),
        gsi1sk=f"{at.isoformat()}#{event_id}",
        event_id=event_id,
        org_id=org_id,
        subject_id=subject_id,
        type=type,
        actor=actor,
        at=at,
        details=dict(details),
    )


def org_event(
    *,
    organization_id: str,
    subject_id: str,
    event_id: str,
    type: str,
    actor: str,
    at: datetime,
    details: Mapping[str, str],
) -> Transaction:
    """An organization audit event, written once, to commit with what it records."""
    return Transaction().put_new(
        audit_item(
            key=org_event_key(organization_id, f"{at.isoformat()}#{event_id}"),
            event_id=event_id,
            org_id=organization_id,
            subject_id=subject_id,
            type=type,
            actor=actor,
            at=at,
            details=details,
        )
    )


def recorded(event: AuditEvent) -> Transaction:
    """The organization audit event ``event``, written once, to commit with what it
    records (``org_event`` of its fields)."""
    return org_event(
        organization_id=event.organization_id,
        subject_id=event.subject_id,
        event_id=event.id,
        type=event.type,
        actor=event.actor,
        at=event.at,
        details=event.details,
    )


def to_event(item: AuditEventItem) -> AuditEvent:
    return AuditEvent(
        id=item.event_id,
        organization_id=item.org_id,
        subject_id=item.subject_id,
        type=item.type,
        actor=item.actor,
        at=item.at,
        details={str(k): str(v) for k, v in _as_dict(item.details).items()},
    )


def _as_dict(details: Any) -> dict[str, Any]:
    # A raw MapAttribute reads back as an attribute container, a fresh one as a dict.
    return details.as_dict() if hasattr(details, "as_dict") else dict(details)


def events_in(partition: str) -> list[AuditEvent]:
    """The audit events of one subject partition (a run, an organization), oldest first."""
    return [
        to_event(item)
        for item in AuditEventItem.query(
            partition, AuditEventItem.sk.startswith(AUDIT_PREFIX), consistent_read=True
        )
    ]


def organization_trail(org_id: str) -> list[AuditEvent]:
    return [to_event(item) for item in AuditEventItem.gsi1.query(org_audit_partition(org_id))]


# -- the security trail (domain.audit) ---------------------------------------------------


def trail_time(at: datetime) -> str:
    """A sort key prefix that orders as time does (one fixed width, UTC)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        gsi1sk=f"{sort}#{record.organization_id}",
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


def exported_through() -> str:
    """The GSI1 sort key of the last exported record ("" before the first export)."""
    try:
        return AuditExportWatermarkItem.get(*_WATERMARK_KEY, consistent_read=True).exported_through
    except AuditExportWatermarkItem.DoesNotExist:
        return ""


def records_to_export(after: str, settled_before: datetime, limit: int) -> list[AuditRecord]:
    """Up to ``limit`` records after the watermark ``after`` and written before
    ``settled_before``, in the trail's order (all organizations)."""
    start = date.fromisoformat(after[:10]) if after else _FIRST_EXPORT_DAY
    end = settled_before.astimezone(UTC).date()
    high = trail_time(settled_before)
    found: list[AuditRecord] = []
    day = start
    while day <= end and len(found) < limit:
        for item in SecurityRecordItem.gsi1.query(
            _export_partition(day),
            SecurityRecordItem.gsi1sk > after if after else None,
            limit=limit - len(found),
        ):
            if item.gsi1sk >= high:
                break
            found.append(to_record(item))
        day += timedelta(days=1)
    return found


def advance_watermark(previous: str, through: str) -> bool:
    """Move the watermark from ``previous`` to ``through``; False when another exporter
    moved it first (nothing is written then)."""
    item = AuditExportWatermarkItem(*_WATERMARK_KEY, exported_through=through)
    condition = (
        AuditExportWatermarkItem.pk.does_not_exist()
        if not previous
        else AuditExportWatermarkItem.exported_through == previous
    )
    try:
        Transaction().put(item, condition=condition).commit()
    except ConcurrentChange:
        return False
    return True


def export_sort_key(record: AuditRecord) -> str:
    return f"{trail_time(record.at)}#{record.id}#{record.organization_id}"


_WATERMARK_KEY = ("AUDITEXPORT", "WATERMARK")
# The export's first run starts its walk here (no record is older than the feature).
_FIRST_EXPORT_DAY = date(2026, 1, 1)
