"""A sandbox seen to stop before its runner's final report, over the in-memory unit of
work: the run ends as a lost phase ends it (a plan fails, a started apply needs
recovery) and the workflow's wait fails, or, for a notice that is not about the attempt
still waited on, nothing is written."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from runplane.domain.capabilities import Phase
from runplane.domain.parts import AttemptState
from runplane.domain.run import RunStatus
from runplane.domain.sandbox_exits import SandboxExit, SandboxRef, StoppedTask
from runplane.services.sandbox_exits import SandboxExits
from tests.fake_unit_of_work import InMemoryUnitOfWork
from tests.fakes_operations import InMemorySandboxRefs
from tests.service.conftest import Tier
from tests.service.scenarios import open_attempt, run_at, settle, written

CLUSTER = "arn:aws:ecs:us-east-1:123456789012:cluster/runplane-sandboxes"
TASK = "arn:aws:ecs:us-east-1:123456789012:task/runplane-sandboxes/0123456789abcdef"


@dataclass
class Exits:
    tier: Tier
    service: SandboxExits
    refs: InMemorySandboxRefs


@pytest.fixture
def exits(tier: Tier) -> Exits:
    def units() -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(
            tier.run_reader, tier.writer_queue, tier.sandboxes, directory=tier.directory
        )

    refs = InMemorySandboxRefs()
    service = SandboxExits(tier.steps, tier.workflow, units, refs, cluster=CLUSTER)
    return Exits(tier, service, refs)


def in_sandbox(exits: Exits, status: RunStatus, phase: Phase) -> SandboxExit:
    """``run-1`` in ``status`` with an open ``phase`` attempt in sandbox ``TASK`` (its
    wait's token stored), holding the writer of ``ws-1``; the notice of that sandbox."""
    tier = exits.tier
    run = run_at(tier, status)
    open_attempt(tier, run, phase.value, TASK, "org#org-acme", f"session-{phase.value}")
    tier.writer_queue.holders["ws-1"] = run.id
    exits.refs.record(SandboxRef(TASK, run.id, phase, f"att-{phase.value}", f"sbx-{phase.value}"))
    settle(tier)
    return SandboxExit(
        run_id=run.id,
        phase=phase,
        attempt_id=f"att-{phase.value}",
        sandbox_id=f"sbx-{phase.value}",
        reference=TASK,
        detail="Essential container in task exited",
    )


def test_a_plan_sandbox_that_stops_fails_the_plan_and_its_wait(exits: Exits) -> None:
    # Given a run planning in a sandbox
    notice = in_sandbox(exits, RunStatus.PLANNING, Phase.PLAN)
    # When ECS reports the sandbox's task stopped
    noticed = exits.service.task_stopped(StoppedTask(TASK, CLUSTER, notice.detail))
    # Then the plan failed, its attempt closed lost, the writer freed, and the wait failed
    assert noticed.as_dict() == {"outcome": "ended", "run_id": "run-1", "status": "plan_failed"}
    tier = exits.tier
    assert tier.run_reader.get_run("run-1").status is RunStatus.PLAN_FAILED
    assert tier.run_reader.parts("run-1")["attempt#plan"].state == AttemptState.LOST
    assert "ws-1" not in tier.writer_queue.holders
    assert [token for token, _ in tier.workflow.failed] == ["tok-plan"]


def test_an_apply_sandbox_that_stops_leaves_the_run_needing_recovery(exits: Exits) -> None:
    # Given a run whose apply started in a sandbox
    notice = in_sandbox(exits, RunStatus.APPLYING, Phase.APPLY)
    # When the sandbox's exit is noticed
    noticed = exits.service.stopped(notice)
    # Then the run needs recovery and keeps the workspace's writer authority
    assert noticed.status == "needs_recovery"
    assert exits.tier.run_reader.get_run("run-1").status is RunStatus.NEEDS_RECOVERY
    assert exits.tier.writer_queue.holders["ws-1"] == "run-1"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"attempt_id": "att-other"}, "is not the run's plan attempt"),
        ({"sandbox_id": "sbx-other"}, "is not the run's plan attempt"),
        ({"reference": "arn:aws:ecs:us-east-1:1:task/c/other"}, "runs in another sandbox"),
        ({"phase": Phase.APPLY}, "has no apply attempt"),
        ({"run_id": "run-unknown"}, "does not exist"),
    ],
)
def test_a_notice_about_another_attempt_writes_nothing(
    exits: Exits, change: dict[str, object], why: str
) -> None:
    notice = in_sandbox(exits, RunStatus.PLANNING, Phase.PLAN)
    before = written(exits.tier)
    stale = SandboxExit(**{**notice.__dict__, **change})
    noticed = exits.service.stopped(stale)
    assert noticed.outcome == "ignored"
    assert noticed.why is not None
    assert why in noticed.why
    assert written(exits.tier) == before


def test_a_runner_exiting_after_its_report_writes_nothing(exits: Exits) -> None:
    # Given a plan whose attempt its report already closed
    notice = in_sandbox(exits, RunStatus.PLANNING, Phase.PLAN)
    ledger = exits.tier.run_reader
    attempt = ledger.parts("run-1")["attempt#plan"]
    with InMemoryUnitOfWork(ledger, sandboxes=exits.tier.sandboxes) as uow:
        uow.attempts.close(attempt, AttemptState.SUCCEEDED, now=exits.tier.clock.now())
        uow.commit()
    before = written(exits.tier)
    # When its process exits
    noticed = exits.service.stopped(notice)
    # Then the notice changes nothing
    assert noticed.why == "attempt att-plan already closed (succeeded)"
    assert written(exits.tier) == before


def test_tasks_of_another_cluster_or_never_recorded_are_ignored(exits: Exits) -> None:
    in_sandbox(exits, RunStatus.PLANNING, Phase.PLAN)
    before = written(exits.tier)
    other = exits.service.task_stopped(StoppedTask(TASK, CLUSTER + "-other", "stopped"))
    unknown = exits.service.task_stopped(StoppedTask(TASK + "0", CLUSTER, "stopped"))
    assert other.why == "the task is not of the sandbox cluster"
    assert unknown.why == "no sandbox was recorded for the task"
    assert written(exits.tier) == before


@pytest.mark.parametrize("reported", ["process", "task"])
def test_a_runner_that_exits_after_its_report_was_taken_costs_no_read(
    tier: Tier, reported: str
) -> None:
    # Given a sandbox whose runner exits with a status it gives only once its final
    # report was accepted (here its attempt is still open: as if it had lied)
    opened: list[InMemoryUnitOfWork] = []

    def units() -> InMemoryUnitOfWork:
        opened.append(
            InMemoryUnitOfWork(
                tier.run_reader, tier.writer_queue, tier.sandboxes, directory=tier.directory
            )
        )
        return opened[-1]

    refs = InMemorySandboxRefs()
    exits = Exits(tier, SandboxExits(tier.steps, tier.workflow, units, refs, cluster=CLUSTER), refs)
    notice = in_sandbox(exits, RunStatus.PLANNING, Phase.PLAN)
    opened.clear()
    # When its stop is noticed
    if reported == "process":
        noticed = exits.service.stopped(replace(notice, reported=True))
    else:
        noticed = exits.service.task_stopped(StoppedTask(TASK, CLUSTER, "exited", reported=True))
    # Then it is acknowledged without reading anything, and the run is left as it was:
    # the heartbeat window, not this notice, would end a run whose runner lied
    assert noticed.outcome == "ignored"
    assert noticed.why == "the runner's final report was accepted"
    assert opened == []
    assert tier.run_reader.get_run("run-1").status is RunStatus.PLANNING
    assert tier.workflow.failed == []
