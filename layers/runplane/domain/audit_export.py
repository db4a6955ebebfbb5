"""The audit trail's export: JSON lines, one object per organization and day of a batch.

Every record has an export position: its time (UTC, fixed width), ID and organization,
which orders the whole deployment's trail. The export's watermark is a position: every
record at or before it was written. A batch is claimed before its objects are written
(the watermark's ``pending`` end), so a retried or concurrent exporter writes the same
records to the same keys with the same bytes, or nothing (docs/audit.md, "Export").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from runplane.domain.audit import AuditRecord

# Objects are keyed under this prefix (in AWS, of the artifact bucket).
EXPORT_PREFIX = "audit/"


def trail_time(at: datetime) -> str:
    """A time as a key prefix that orders as time does (one fixed width, UTC)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def export_position(record: AuditRecord) -> str:
    """Where ``record`` stands in the deployment's trail (the index's sort key)."""
    return f"{trail_time(record.at)}#{record.id}#{record.organization_id}"


def position_at(at: datetime) -> str:
    """The position just before every record written at ``at`` or later."""
    return trail_time(at)


@dataclass(frozen=True)
class ExportMark:
    """The watermark: every record at or before ``through`` is exported ("" before the
    first export); ``pending``, when set, ends the batch claimed but not yet finished."""

    through: str = ""
    pending: str | None = None


@dataclass(frozen=True)
class ExportObject:
    key: str
    body: bytes
    records: int


def export_line(record: AuditRecord) -> str:
    """One record as one line: the API's shape, keys sorted, so a rewrite is byte-equal."""
    return json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"


def object_key(record: AuditRecord) -> str:
    """``audit/<organization>/<yyyy>/<mm>/<dd>/<first record>.jsonl``, the day in UTC;
    named by the object's first record, so a rewrite of the batch hits the same key."""
    at = record.at.astimezone(UTC)
    first = f"{at.strftime('%Y%m%dT%H%M%S%fZ')}-{record.id}"
    return f"{EXPORT_PREFIX}{record.organization_id}/{at:%Y/%m/%d}/{first}.jsonl"


def export_objects(batch: list[AuditRecord]) -> list[ExportObject]:
    """A batch (in position order) as its objects: one per organization and UTC day,
    each holding that organization's records of that day in order."""
    groups: dict[tuple[str, str], list[AuditRecord]] = {}
    for record in batch:
        day = record.at.astimezone(UTC).date().isoformat()
        groups.setdefault((record.organization_id, day), []).append(record)
    return [
        ExportObject(
            key=object_key(records[0]),
            body="".join(export_line(r) for r in records).encode(),
            records=len(records),
        )
        for records in groups.values()
    ]


@dataclass(frozen=True)
class ExportResult:
    # Records and objects this exporter wrote (0 when there was nothing, or another
    # exporter claimed the batch first).
    records: int
    objects: int
    # The watermark after this export.
    through: str
    lost_race: bool = False
