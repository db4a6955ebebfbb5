"""The audit export on fakes: every settled record lands in exactly one JSON line, in
its organization's object of its UTC day; a retried batch rewrites the same objects
byte for byte; an exporter that loses the race writes nothing (docs/audit.md)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.audit import AuditAction, AuditOutcome, AuditRecord
from runplane.domain.audit_export import ExportMark
from runplane.services.audit_export import AuditExporter
from tests.fakes import FakeClock
from tests.fakes_audit import InMemoryAuditExport, InMemorySecurityTrail, InMemorySink

SETTLE = timedelta(seconds=900)
DAY_ONE = datetime(2026, 3, 1, 23, 58, tzinfo=UTC)
_ids = iter(range(1_000_000))


def _record(org: str, at: datetime) -> AuditRecord:
    return AuditRecord(
        id=f"evt-{next(_ids):06d}",
        organization_id=org,
        at=at,
        action=AuditAction.TOKEN_CREATED,
        actor="user:ada",
        actor_display="User ada",
        source_address="203.0.113.7",
        object_kind="token",
        object_id="tok-1",
        outcome=AuditOutcome.SUCCEEDED,
        details={"name": "ci"},
    )


class World:
    def __init__(self) -> None:
        self.clock = FakeClock(DAY_ONE)
        self.trail = InMemorySecurityTrail()
        self.store = InMemoryAuditExport(self.trail, started=DAY_ONE - timedelta(days=3))
        self.sink = InMemorySink()

    def exporter(self, sink: InMemorySink | None = None, batch: int = 1000) -> AuditExporter:
        return AuditExporter(
            self.clock, self.store, sink or self.sink, settle_seconds=900, batch=batch
        )

    def write(self, org: str, at: datetime) -> AuditRecord:
        record = _record(org, at)
        self.trail.append(record)
        return record

    def exported_ids(self) -> Counter[str]:
        return Counter(line["id"] for line in self.sink.lines())


@pytest.fixture
def world() -> World:
    return World()


def test_two_organizations_and_two_days_land_in_separate_objects_once(world: World) -> None:
    # Given records of two organizations either side of midnight (UTC)
    late = [world.write(org, DAY_ONE + timedelta(seconds=s)) for s in (1, 2) for org in ("a", "b")]
    early = [world.write(org, DAY_ONE + timedelta(minutes=5)) for org in ("a", "b")]
    world.clock.current = DAY_ONE + timedelta(minutes=5) + SETTLE + timedelta(seconds=1)

    # When the export runs
    result = world.exporter().export()

    # Then each record is in exactly one line, in the object of its organization and day
    assert world.exported_ids() == Counter(r.id for r in late + early)
    assert (result.records, result.objects) == (6, 4)
    assert sorted(k.rsplit("/", 1)[0] for k in world.sink.objects) == [
        "audit/a/2026/03/01",
        "audit/a/2026/03/02",
        "audit/b/2026/03/01",
        "audit/b/2026/03/02",
    ]
    for key, body in world.sink.objects.items():
        org = key.split("/")[1]
        lines = [line for line in body.decode().splitlines()]
        assert all(f'"organization_id":"{org}"' in line for line in lines)
    # And the records of one object keep their order
    day_one_a = next(v for k, v in world.sink.objects.items() if k.startswith("audit/a/2026/03/01"))
    assert [r.id for r in late if r.organization_id == "a"] == [
        line.split('"id":"')[1].split('"')[0] for line in day_one_a.decode().splitlines()
    ]


def test_a_record_younger_than_the_settle_margin_waits_and_is_then_written_once(
    world: World,
) -> None:
    # Given a settled record and one written a minute ago
    settled = world.write("a", DAY_ONE)
    world.clock.current = DAY_ONE + SETTLE + timedelta(minutes=2)
    fresh = world.write("a", world.clock.current - timedelta(minutes=1))

    # When the export runs / Then only the settled one is written
    world.exporter().export()
    assert world.exported_ids() == Counter([settled.id])

    # And a slow transaction commits a record stamped before the fresh one, still
    # inside the margin: the next step, once both are settled, writes both once
    slow = world.write("a", fresh.at - timedelta(seconds=30))
    world.clock.advance(SETTLE)
    world.exporter().export()
    assert world.exported_ids() == Counter([settled.id, fresh.id, slow.id])


def test_a_batch_interrupted_after_its_claim_is_rewritten_with_the_same_bytes(
    world: World,
) -> None:
    # Given records of two organizations, and a sink that fails after its first object
    for org in ("a", "b", "a"):
        world.write(org, DAY_ONE)
    world.clock.current = DAY_ONE + SETTLE + timedelta(minutes=1)

    class FailingSink(InMemorySink):
        def put(self, key: str, body: bytes) -> None:
            if self.puts:
                raise OSError("the bucket is unreachable")
            super().put(key, body)

    failing = FailingSink()
    with pytest.raises(OSError, match="unreachable"):
        world.exporter(failing).export()
    assert world.store.mark().pending is not None

    # When a later record is written and the export retries
    later = world.write("b", DAY_ONE + timedelta(seconds=1))
    world.clock.advance(SETTLE)
    world.exporter().export()

    # Then the claimed batch was written again at the same keys, with the same bytes
    (first_key,) = failing.objects
    assert world.sink.objects[first_key] == failing.objects[first_key]
    assert world.store.mark() == ExportMark(world.store.mark().through)
    # And the later record waits for the next step, then appears once
    assert later.id not in world.exported_ids()
    world.exporter().export()
    assert world.exported_ids() == Counter(r.id for r in world.trail.records)


def test_an_exporter_that_loses_the_race_writes_nothing(world: World) -> None:
    # Given settled records, and a second exporter that runs whole between the first
    # one's reads and its claim
    for org in ("a", "b"):
        world.write(org, DAY_ONE)
    world.clock.current = DAY_ONE + SETTLE + timedelta(minutes=1)
    other_sink = InMemorySink()
    world.store.before_advance.append(lambda: world.exporter(other_sink).export())

    # When the first exporter runs
    result = world.exporter().export()

    # Then it lost, and wrote no object; the winner wrote each record once
    assert result.lost_race
    assert result.records == 0
    assert world.sink.objects == {}
    assert Counter(line["id"] for line in other_sink.lines()) == Counter(
        r.id for r in world.trail.records
    )
    # And the next step finds nothing more to write
    again = world.exporter(other_sink).export()
    assert again.records == 0


def test_the_first_export_starts_at_the_oldest_record_and_walks_in_small_batches(
    world: World,
) -> None:
    # Given records written days before the first export
    old = [world.write("a", DAY_ONE - timedelta(days=2, hours=h)) for h in range(5)]
    world.clock.current = DAY_ONE + SETTLE

    # When the export runs in batches of two until nothing is left
    results = [world.exporter(batch=2).export() for _ in range(4)]

    # Then every record was written once, the first batch holding the oldest
    assert [r.records for r in results] == [2, 2, 1, 0]
    assert world.exported_ids() == Counter(r.id for r in old)
    assert min(world.sink.puts) == world.sink.puts[0]
