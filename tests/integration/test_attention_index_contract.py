"""The attention index contract: the same runs, moved the same way, give the same notices,
drift and plan counts from the table (on moto: notices written by the moves themselves)
and from the in-memory index the service tier uses (derived from the runs), so the fake
cannot drift from the store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runplane.domain.attention import Notice
from runplane.domain.entities import Run
from runplane.domain.parts import PlanEvidence, RunPart
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.schedules import Drift
from runplane.domain.transitions import MAIN_PATH
from runplane.services.attention import AttentionIndex
from runplane.store import run_parts, schedules
from runplane.store.attention_index import DynamoAttentionIndex
from runplane.store.runs import RunRepository
from tests.builders import run_record
from tests.fakes import FakeClock, InMemoryRunLedger, SeededIds
from tests.fakes_attention import InMemoryAttentionIndex

AT = datetime(2026, 1, 1, tzinfo=UTC)
DEADLINE = AT + timedelta(days=7)
TO_APPROVAL = MAIN_PATH[1 : MAIN_PATH.index(RunStatus.AWAITING_APPROVAL) + 1]
TO_PLANNING = (RunStatus.QUEUED, RunStatus.PLANNING)
TO_APPLYING = (*TO_APPROVAL, RunStatus.APPLYING)


@dataclass
class Backend:
    index: AttentionIndex
    add: Callable[[Run], None]
    get: Callable[[str], Run]
    move: Callable[..., None]
    add_part: Callable[[RunPart], None]
    add_drift: Callable[[Drift], None]


@pytest.fixture(params=["dynamodb", "memory"])
def backend(request: pytest.FixtureRequest) -> Backend:
    clock, ids = FakeClock(AT), SeededIds()
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        repository = RunRepository(clock, ids)

        def move(run: Run, target: RunStatus, updates: dict[str, Any] | None = None) -> None:
            repository.transition(run, target, actor="user:ada", run_updates=updates)

        def put_part(part: RunPart) -> None:
            run_parts.put(
                part.run_id, part.name, state=part.state, body=part.body, now=part.created_at
            ).commit()

        return Backend(
            DynamoAttentionIndex(),
            lambda run: repository.create(run, actor=str(run.created_by)),
            repository.get,
            move,
            put_part,
            lambda drift: schedules.put_drift(drift).commit(),
        )
    ledger = InMemoryRunLedger(clock, ids)
    drifts: dict[str, Drift] = {}

    def move_in_memory(run: Run, target: RunStatus, updates: dict[str, Any] | None = None) -> None:
        ledger.move(run, target, actor="user:ada", run_updates=updates)

    return Backend(
        InMemoryAttentionIndex(ledger, drifts.get),
        lambda run: ledger.create(run, actor=str(run.created_by), input={}),
        ledger.get_run,
        move_in_memory,
        ledger.add_part,
        lambda drift: drifts.__setitem__(drift.workspace_id, drift),
    )


def _run(run_id: str, workspace_id: str = "ws-1", org: str = "org-acme") -> Run:
    return run_record(run_id, workspace_id, org, RunKind.PLAN_AND_APPLY, AT)


def _walk(backend: Backend, run_id: str, path: tuple[RunStatus, ...]) -> None:
    for target in path:
        updates: dict[str, Any] = {}
        if target is RunStatus.PLAN_COMPLETE:
            updates["plan_has_changes"] = True
        if target is RunStatus.AWAITING_APPROVAL:
            updates["approval_expires_at"] = DEADLINE
        backend.move(backend.get(run_id), target, updates or None)


def _started(backend: Backend, run_id: str, path: tuple[RunStatus, ...], **run: str) -> None:
    backend.add(_run(run_id, **run))
    _walk(backend, run_id, path)


def _by_run(notices: list[Notice]) -> dict[tuple[str, bool], tuple[str, RunStatus]]:
    return {(n.run_id, n.latest_failure): (n.workspace_id, n.status) for n in notices}


def test_a_run_awaiting_approval_has_a_notice_with_its_deadline_until_it_moves_on(
    backend: Backend,
) -> None:
    # Given a run awaiting approval, and one of another organization
    _started(backend, "run-1", TO_APPROVAL)
    _started(backend, "run-x", TO_APPROVAL, org="org-other", workspace_id="ws-x")
    # When the organization's notices are read
    notices = backend.index.notices("org-acme")
    # Then there is the run's, with its deadline and creator, and nothing of the other
    assert [(n.run_id, n.status, n.deadline, n.created_by) for n in notices] == [
        ("run-1", RunStatus.AWAITING_APPROVAL, DEADLINE, "user:ada")
    ]
    # And once it is approved and applying, it has none
    _walk(backend, "run-1", (RunStatus.APPLYING,))
    assert backend.index.notices("org-acme") == []


def test_a_recoverable_ending_keeps_a_notice_and_a_failure_is_the_workspaces_latest(
    backend: Backend,
) -> None:
    # Given an apply that needs recovery in ws-1, two plan failures in ws-2 and an
    # apply failure in ws-3
    _started(backend, "run-r", (*TO_APPLYING, RunStatus.NEEDS_RECOVERY))
    _started(backend, "run-f1", (*TO_PLANNING, RunStatus.PLAN_FAILED), workspace_id="ws-2")
    _started(backend, "run-f2", (*TO_PLANNING, RunStatus.PLAN_FAILED), workspace_id="ws-2")
    _started(backend, "run-a", (*TO_APPLYING, RunStatus.APPLY_FAILED), workspace_id="ws-3")
    # When the notices are read
    # Then the recovery, ws-2's latest failure, and the apply failure both as a run that
    # may need recovery and as ws-3's latest failure
    assert _by_run(backend.index.notices("org-acme")) == {
        ("run-r", False): ("ws-1", RunStatus.NEEDS_RECOVERY),
        ("run-f2", True): ("ws-2", RunStatus.PLAN_FAILED),
        ("run-a", False): ("ws-3", RunStatus.APPLY_FAILED),
        ("run-a", True): ("ws-3", RunStatus.APPLY_FAILED),
    }


def test_a_later_success_in_the_workspace_clears_its_failure(backend: Backend) -> None:
    # Given a failed plan, then a run of the same workspace that applied
    _started(backend, "run-f", (*TO_PLANNING, RunStatus.PLAN_FAILED))
    _started(backend, "run-ok", (*TO_APPLYING, RunStatus.SUCCEEDED))
    # When the notices are read
    # Then there are none
    assert backend.index.notices("org-acme") == []


def test_drift_and_plan_counts_are_read_for_the_named_only(backend: Backend) -> None:
    # Given ws-1 drifted, ws-2 checked clear, ws-3 never checked; a run with a plan
    for workspace_id, state in (("ws-1", "drifted"), ("ws-2", "clear")):
        backend.add_drift(Drift(workspace_id, state, AT, "run-s", AT, None, {}))
    backend.add(_run("run-1"))
    body = PlanEvidence(
        attempt_id="att-1",
        plan_artifact_id="art-1",
        plan_sha256="p1",
        plan_json_artifact_id="art-2",
        plan_json_sha256="j1",
        log_artifact_id=None,
        summary={"add": 2, "change": 1, "destroy": 0},
        has_changes=True,
        engine_version="1.0.3",
        predecessor_state_version_id=None,
    ).to_body()
    backend.add_part(RunPart("run-1", "plan", "committed", body, None, AT, AT))
    # When drift and plan counts are read
    # Then only the drifted workspace, and only the run with a plan, are answered
    assert backend.index.drifted(["ws-1", "ws-2", "ws-3"]) == {"ws-1"}
    assert backend.index.drifted([]) == set()
    assert backend.index.plan_summaries(["run-1", "run-none"]) == {
        "run-1": {"add": 2, "change": 1, "destroy": 0}
    }
