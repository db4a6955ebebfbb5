"""What the workflow's own steps read: the run and the parts a step needs come back
in one consistent request, and a step does not read again what it has just written."""

from __future__ import annotations

import pytest

from runplane.domain.errors import RunEnded
from runplane.domain.run import RunKind
from runplane.domain.runner_reports import Failed
from runplane.services.launch_controls import Controls
from runplane.store import run_parts
from runplane.store import workspaces as workspace_store
from runplane.store.prefetch import IdentityMap
from tests.integration.arena import (
    Arena,
    awaiting_approval,
    created,
    plan_complete,
    to_apply_sandbox,
)
from tests.integration.dynamodb_requests import DynamoDBRequests


def reads(operations: list[str]) -> list[str]:
    return [op for op in operations if op != "TransactWriteItems"]


def test_the_policy_step_reads_its_run_and_parts_together(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run whose plan was reported, in an organization with no policy set
    _, run_id = plan_complete(arena, "policy-step-reads")
    plan_json = run_parts.require(run_id, "plan").body["plan_json_artifact_id"]
    requests = DynamoDBRequests(monkeypatch)

    # When the policy step runs, given the run's scope and the plan JSON's ID (as the
    # workflow gives them: the plan step's output names the JSON)
    outcome = arena.orchestration.evaluate_policy(
        run_id, arena.scope_of(run_id), plan_json_artifact_id=plan_json
    )
    sent = list(requests.operations)

    # Then the run passed policy, bound to its input and recorded, and awaits approval
    assert outcome["next"] == "approval"
    assert arena.stack.lifecycle.runs.get(run_id).status.value == "awaiting_approval"
    assert run_parts.require(run_id, "policy").state == "passed"
    assert run_parts.require(run_id, "approval").state == "waiting"
    # And it read the run with its parts, its workspace, the plan JSON's record and the
    # organization's policy-set tally in one request: counting none, no sets' query, and
    # nothing again for the approval
    assert reads(sent) == ["BatchGetItem"]
    # And wrote three times: the move to evaluating with the bind, the results with the
    # move on, the approval with the move to awaiting it (a cancel between two of them
    # refuses the next)
    assert sent.count("TransactWriteItems") == 3


def test_the_policy_step_without_the_workflows_hints_reads_what_it_needs(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run whose plan was reported (an execution started before the plan step's
    # output named the plan JSON)
    _, run_id = plan_complete(arena, "policy-step-no-hints")
    requests = DynamoDBRequests(monkeypatch)
    # When the policy step runs with the run's ID alone
    outcome = arena.orchestration.evaluate_policy(run_id)
    # Then it passes all the same, reading what it needs as it goes, and asks for approval
    assert outcome["next"] == "approval"
    assert run_parts.require(run_id, "policy").state == "passed"
    assert run_parts.require(run_id, "approval").state == "waiting"
    assert requests.operations.count("TransactWriteItems") == 3


def test_the_retired_approval_step_reads_its_run_and_parts_together(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run whose policy step asked for approval
    _, run_id = plan_complete(arena, "approval-step-reads")
    arena.orchestration.evaluate_policy(run_id)
    requests = DynamoDBRequests(monkeypatch)

    # When an execution started before the policy step asked asks for approval (given
    # the run's scope, as the workflow gives it) and its wait starts
    arena.orchestration.request_approval(run_id, arena.scope_of(run_id))
    waiting = arena.orchestration.wait_for_approval(run_id, "token-approval")
    sent = list(requests.operations)

    # Then the run awaits approval with the wait's token stored
    assert waiting == {"waiting": True}
    assert run_parts.require(run_id, "approval").token == "token-approval"
    # And the request step read its run with its parts and workspace in one request,
    # writing nothing; the wait read nothing and wrote its token once
    assert reads(sent) == ["BatchGetItem"]
    assert sent.count("TransactWriteItems") == 1


def test_a_wait_that_starts_after_the_decision_reads_it_and_resumes(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run awaiting approval that was approved before its wait started
    _, run_id = plan_complete(arena, "approval-decided-first")
    arena.orchestration.evaluate_policy(run_id)
    arena.runs.decide(arena.admin, run_id, "approve", None)
    requests = DynamoDBRequests(monkeypatch)
    # When the wait starts
    waiting = arena.orchestration.wait_for_approval(run_id, "token-late")
    sent = list(requests.operations)
    # Then its token's write was refused (writing nothing), it read the decision and
    # resumed itself with it
    assert waiting == {"waiting": False}
    assert run_parts.require(run_id, "approval").token is None
    assert arena.workflow.resumed[-1] == "token-late"
    assert sent == ["TransactWriteItems", "BatchGetItem"]


def test_a_wait_of_a_run_that_ended_writes_nothing_and_ends(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run awaiting approval that was rejected before its wait started
    _, run_id = plan_complete(arena, "approval-rejected-first")
    arena.orchestration.evaluate_policy(run_id)
    arena.runs.decide(arena.admin, run_id, "reject", None)
    # When the wait starts
    # Then it ends with the run, storing no token
    with pytest.raises(RunEnded):
        arena.orchestration.wait_for_approval(run_id, "token-late")
    assert run_parts.require(run_id, "approval").token is None


def test_the_writer_step_reads_its_run_and_workspace_together(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a queued run on a free workspace
    _, run_id = created(arena, "writer-step-reads")
    arena.orchestration.queue(run_id)
    requests = DynamoDBRequests(monkeypatch)

    # When it waits for the writer reservation, given the run's scope
    waited = arena.orchestration.wait_for_writer(run_id, "token-writer", arena.scope_of(run_id))
    sent = list(requests.operations)

    # Then it holds the reservation, after one read of the run with its workspace
    assert waited["held"] is True
    assert reads(sent) == ["BatchGetItem"]
    assert arena.workflow.resumed[-1] == "token-writer"


def test_a_plan_start_reads_its_run_workspace_and_launch_controls_together(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run holding its workspace's writer reservation, and launch controls set
    # for its organization (the platform's are not set: absent means allowed)
    _, run_id = created(arena, "plan-start-reads")
    scope = arena.scope_of(run_id)
    arena.orchestration.queue(run_id)
    arena.orchestration.wait_for_writer(run_id, "token-writer", scope)
    controls = arena.orchestration._launch_controls  # the arena's own instance
    controls.set(arena.admin, "organization", Controls(max_sandboxes=5))
    requests = DynamoDBRequests(monkeypatch)

    # When its plan sandbox starts
    started = arena.orchestration.start_runner(run_id, "plan", "token-plan", scope)
    sent = list(requests.operations)

    # Then it is planning on the state its workspace held, after one read
    assert started["replayed"] is False
    assert arena.stack.lifecycle.runs.get(run_id).status.value == "planning"
    assert reads(sent) == ["BatchGetItem"]


def test_an_apply_result_reads_its_run_attempt_and_record_together(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an approved run whose apply sandbox has started
    _, run_id = awaiting_approval(arena, "apply-result-reads")
    attempt_id = to_apply_sandbox(arena, run_id)["attempt_id"]
    start = arena.apply_start_request(run_id)
    requests = DynamoDBRequests(monkeypatch)

    # When its start is proven and it reports a failed apply
    arena.orchestration.apply_start(*start)
    arena.orchestration.report_apply(
        run_id, attempt_id, Failed(reason="the engine failed", log_artifact_id=None)
    )
    sent = list(requests.operations)

    # Then the run failed its apply and its record says so
    assert arena.stack.lifecycle.runs.get(run_id).status.value == "apply_failed"
    assert run_parts.require(run_id, "apply").state == "failed"
    # And the apply start read the run with its plan, attempt and approval in one request, the
    # result the run with its attempt and apply record in one more; then the result read
    # the workspace (its current state), which the release of the writer reservation
    # takes too (the attempt names the sessions to revoke: no search)
    assert reads(sent) == ["BatchGetItem", "BatchGetItem", "GetItem"]


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_reads_its_run_approval_and_policy_together(
    arena: Arena, monkeypatch: pytest.MonkeyPatch, decision: str
) -> None:
    # Given a run awaiting approval whose workflow waits with its token
    _, run_id = awaiting_approval(arena, f"decision-reads-{decision}")
    requests = DynamoDBRequests(monkeypatch)

    # When a person decides
    decided = arena.runs.decide(arena.admin, run_id, decision, None)
    sent = list(requests.operations)

    # Then the decision is recorded and the wait resumed
    assert decided.token == "token-approval"
    expected = "approved" if decision == "approve" else "rejected"
    assert run_parts.require(run_id, "approval").state == expected
    # And the run, its approval and its policy evidence were read in one request; an
    # approval is then one write, a rejection moves the run (its own reads, then a write)
    assert sent[0] == "BatchGetItem"
    if decision == "approve":
        assert sent == ["BatchGetItem", "TransactWriteItems"]


def test_the_queue_step_takes_a_free_writer_in_its_moves_write(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a created plan_and_apply run in a workspace nobody writes to
    ws_id, run_id = created(arena, "queue-takes-writer")
    requests = DynamoDBRequests(monkeypatch)
    # When the workflow queues it, given its scope
    queued = arena.orchestration.queue(run_id, arena.scope_of(run_id))
    sent = list(requests.operations)
    # Then it holds the writer and skips the wait for it: one read (the run and its
    # workspace), one write (the move with the reservation)
    assert queued["needs_writer"] is False
    assert arena.stack.lifecycle.runs.get(run_id).status.value == "queued"
    assert workspace_store.get_workspace(ws_id, reads=IdentityMap()).writer_run_id == run_id
    assert sent == ["BatchGetItem", "TransactWriteItems"]
    # And a retry of the step (its answer lost) still says it holds it
    assert arena.orchestration.queue(run_id, arena.scope_of(run_id))["needs_writer"] is False


def test_the_queue_step_leaves_a_held_writer_to_the_wait(arena: Arena) -> None:
    # Given a workspace whose writer another run holds, and a second run created there
    ws_id, first = created(arena, "queue-writer-held")
    arena.orchestration.queue(first, arena.scope_of(first))
    _, second = created(arena, "queue-writer-held", workspace_id=ws_id)
    # When the workflow queues the second run
    queued = arena.orchestration.queue(second, arena.scope_of(second))
    # Then it waits for the writer as before: still the first run's, nobody queued yet
    assert queued["needs_writer"] is True
    workspace = workspace_store.get_workspace(ws_id, reads=IdentityMap())
    assert (workspace.writer_run_id, workspace.queue_length) == (first, 0)
    # And its wait queues it behind the holder
    waited = arena.orchestration.wait_for_writer(second, "token-2", arena.scope_of(second))
    assert waited == {"held": False, "position": 1}


def test_a_speculative_run_is_queued_without_the_writer(arena: Arena) -> None:
    # Given a created speculative run
    ws_id, run_id = created(arena, "queue-speculative", kind=RunKind.SPECULATIVE)
    # When the workflow queues it
    queued = arena.orchestration.queue(run_id, arena.scope_of(run_id))
    # Then it neither needs nor takes the writer
    assert queued["needs_writer"] is False
    assert workspace_store.get_workspace(ws_id, reads=IdentityMap()).writer_run_id is None
