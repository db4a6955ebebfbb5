"""The run reader contract: the same cases against the DynamoDB store (on moto) and the
in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.domain.parts import RunPart
from runplane.domain.run import RunKind, RunStatus, Stage, StageStatus
from runplane.services.repositories import RunReader
from runplane.store import run_parts
from runplane.store.run_reader import DynamoRunReader
from runplane.store.runs import RunRepository
from tests.fakes import FakeClock, InMemoryRuns, SeededIds

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _run(run_id: str, workspace_id: str = "ws-1", at: datetime = AT) -> Run:
    return Run(
        id=run_id,
        organization_id="org-acme",
        workspace_id=workspace_id,
        kind=RunKind.PLAN_AND_APPLY,
        status=RunStatus.DISPATCH_PENDING,
        version=1,
        created_at=at,
        updated_at=at,
        definition_version="def-1",
        build_sha="abc",
        created_by="user:ada",
        runner_release="r1",
    )


def _part(run_id: str, name: str, state: str, body: dict[str, object]) -> RunPart:
    return RunPart(run_id, name, state, dict(body), None, AT, AT)


@dataclass
class Runs:
    reader: RunReader
    add: Callable[[Run], None]
    add_part: Callable[[RunPart], None]


@pytest.fixture(params=["dynamodb", "memory"])
def runs(request: pytest.FixtureRequest) -> Runs:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        repository = RunRepository(FakeClock(), SeededIds())

        def put_part(part: RunPart) -> None:
            run_parts.put(
                part.run_id, part.name, state=part.state, body=part.body, now=part.created_at
            ).commit()

        return Runs(
            DynamoRunReader(repository),
            lambda run: repository.create(run, actor=str(run.created_by)),
            put_part,
        )
    memory = InMemoryRuns()
    return Runs(memory, memory.add, memory.add_part)


def test_a_run_reads_back_whole_and_an_unknown_one_is_not_found(runs: Runs) -> None:
    # Given a run
    runs.add(_run("run-1"))
    # When it is read by ID, and an unknown ID is read
    # Then the first reads back whole and the second is NotFound
    assert runs.reader.get_run("run-1") == _run("run-1")
    with pytest.raises(NotFound):
        runs.reader.get_run("run-none")


def test_a_workspaces_runs_are_newest_first_and_only_its_own(runs: Runs) -> None:
    # Given three runs in ws-1 (two created at the same instant) and one in ws-2
    runs.add(_run("run-a", at=AT))
    runs.add(_run("run-c", at=AT + timedelta(seconds=1)))
    runs.add(_run("run-b", at=AT + timedelta(seconds=1)))
    runs.add(_run("run-x", workspace_id="ws-2", at=AT + timedelta(seconds=2)))
    # When ws-1's runs are listed
    listed = [r.id for r in runs.reader.runs_of_workspace("ws-1")]
    # Then they are newest first, a tie broken by ID (descending), without ws-2's run
    assert listed == ["run-c", "run-b", "run-a"]
    assert runs.reader.runs_of_workspace("ws-none") == []


def test_a_new_run_has_its_four_stages_pending(runs: Runs) -> None:
    runs.add(_run("run-1"))
    stages = runs.reader.stages("run-1")
    assert sorted(stages) == sorted(Stage)
    assert {s.status for s in stages.values()} == {StageStatus.PENDING}
    assert runs.reader.stages("run-none") == {}


def test_parts_read_back_by_name_and_a_second_one_of_a_name_is_refused(runs: Runs) -> None:
    # Given a run with its input and an approval written in the stored shape
    runs.add(_run("run-1"))
    approval = _part(
        "run-1",
        "approval",
        "approved",
        {
            "expires_at": "2026-01-02T00:00:00+00:00",
            "binding": {"plan_sha256": "p1", "policy_override": {"by": "user:ada"}},
            "decision": "approve",
            "decided_by": "user:ada",
        },
    )
    runs.add_part(_part("run-1", "input", "recorded", {"configuration_version_id": "cv-1"}))
    runs.add_part(approval)
    # When another approval is written for the run
    with pytest.raises(ConcurrentChange):
        runs.add_part(_part("run-1", "approval", "waiting", {}))
    # Then the parts read back by name, the first approval unchanged, keys and all
    parts = runs.reader.parts("run-1")
    assert sorted(parts) == ["approval", "input"]
    assert parts["approval"] == approval
    assert runs.reader.parts("run-none") == {}
