"""The unit of work's artifact records, as a runner's report uses them: uploads registered
in the same commit as what refers to them, and read back with the run and its parts in
one read. The same cases against the DynamoDB unit of work (on moto) and the in-memory
one (tests/service/test_plan_reports.py), so the fake cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from runplane.domain.artifacts import Artifact, ArtifactKind, ArtifactRecord, ArtifactStatus
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.run import RunKind, RunStatus
from runplane.services.repositories import RunLedger
from runplane.services.unit_of_work import UnitOfWork
from runplane.store.runs import RunRepository
from runplane.store.unit_of_work import DynamoUnitOfWork
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import InMemoryUnitOfWork
from tests.fakes import FakeClock, InMemoryArtifactRecords, InMemoryRunLedger, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Units:
    new: Callable[[], UnitOfWork]
    ledger: RunLedger
    workspace_id: str

    def run(self) -> Run:
        run = Run(
            id="run-1",
            organization_id="org-acme",
            workspace_id=self.workspace_id,
            kind=RunKind.PLAN_ONLY,
            status=RunStatus.PLANNING,
            version=1,
            created_at=AT,
            updated_at=AT,
        )
        self.ledger.create(run, actor="user:ada", input={})
        return run


def _record(artifact_id: str) -> ArtifactRecord:
    artifact = Artifact(
        artifact_id, "org-acme", ArtifactKind.PLAN, ArtifactStatus.REGISTERED, 3, "a" * 64, AT
    )
    return ArtifactRecord(
        artifact, f"objects/{artifact_id}", b"wrapped", 4096, "etag", "rs-1", "att-1"
    )


@pytest.fixture(params=["dynamodb", "memory"])
def units(request: pytest.FixtureRequest) -> Units:
    clock, ids = FakeClock(), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        workspace: Workspace = request.getfixturevalue("workspace")
        lifecycle = run_lifecycle(clock, ids)
        return Units(
            lambda: DynamoUnitOfWork(RunRepository(clock, ids), lifecycle.mover.move),
            lifecycle.ledger,
            workspace.id,
        )
    ledger, records = InMemoryRunLedger(clock, ids), InMemoryArtifactRecords()
    return Units(lambda: InMemoryUnitOfWork(ledger, artifacts=records), ledger, "ws-1")


def test_uploads_register_with_what_refers_to_them_and_read_back_with_the_run(
    units: Units,
) -> None:
    # Given a run, and two uploads registered with a part naming them, in one commit
    run = units.run()
    with units.new() as uow:
        uow.artifacts.register([_record("art-1"), _record("art-2")], AT)
        uow.parts.put(run.id, "plan", state="committed", body={"artifact": "art-1"}, now=AT)
        uow.commit()
    # When the run, its parts and three artifacts' records are read together
    with units.new() as uow:
        read, parts, records = uow.runs.with_parts_and_artifacts(
            run.id, ["plan", "policy"], ["art-1", "art-2", "art-unknown"]
        )
    # Then the records found are there whole, the unknown one absent
    assert read.id == run.id
    assert parts["plan"] is not None
    assert parts["policy"] is None
    assert records == {"art-1": _record("art-1"), "art-2": _record("art-2")}


def test_an_upload_recorded_already_refuses_the_whole_commit(units: Units) -> None:
    # Given an upload registered
    run = units.run()
    with units.new() as uow:
        uow.artifacts.register([_record("art-1")], AT)
        uow.commit()
    # When it is registered again with a new one and a part
    with units.new() as uow:
        uow.artifacts.register([_record("art-2"), _record("art-1")], AT)
        uow.parts.put(run.id, "plan", state="committed", body={}, now=AT)
        # Then the commit is refused and neither the new upload nor the part is written
        with pytest.raises(ConcurrentChange, match="already registered"):
            uow.commit()
        _, parts, records = uow.runs.with_parts_and_artifacts(run.id, ["plan"], ["art-2"])
    assert parts == {"plan": None}
    assert records == {}


def test_an_unknown_run_is_not_found(units: Units) -> None:
    with units.new() as uow, pytest.raises(NotFound):
        uow.runs.with_parts_and_artifacts("run-unknown", ["plan"], ["art-1"])
