"""Typed run-part bodies: each reads the document as stored and gives it back unchanged."""

from __future__ import annotations

from runplane.domain.parts import ApplyRecord, ApprovalBody, AttemptBody, RunInput

# The input snapshot as run creation stores it (a schedule's run, with its extras).
STORED_INPUT: dict[str, object] = {
    "configuration_version_id": "cv-1",
    "configuration_artifact_id": "art-1",
    "configuration_sha256": "c0ffee",
    "variables_artifact_id": None,
    "variable_names": ["region", "size"],
    "workspace_variable_names": ["region"],
    "engine_version": "1.0.3",
    "workspace_name": "network",
    "organization_name": "acme",
    "schedule": {"schedule_id": "sch-1"},
}


def test_a_stored_input_snapshot_round_trips_keys_and_all() -> None:
    # Given the snapshot creation stored
    # When it is read as a typed body and written back
    snapshot = RunInput.from_body(STORED_INPUT)
    # Then its named fields are typed and the document is unchanged
    assert snapshot.variable_names == ("region", "size")
    assert snapshot.schedule == {"schedule_id": "sch-1"}
    assert snapshot.extra == {"workspace_name": "network", "organization_name": "acme"}
    assert snapshot.to_body() == STORED_INPUT


def test_an_input_snapshot_without_its_optional_keys_reads_as_none() -> None:
    body = {k: v for k, v in STORED_INPUT.items() if k != "schedule"}
    snapshot = RunInput.from_body(body)
    assert (snapshot.message, snapshot.trigger, snapshot.schedule, snapshot.source) == (
        None,
        None,
        None,
        None,
    )
    assert snapshot.to_body() == body
    assert RunInput.from_body({}).variable_names == ()


DECIDED_APPROVAL: dict[str, object] = {
    "expires_at": "2026-01-02T00:00:00+00:00",
    "binding": {
        "plan_sha256": "p1",
        "predecessor_state_version_id": None,
        "policy_input_digest": "sha256:in",
        "policy_result_digest": "sha256:out",
        "policy_override": {"by": "user:ada", "reason": "known exception"},
    },
    "decision": "approve",
    "decided_by": "user:ada",
    "decided_at": "2026-01-01T10:00:00+00:00",
    "comment": "ship it",
}


def test_a_decided_approval_with_an_override_round_trips() -> None:
    approval = ApprovalBody.from_body(DECIDED_APPROVAL)
    assert approval.decided_by == "user:ada"
    assert approval.binding.policy_override == {"by": "user:ada", "reason": "known exception"}
    assert approval.to_body() == DECIDED_APPROVAL


def test_a_waiting_approval_has_no_decision_keys_and_its_binding_is_compared_by_field() -> None:
    # Given an approval as the workflow created it (no decision, no override)
    waiting = {
        "expires_at": "2026-01-02T00:00:00+00:00",
        "binding": {
            "plan_sha256": "p1",
            "predecessor_state_version_id": "sv-1",
            "policy_input_digest": None,
            "policy_result_digest": None,
        },
    }
    approval = ApprovalBody.from_body(waiting)
    # Then it reads back without the decision's keys, unchanged
    assert (approval.decision, approval.decided_by, approval.comment) == (None, None, None)
    assert approval.to_body() == waiting
    # And a decision bound to another plan names the field that differs
    assert approval.binding.differs({"plan_sha256": "p2"}) == "plan_sha256"
    assert approval.binding.differs({"plan_sha256": "p1"}) is None


def test_a_closed_attempt_keeps_its_reason_and_an_open_one_has_none() -> None:
    launched: dict[str, object] = {
        "attempt_id": "att-1",
        "sandbox_id": "sbx-1",
        "phase": "plan",
        "launched_at": "2026-01-01T00:00:00+00:00",
        "slots": ["org-1"],
    }
    closed = {**launched, "finished_at": "2026-01-01T00:05:00+00:00", "reason": "boom"}
    assert AttemptBody.from_body(closed).reason == "boom"
    assert AttemptBody.from_body(closed).to_body() == closed
    assert AttemptBody.from_body(launched).reason is None
    assert AttemptBody.from_body(launched).to_body() == launched


def test_a_closed_apply_record_keeps_why_and_how_it_closed() -> None:
    granted: dict[str, object] = {
        "attempt_id": "att-2",
        "lock_id": "lock-1",
        "fence": 4,
        "resulting_state_version_id": None,
    }
    closed = {**granted, "state_published": False, "reason": "the run ended canceled"}
    record = ApplyRecord.from_body(closed)
    assert (record.reason, record.state_published, record.run_status) == (
        "the run ended canceled",
        False,
        None,
    )
    assert record.to_body() == closed
    assert ApplyRecord.from_body(granted).to_body() == granted
    assert ApplyRecord().to_body() == {"resulting_state_version_id": None}
