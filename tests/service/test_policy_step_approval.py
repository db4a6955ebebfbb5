"""The policy step asking for approval itself, over the in-memory unit of work: a run
whose policy passes with something to apply awaits approval when the step ends (the
approval bound to the check as just recorded), a retry converges on one approval, and a
cancel landing between the policy's write and the approval's refuses the approval."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Never

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import RunEnded
from runplane.domain.parts import ApplyRecordState, ApprovalState, RunPart
from runplane.domain.run import RunStatus
from runplane.services.capabilities import Capabilities
from runplane.services.policy import RESERVED, Policies
from runplane.services.workflow_steps import WorkflowSteps
from runplane.wiring import run_lifecycle
from tests.fake_unit_of_work import InMemoryUnitOfWork
from tests.fakes import (
    InMemoryArtifactRecords,
    InMemoryArtifacts,
    InMemoryPolicySets,
    InMemoryRunLedger,
    LexicalEvaluator,
    no_read_ahead,
)
from tests.fakes_operations import InMemorySourceRecords
from tests.service.conftest import Tier
from tests.service.scenarios import approving_workspace, run_at, settle, written

PLAN_JSON = b"""{
  "format_version": "0.2",
  "terraform_version": "1.0.3",
  "resource_changes": [
    {
      "address": "test_thing.one",
      "mode": "managed",
      "type": "test_thing",
      "name": "one",
      "provider_name": "registry.terraform.io/runplane/test",
      "change": {"actions": ["create"], "before": null, "after": {"name": "one"},
                 "after_unknown": {}, "before_sensitive": false, "after_sensitive": false}
    }
  ],
  "output_changes": {}
}"""


@dataclass
class PolicyStep:
    tier: Tier
    steps: WorkflowSteps
    artifacts: InMemoryArtifacts
    # Called before each unit of work the steps open: another actor's step, say.
    before_each_unit: list[Callable[[], None]]


@pytest.fixture
def ps(tier: Tier) -> PolicyStep:
    artifacts = InMemoryArtifacts(tier.ids, tier.clock)
    evaluator = LexicalEvaluator()  # no set is attached: nothing is evaluated
    policies = Policies(
        tier.clock,
        artifacts,
        lambda: evaluator,
        InMemoryPolicySets(),
        tier.directory,
        units=tier.new_unit,
        sources=InMemorySourceRecords(),
        records=InMemoryArtifactRecords(),
    )
    before: list[Callable[[], None]] = []

    def unit() -> InMemoryUnitOfWork:
        for interruption in before:
            interruption()
        return tier.new_unit()

    steps = WorkflowSteps(
        tier.clock,
        tier.ids,
        run_lifecycle(tier.clock, tier.ids),
        Capabilities(tier.clock, tier.ids, unit),
        tier.workflow,
        tier.launcher,
        control_plane_url="http://runplane.test",
        launch_controls=_not_here,
        policies=lambda: policies,
        units=unit,
        reads_ahead=no_read_ahead,
    )
    return PolicyStep(tier, steps, artifacts, before)


def _not_here() -> Never:
    raise AssertionError("the policy step reached the launch controls")


def planned(ps: PolicyStep, window: int | None = 3600) -> Run:
    """``run-1`` of ``ws-1`` whose plan (with changes) was reported: its plan evidence,
    its reserved policy check and its pending apply record, pinned to state ``sv-1``; the
    workspace's approval window is ``window`` seconds, if set."""
    tier = ps.tier
    ledger, now = tier.run_reader, tier.clock.now()
    run = run_at(tier, RunStatus.PLAN_COMPLETE)
    ledger.runs[run.id] = replace(run, predecessor_sv_id="sv-1")
    plan_json = ps.artifacts.put("org-acme", "plan_json", [PLAN_JSON])  # type: ignore[arg-type]
    plan = {
        "attempt_id": "att-plan",
        "plan_artifact_id": "art-plan",
        "plan_sha256": "p" * 64,
        "plan_json_artifact_id": plan_json.id,
        "plan_json_sha256": plan_json.sha256,
        "summary": {"adds": 1, "changes": 0, "destroys": 0},
    }
    ledger.add_part(RunPart(run.id, "plan", "committed", plan, None, now, now))
    ledger.add_part(RunPart(run.id, "policy", RESERVED, {"id": "pc-1"}, None, now, now))
    ledger.add_part(RunPart(run.id, "apply", ApplyRecordState.PENDING, {}, None, now, now))
    approving_workspace(tier, window)
    settle(tier)
    return ledger.get_run(run.id)


def test_a_passed_policy_asks_for_approval_bound_to_the_check_as_recorded(
    ps: PolicyStep,
) -> None:
    ledger = ps.tier.run_reader
    # Given a run whose plan has changes, in a workspace whose approvals wait one hour
    run = planned(ps, window=3600)
    start = ps.tier.clock.now()

    # When the policy step runs (no policy set is attached: it passes)
    outcome = ps.steps.evaluate_policy(run.id)
    end = ps.tier.clock.now()

    # Then the run awaits approval when the step ends, and the workflow is told how long
    # its wait lasts: the deadline with a second to spare
    assert outcome == {"next": "approval", "approval_timeout_seconds": 3601}
    moved = ledger.get_run(run.id)
    assert moved.status is RunStatus.AWAITING_APPROVAL
    deadline = moved.approval_expires_at
    assert deadline is not None
    assert start + timedelta(hours=1) <= deadline <= end + timedelta(hours=1)
    # And the approval waits, bound to the plan, the pinned state and the policy check
    # exactly as the step recorded it
    parts = ledger.parts(run.id)
    policy, approval = parts["policy"], parts["approval"]
    assert policy.state == "passed"
    assert approval.state == ApprovalState.WAITING
    assert approval.body["binding"] == {
        "plan_sha256": "p" * 64,
        "predecessor_state_version_id": "sv-1",
        "policy_input_digest": policy.body["input_digest"],
        "policy_result_digest": policy.body["result_digest"],
    }
    assert policy.body["result_digest"]
    assert approval.body["expires_at"] == deadline.isoformat()
    # And the run moved through each status in its own write, the approval's last
    assert [event.type for event in ledger.audit][-1] == "run.approval_requested"


def test_without_a_workspace_window_the_deployments_applies(ps: PolicyStep) -> None:
    run = planned(ps, window=None)
    outcome = ps.steps.evaluate_policy(run.id)
    # The steps keep the default window (seven days).
    assert outcome == {"next": "approval", "approval_timeout_seconds": 7 * 24 * 3600 + 1}


def test_a_retry_that_finds_the_policy_passed_asks_for_the_approval(ps: PolicyStep) -> None:
    ledger = ps.tier.run_reader
    # Given a policy step that committed the policy's results, and whose approval was not
    # written (its Lambda failed in between)
    run = planned(ps, window=3600)
    ps.before_each_unit.append(_fail_once_passed(ledger, run.id))
    with pytest.raises(_LambdaLost):
        ps.steps.evaluate_policy(run.id)
    assert ledger.get_run(run.id).status is RunStatus.POLICY_PASSED
    assert "approval" not in ledger.parts(run.id)

    # When the step is retried
    outcome = ps.steps.evaluate_policy(run.id)

    # Then it asks for the approval from what it reads, and the run awaits it
    assert outcome == {"next": "approval", "approval_timeout_seconds": 3601}
    assert ledger.get_run(run.id).status is RunStatus.AWAITING_APPROVAL
    policy, approval = ledger.parts(run.id)["policy"], ledger.parts(run.id)["approval"]
    assert approval.body["binding"]["policy_result_digest"] == policy.body["result_digest"]


def test_a_retry_that_finds_the_approval_asked_writes_nothing_and_answers_the_wait(
    ps: PolicyStep,
) -> None:
    # Given a policy step that asked for approval ten minutes ago (its Lambda's answer
    # was lost), with a one-hour window
    run = planned(ps, window=3600)
    ps.steps.evaluate_policy(run.id)
    ps.tier.clock.advance(timedelta(minutes=10))
    before = written(ps.tier)

    # When the step is retried
    outcome = ps.steps.evaluate_policy(run.id)

    # Then nothing is written and the wait is what remains of the deadline
    assert written(ps.tier) == before
    assert outcome == {"next": "approval", "approval_timeout_seconds": 50 * 60 + 1}


def test_an_execution_started_before_still_asks_and_finds_it_asked(ps: PolicyStep) -> None:
    # Given a run whose policy step asked for approval
    run = planned(ps, window=3600)
    asked = ps.steps.evaluate_policy(run.id)
    before = written(ps.tier)
    # When an execution started under the earlier definition asks for approval itself
    requested = ps.steps.request_approval(run.id)
    # Then nothing is written and its wait lasts as long
    assert written(ps.tier) == before
    assert requested == {"timeout_seconds": asked["approval_timeout_seconds"]}


def test_a_cancel_between_the_policys_write_and_the_approvals_refuses_the_approval(
    ps: PolicyStep,
) -> None:
    ledger = ps.tier.run_reader
    # Given a run canceled just after its policy passed, before the approval's write
    run = planned(ps, window=3600)
    ps.before_each_unit.append(_cancel_once_passed(ledger, run.id))

    # When the policy step runs
    with pytest.raises(RunEnded):
        ps.steps.evaluate_policy(run.id)

    # Then the run stays canceled with no approval and no deadline: the workflow ends
    # quietly, and nothing of the approval was written
    ended = ledger.get_run(run.id)
    assert ended.status is RunStatus.CANCELED
    assert ended.approval_expires_at is None
    assert "approval" not in ledger.parts(run.id)
    assert "run.approval_requested" not in [event.type for event in ledger.audit]


def test_nothing_to_apply_asks_for_no_approval(ps: PolicyStep) -> None:
    ledger = ps.tier.run_reader
    # Given a run whose plan has no changes
    run = planned(ps)
    ledger.runs[run.id] = replace(ledger.get_run(run.id), plan_has_changes=False)
    # When the policy step runs
    outcome = ps.steps.evaluate_policy(run.id)
    # Then the plan is to finish: no approval, no wait
    assert outcome == {"next": "finish", "approval_timeout_seconds": None}
    assert ledger.get_run(run.id).status is RunStatus.POLICY_PASSED
    assert "approval" not in ledger.parts(run.id)


class _LambdaLost(Exception):
    """The step's Lambda failed (timed out, say) between two of its writes."""


def _fail_once_passed(ledger: InMemoryRunLedger, run_id: str) -> Callable[[], None]:
    """Fail the step once, as it opens its first unit after the policy passed."""
    done: list[bool] = []

    def interrupt() -> None:
        run = ledger.get_run(run_id)
        if not done and run.status is RunStatus.POLICY_PASSED:
            done.append(True)
            raise _LambdaLost()

    return interrupt


def _cancel_once_passed(ledger: InMemoryRunLedger, run_id: str) -> Callable[[], None]:
    """A person's cancel, landing once the policy passed (before the next unit opens)."""
    done: list[bool] = []

    def interrupt() -> None:
        run = ledger.get_run(run_id)
        if not done and run.status is RunStatus.POLICY_PASSED:
            done.append(True)
            ledger.move(run, RunStatus.CANCELED, actor="user:ada")

    return interrupt
