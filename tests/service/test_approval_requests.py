"""The workflow's approval steps over the in-memory unit of work: asking for approval
(the approval bound to the plan and policy results, the deadline from the workspace's
window) and storing the approval wait's token, which a decision already recorded
resumes at once."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from runplane.domain.entities import Run
from runplane.domain.errors import RunEnded
from runplane.domain.parts import ApprovalState, RunPart
from runplane.domain.run import RunStatus
from tests.service.conftest import Tier
from tests.service.scenarios import approving_workspace, run_at, settle, written

PLAN = {
    "attempt_id": "att-plan",
    "plan_artifact_id": "art-plan",
    "plan_sha256": "p" * 64,
    "plan_json_artifact_id": "art-json",
    "plan_json_sha256": "j" * 64,
}
POLICY = {"input_digest": "in-1", "result_digest": "out-1"}


def passed_policy(tier: Tier, window: int | None = None) -> Run:
    """``run-1`` of ``ws-1`` whose policy passed (its plan and policy recorded), pinned to
    state ``sv-1``; the workspace's approval window is ``window`` seconds, if set."""
    ledger, now = tier.run_reader, tier.clock.now()
    run = run_at(tier, RunStatus.POLICY_PASSED)
    ledger.runs[run.id] = replace(run, predecessor_sv_id="sv-1")
    ledger.add_part(RunPart(run.id, "plan", "recorded", PLAN, None, now, now))
    ledger.add_part(RunPart(run.id, "policy", "passed", POLICY, None, now, now))
    approving_workspace(tier, window)
    settle(tier)
    return ledger.get_run(run.id)


def test_the_approval_binds_what_was_reviewed_and_waits_for_the_workspaces_window(
    tier: Tier,
) -> None:
    # Given a run whose policy passed, in a workspace whose approvals wait one hour
    run = passed_policy(tier, window=3600)
    # When the workflow asks for approval
    start = tier.clock.now()
    asked = tier.steps.request_approval(run.id)
    end = tier.clock.now()
    # Then the approval waits, bound to the plan, the pinned state and the policy results
    approval = tier.run_reader.parts(run.id)["approval"]
    assert approval.state == ApprovalState.WAITING
    assert approval.body["binding"] == {
        "plan_sha256": PLAN["plan_sha256"],
        "predecessor_state_version_id": "sv-1",
        "policy_input_digest": "in-1",
        "policy_result_digest": "out-1",
    }
    # And the run awaits it until the deadline, which the wait outlasts by a second
    moved = tier.run_reader.get_run(run.id)
    deadline = moved.approval_expires_at
    assert moved.status is RunStatus.AWAITING_APPROVAL
    assert deadline is not None
    assert start + timedelta(hours=1) < deadline < end + timedelta(hours=1)
    assert approval.body["expires_at"] == deadline.isoformat()
    assert asked == {"timeout_seconds": 3601}
    assert [event.type for event in tier.run_reader.audit] == ["run.approval_requested"]


def test_without_a_workspace_window_the_deployments_applies(tier: Tier) -> None:
    run = passed_policy(tier)
    start = tier.clock.now()
    asked = tier.steps.request_approval(run.id)
    deadline = tier.run_reader.get_run(run.id).approval_expires_at
    assert deadline is not None
    # The tier's workflow steps keep the default window (seven days).
    assert timedelta(days=7) < deadline - start < timedelta(days=7, seconds=1)
    assert asked == {"timeout_seconds": 7 * 24 * 3600 + 1}


def test_asking_again_writes_nothing_and_waits_only_until_the_persisted_deadline(
    tier: Tier,
) -> None:
    # Given an approval asked for ten minutes ago, with a one-hour window
    run = passed_policy(tier, window=3600)
    tier.steps.request_approval(run.id)
    tier.clock.advance(timedelta(minutes=10))
    before = written(tier)
    # When the step runs again (a retry)
    asked = tier.steps.request_approval(run.id)
    # Then nothing is written and the wait is what remains of the deadline
    assert written(tier) == before
    assert asked == {"timeout_seconds": 50 * 60 + 1}


def test_an_ended_run_is_not_asked_for_approval(tier: Tier) -> None:
    run = passed_policy(tier, window=3600)
    tier.run_reader.move(run, RunStatus.CANCELED, actor="user:ada")
    before = written(tier)
    with pytest.raises(RunEnded):
        tier.steps.request_approval(run.id)
    assert written(tier) == before


def test_the_waits_token_is_stored_while_the_approval_waits(tier: Tier) -> None:
    # Given a run awaiting approval
    run = passed_policy(tier, window=3600)
    tier.steps.request_approval(run.id)
    # When the workflow's wait stores its token
    waited = tier.steps.wait_for_approval(run.id, "tok-wait")
    # Then the approval holds it and nothing is resumed
    assert waited == {"waiting": True}
    assert tier.run_reader.parts(run.id)["approval"].token == "tok-wait"
    assert tier.workflow.resumed == []


def test_a_decision_recorded_first_resumes_the_wait_at_once(tier: Tier) -> None:
    # Given an approval decided before the wait stored its token
    run = passed_policy(tier, window=3600)
    tier.steps.request_approval(run.id)
    _decide(tier, run.id, "approve")
    before = written(tier)
    # When the wait starts
    waited = tier.steps.wait_for_approval(run.id, "tok-wait")
    # Then it is resumed with the decision, and nothing is written
    assert waited == {"waiting": False}
    assert tier.workflow.resumed == [("tok-wait", {"decision": "approve"})]
    assert written(tier)[0] == before[0]


def test_a_decision_landing_between_the_waits_read_and_write_resumes_it(tier: Tier) -> None:
    # Given an approval that is rejected just after the wait read it waiting
    run = passed_policy(tier, window=3600)
    tier.steps.request_approval(run.id)
    tier.clock.on_next_reading(lambda: _decide(tier, run.id, "reject"))
    # When the wait stores its token
    waited = tier.steps.wait_for_approval(run.id, "tok-wait")
    # Then the token's write is refused and the wait resumes with the rejection
    assert waited == {"waiting": False}
    assert tier.workflow.resumed == [("tok-wait", {"decision": "reject"})]
    assert tier.run_reader.parts(run.id)["approval"].token is None


def _decide(tier: Tier, run_id: str, decision: str) -> None:
    """A reviewer's decision, as the approval records it (the run's move aside)."""
    ledger = tier.run_reader
    approval = ledger.parts(run_id)["approval"]
    state = ApprovalState.APPROVED if decision == "approve" else ApprovalState.REJECTED
    body = {**approval.body, "decision": decision, "decided_by": "user:bob"}
    ledger.set_part(replace(approval, state=str(state), body=body))
