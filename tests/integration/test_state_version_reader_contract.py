"""The state version reader contract: the same cases against the DynamoDB store (on moto)
and the in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import NotFound
from runplane.domain.identity import RUNNER_PERMISSIONS, Principal, PrincipalKind
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.state import FINALIZED, PENDING, StateVersion
from runplane.services.repositories import StateVersionReader
from runplane.store import state_versions
from runplane.store.models import RunItem, run_key
from runplane.store.runs import RunRepository
from runplane.store.state_version_reader import DynamoStateVersionReader
from tests.fakes import FakeClock, InMemoryStateVersions, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _version(
    sv_id: str, serial: int, *, workspace_id: str = "ws-1", status: str = FINALIZED
) -> StateVersion:
    return StateVersion(
        id=sv_id,
        workspace_id=workspace_id,
        organization_id="org-acme",
        serial=serial,
        lineage="lin-1",
        md5="0" * 32,
        status=status,
        created_at=AT + timedelta(seconds=serial),
        created_by="user:ada",
        predecessor_id=None,
        sha256="1" * 64 if status == FINALIZED else None,
        size=10 if status == FINALIZED else None,
        artifact_id=f"art-{sv_id}" if status == FINALIZED else None,
        provenance={"run_id": "run-1", "fence": 3},
        lock_id="lock-1",
    )


def _runner(run_id: str) -> Principal:
    return Principal(
        PrincipalKind.RUNNER,
        "ses-1",
        "org-acme",
        RUNNER_PERMISSIONS,
        "runner",
        run_id=run_id,
        workspace_id="ws-1",
    )


@dataclass
class Reads:
    reader: StateVersionReader
    add: Callable[[StateVersion], None]
    add_run: Callable[[str, str | None], None]


@pytest.fixture(params=["dynamodb", "memory"])
def reads(request: pytest.FixtureRequest) -> Reads:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        runs = RunRepository(FakeClock(), SeededIds())

        def add(version: StateVersion) -> None:
            if version.status == FINALIZED:
                state_versions.put_finalized(version).commit()
            else:
                state_versions.put_pending(version).commit()

        def add_run(run_id: str, pinned: str | None) -> None:
            run = Run(
                id=run_id,
                organization_id="org-acme",
                workspace_id="ws-1",
                kind=RunKind.PLAN_AND_APPLY,
                status=RunStatus.DISPATCH_PENDING,
                version=1,
                created_at=AT,
                updated_at=AT,
                definition_version="def-1",
                build_sha="abc",
                created_by="user:ada",
                runner_release="r1",
            )
            runs.create(run, actor="user:ada")
            if pinned is not None:
                # As the run's plan attempt records it.
                RunItem(*run_key(run_id)).update(actions=[RunItem.predecessor_sv_id.set(pinned)])

        return Reads(DynamoStateVersionReader(runs), add, add_run)
    memory = InMemoryStateVersions()
    return Reads(memory, memory.add, memory.add_run)


def test_a_version_reads_back_whole_and_an_unknown_one_is_not_found(reads: Reads) -> None:
    reads.add(_version("sv-1", 1))
    reads.add(_version("sv-2", 2, status=PENDING))
    assert reads.reader.get("sv-1") == _version("sv-1", 1)
    assert reads.reader.get("sv-2") == _version("sv-2", 2, status=PENDING)
    with pytest.raises(NotFound):
        reads.reader.get("sv-none")


def test_a_workspace_lists_its_finalized_versions_by_serial(reads: Reads) -> None:
    # Given versions of a workspace written out of serial order, one still pending,
    # and a version of another workspace
    for sv_id, serial in (("sv-c", 12), ("sv-a", 3), ("sv-b", 10)):
        reads.add(_version(sv_id, serial))
    reads.add(_version("sv-p", 13, status=PENDING))
    reads.add(_version("sv-x", 1, workspace_id="ws-2"))
    # Then the workspace's list holds its finalized ones, oldest serial first (10 after 3:
    # the serial's order, not its text's)
    assert [v.id for v in reads.reader.list_for_workspace("ws-1")] == ["sv-a", "sv-b", "sv-c"]
    assert [v.id for v in reads.reader.list_for_workspace("ws-2")] == ["sv-x"]
    assert reads.reader.list_for_workspace("ws-none") == []


def test_the_pin_is_the_runs_predecessor_and_an_unknown_run_is_not_found(reads: Reads) -> None:
    reads.add_run("run-1", "sv-1")
    reads.add_run("run-2", None)
    assert reads.reader.pinned(_runner("run-1")) == "sv-1"
    assert reads.reader.pinned(_runner("run-2")) is None
    with pytest.raises(NotFound):
        reads.reader.pinned(_runner("run-none"))
