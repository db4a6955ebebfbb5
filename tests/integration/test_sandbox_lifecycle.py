"""Sandbox slots and runner loss, decided by the table (a cancellation in every status
and a lost plan runner: tests/service/test_lifecycle_rules.py, test_workflow_failures.py;
a start refused for a full scope: tests/service/test_runner_start.py, and the slots'
condition: tests/integration/test_start_unit_of_work_contract.py).

The arena drives real services on moto step by step (fake workflow and launcher
edges), so each test can stop a run in exactly the status it is about.
"""

from __future__ import annotations

import pytest

from runplane.domain.errors import (
    InvalidInput,
    LaunchDenied,
    RunEnded,
    SandboxCapacityExhausted,
)
from runplane.domain.run import RunStatus
from runplane.domain.runner_reports import Failed
from runplane.services.launch_controls import GLOBAL, Controls
from runplane.store import run_parts, sandbox_slots
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import (
    Arena,
    applying,
    awaiting_approval,
    created,
    planning,
)
from tests.integration.conftest import Stack

S = RunStatus


def limit_sandboxes(arena: Arena, limit: int | None) -> None:
    controls = arena.orchestration._launch_controls  # the arena's own instance
    controls.set(arena.admin, "organization", Controls(max_sandboxes=limit))


def running(arena: Arena) -> tuple[int, int]:
    return sandbox_slots.active(GLOBAL), sandbox_slots.active(arena.org.id)


# -- capacity -------------------------------------------------------------------------


def test_a_new_run_beyond_the_limit_gets_503_and_no_run(arena: Arena, stack: Stack) -> None:
    # Given an organization at its limit of one running sandbox
    limit_sandboxes(arena, 1)
    planning(arena, "cap-busy")

    # When another run is created
    # Then creation is denied with Retry-After and no run item is written
    with pytest.raises(LaunchDenied) as denied:
        created(arena, "cap-denied")
    assert denied.value.http_status == 503
    assert denied.value.retry_after_seconds == 60
    runs = [i for i in stack.scan() if i["SK"]["S"] == "RUN"]
    assert len(runs) == 1


def test_a_finished_plan_gives_its_slot_back_and_the_next_start_takes_it(arena: Arena) -> None:
    # Given a limit of one and a planning run holding the only slot
    limit_sandboxes(arena, 1)
    _, first = planning(arena, "cap-a")
    assert running(arena) == (1, 1)

    # When its plan result is reported
    attempt = run_parts.require(first, "attempt#plan").body["attempt_id"]
    arena.orchestration.report_plan(first, attempt, Failed(reason="x"))

    # Then the slot is free again and another run can start a sandbox
    assert running(arena) == (0, 0)
    _, third = planning(arena, "cap-c")
    assert run_parts.require(third, "attempt#plan").state == "started"
    assert running(arena) == (1, 1)


def test_slots_are_counted_without_a_limit_so_a_later_limit_is_exact(arena: Arena) -> None:
    # Given no limit and two planning runs
    planning(arena, "count-a")
    planning(arena, "count-b")
    # Then both are counted, and a limit of two denies a third run at creation
    assert running(arena) == (2, 2)
    limit_sandboxes(arena, 2)
    with pytest.raises(LaunchDenied):
        created(arena, "count-c")


# -- runner loss -------------------------------------------------------------------------


def test_a_lost_apply_runner_after_start_needs_recovery_never_success(arena: Arena) -> None:
    # Given an applying run (start proven) whose runner went silent
    ws, run_id = applying(arena, "lost-apply")
    sandbox = run_parts.require(run_id, "attempt#apply").body["sandbox_ref"]

    # When the apply wait times out
    result = arena.orchestration.fail(run_id, "apply", "States.Timeout")

    # Then the outcome is unknown: needs_recovery, workspace and lock kept, sandbox stopped
    assert result == {"status": "needs_recovery"}
    assert sandbox in arena.launcher.stopped
    workspace = workspace_store.get_workspace(ws, reads=IdentityMap())
    assert workspace.writer_run_id == run_id
    assert workspace.lock_run_id == run_id
    assert running(arena) == (0, 0)


def test_a_lost_apply_runner_before_start_is_uncertain(arena: Arena) -> None:
    # Given an approved run whose apply sandbox launched but never proved its start
    ws, run_id = awaiting_approval(arena, "lost-start")
    arena.runs.decide(arena.admin, run_id, "approve", None)
    arena.orchestration.start_runner(run_id, "apply", "token-apply")

    # When the heartbeat wait times out
    result = arena.orchestration.fail(run_id, "apply", "States.HeartbeatTimeout")

    # Then the start is uncertain (not failed, not succeeded) and the workspace is kept
    assert result == {"status": "apply_start_uncertain"}
    assert workspace_store.get_workspace(ws, reads=IdentityMap()).writer_run_id == run_id
    assert running(arena) == (0, 0)


def test_an_apply_that_never_got_capacity_fails_and_frees_the_workspace(arena: Arena) -> None:
    # Given an approved run whose apply start kept finding the organization full
    ws, run_id = awaiting_approval(arena, "no-capacity")
    arena.runs.decide(arena.admin, run_id, "approve", None)
    limit_sandboxes(arena, 0)
    with pytest.raises(SandboxCapacityExhausted):
        arena.orchestration.start_runner(run_id, "apply", "token-apply")

    # When the workflow gives up retrying
    result = arena.orchestration.fail(run_id, "apply", "SandboxCapacityExhausted")

    # Then nothing started, so the apply failed outright and the workspace is free
    assert result == {"status": "apply_failed"}
    workspace = workspace_store.get_workspace(ws, reads=IdentityMap())
    assert workspace.writer_run_id is None
    assert workspace.lock_run_id is None
    with pytest.raises(RunEnded):
        arena.orchestration.start_runner(run_id, "apply", "token-apply-2")


# -- engine versions ----------------------------------------------------------------------


def test_a_run_asking_for_an_engine_the_deployment_lacks_is_refused(
    arena: Arena, stack: Stack
) -> None:
    # Given a deployment whose runner image provides engine 1.8.5 only
    runs = stack.rewired(engine_versions="1.8.5").runs
    arena.runs = runs
    before = len([i for i in stack.scan() if i["SK"]["S"] == "RUN"])

    # When a run asks for 1.0.3 / Then it is refused naming what is available
    with pytest.raises(InvalidInput) as refused:
        created(arena, "engine-missing")
    assert refused.value.pointer == "/engine_version"
    assert "this deployment runs 1.8.5" in str(refused.value)
    assert len([i for i in stack.scan() if i["SK"]["S"] == "RUN"]) == before


def test_every_move_logs_the_status_the_intervention_alarm_counts(
    arena: Arena, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an applying run (the deployment's alarm counts log lines by to_status)
    _, run_id = applying(arena, "logged")
    caplog.set_level("INFO", logger="runplane.runs")
    # When its runner is lost
    arena.orchestration.fail(run_id, "apply", "States.Timeout")
    # Then one structured line names the run and its new status
    [line] = [r for r in caplog.records if r.name == "runplane.runs"]
    assert line.getMessage() == "run status changed"
    assert (line.run_id, line.from_status, line.to_status) == (  # type: ignore[attr-defined]
        run_id,
        "applying",
        "needs_recovery",
    )
