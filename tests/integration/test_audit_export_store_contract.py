"""The audit export's store contract: the same cases against the table (on moto) and
the in-memory fake the service tier uses. Reads walk every organization's records in
position order across days; the watermark moves only from the value read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.audit import AuditAction, AuditOutcome, AuditRecord
from runplane.domain.audit_export import ExportMark, export_position, position_at
from runplane.services.repositories.audit import AuditExportStore, SecurityTrailStore
from runplane.store.security_records import DynamoAuditExport, DynamoSecurityTrail
from tests.fakes_audit import InMemoryAuditExport, InMemorySecurityTrail

MIDNIGHT = datetime(2026, 5, 2, tzinfo=UTC)
_ids = iter(range(1_000_000))


@dataclass
class Trail:
    records: SecurityTrailStore
    export: AuditExportStore


@pytest.fixture(params=["dynamodb", "memory"])
def trail(request: pytest.FixtureRequest) -> Trail:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return Trail(DynamoSecurityTrail(), DynamoAuditExport())
    memory = InMemorySecurityTrail()
    return Trail(memory, InMemoryAuditExport(memory, started=datetime.now(UTC)))


def _put(trail: Trail, org: str, at: datetime) -> AuditRecord:
    record = AuditRecord(
        id=f"evt-{next(_ids):06d}",
        organization_id=org,
        at=at,
        action=AuditAction.VARIABLE_SET,
        actor="user:ada",
        actor_display="User ada",
        source_address="127.0.0.1",
        object_kind="workspace",
        object_id="ws-1",
        outcome=AuditOutcome.SUCCEEDED,
        details={"key": "region"},
    )
    trail.records.append(record)
    return record


def test_records_of_every_organization_are_read_in_order_across_days(trail: Trail) -> None:
    # Given records of two organizations on two days, written out of order
    late = _put(trail, "org-b", MIDNIGHT + timedelta(seconds=5))
    early = _put(trail, "org-a", MIDNIGHT - timedelta(seconds=5))
    middle = _put(trail, "org-a", MIDNIGHT + timedelta(seconds=1))
    start = position_at(MIDNIGHT - timedelta(days=1))

    # When read after a day before them, settled after all of them
    found = trail.export.records_after(start, MIDNIGHT + timedelta(minutes=1), 10)

    # Then all three come back in position order
    assert [r.id for r in found] == [early.id, middle.id, late.id]
    assert found[0] == early
    # And the settle bound, the limit and the lower position each cut the walk
    assert trail.export.records_after(start, MIDNIGHT + timedelta(seconds=5), 10) == [
        early,
        middle,
    ]
    assert trail.export.records_after(start, MIDNIGHT + timedelta(minutes=1), 1) == [early]
    assert trail.export.records_after(
        export_position(early), MIDNIGHT + timedelta(minutes=1), 10
    ) == [middle, late]
    # And a claimed batch reads back to its end, included
    assert trail.export.records_through(start, export_position(middle)) == [early, middle]


def test_the_watermark_moves_only_from_the_value_read(trail: Trail) -> None:
    # Given no export yet
    assert trail.export.mark() == ExportMark()
    first = position_at(MIDNIGHT)

    # When a batch is claimed / Then a second claim from the empty mark loses
    claimed = ExportMark("2026-05-01T00:00:00.000000Z", first)
    assert trail.export.advance(ExportMark(), claimed)
    assert not trail.export.advance(ExportMark(), ExportMark("x", "y"))
    assert trail.export.mark() == claimed

    # And finishing it moves the watermark; finishing it again loses
    done = ExportMark(first)
    assert trail.export.advance(claimed, done)
    assert not trail.export.advance(claimed, done)
    assert trail.export.mark() == done
    # And a move from a stale value loses without writing
    assert not trail.export.advance(ExportMark("stale"), ExportMark("later"))
    assert trail.export.mark() == done


def test_no_record_is_older_than_the_trail_start(trail: Trail) -> None:
    # Given a record written now
    record = _put(trail, "org-a", datetime.now(UTC))
    # Then the trail's start is not after it
    assert trail.export.trail_start() <= record.at
