"""Typed run-part bodies: each reads the document as stored and gives it back unchanged."""

from __future__ import annotations

from runplane.domain.parts import ApplyRecord, ApprovalBody, AttemptBody, PolicyCheck, RunInput
from runplane.domain.recovery import RecoveryBody
from runplane.domain.schedules import DriftFinding

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


def test_the_sensitive_variable_names_read_from_the_snapshot_and_write_back_unchanged() -> None:
    # Given a snapshot recording sensitive variables, and one from before they were recorded
    body = {**STORED_INPUT, "sensitive_variable_names": ["region"]}

    # When each is read and written back
    # Then the names are typed, absent reads as none, and both documents are unchanged
    assert RunInput.from_body(body).sensitive_variable_names == ("region",)
    assert RunInput.from_body(body).to_body() == body
    assert RunInput.from_body(STORED_INPUT).sensitive_variable_names == ()


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


def test_an_attempt_closed_by_a_report_keeps_its_null_evidence_keys() -> None:
    # Given an attempt as a runner's report closed it (the evidence keys written, null or not)
    reported: dict[str, object] = {
        "attempt_id": "att-3",
        "sandbox_id": "sbx-3",
        "phase": "apply",
        "launched_at": "2026-01-01T00:00:00+00:00",
        "slots": [],
        "lock_id": "lock-1",
        "fence": 2,
        "finished_at": "2026-01-01T00:05:00+00:00",
        "log_artifact_id": "art-log",
        "engine_seconds": 1.5,
        "reason": None,
    }
    attempt = AttemptBody.from_body(reported)
    # Then its log and engine time read typed, and it writes back unchanged
    assert (attempt.log_artifact_id, attempt.engine_seconds, attempt.reason) == (
        "art-log",
        1.5,
        None,
    )
    assert attempt.to_body() == reported
    # And an attempt closed without a report (a loss, a cancel) has no evidence keys
    lost = {
        k: v
        for k, v in reported.items()
        if k not in {"log_artifact_id", "engine_seconds", "reason"}
    }
    assert AttemptBody.from_body(lost).to_body() == lost
    assert AttemptBody.from_body(lost).log_artifact_id is None
    # And one whose report named a log it could not vouch for says why it has none
    refused = {**reported, "log_artifact_id": None, "log_refused": "not this attempt's"}
    assert AttemptBody.from_body(refused).log_refused == "not this attempt's"
    assert AttemptBody.from_body(refused).to_body() == refused


def test_a_reported_and_then_recovered_apply_record_round_trips() -> None:
    reported: dict[str, object] = {
        "attempt_id": "att-2",
        "lock_id": "lock-1",
        "fence": 4,
        "resulting_state_version_id": None,
        "state_published": False,
        "reason": None,
        "authorization": "revoked",
        "recovery_id": "rec-1",
    }
    record = ApplyRecord.from_body(reported)
    assert (record.authorization, record.recovery_id) == ("revoked", "rec-1")
    assert record.to_body() == reported


RECORDED_CHECK: dict[str, object] = {
    "id": "pc-1",
    "input_digest": "sha256:in",
    "outcome": "soft_failed",
    "policy_sets": [
        {"name": "base", "digest": "d", "input_shape": "runplane", "input_digest": "i"}
    ],
    "runtime": "rego-v0",
    "results": [{"policy_set": "base", "policy": "tags", "passed": False}],
    "result_digest": "sha256:out",
    "override": {"by": "user:ada", "reason": "known exception"},
}


def test_a_recorded_and_overridden_policy_check_round_trips() -> None:
    check = PolicyCheck.from_body(RECORDED_CHECK)
    assert (check.outcome, check.result_digest) == ("soft_failed", "sha256:out")
    assert check.override == {"by": "user:ada", "reason": "known exception"}
    assert check.to_body() == RECORDED_CHECK


def test_a_reserved_policy_check_has_only_its_id_and_a_null_digest() -> None:
    # Given the check as the plan's commit reserves it
    reserved: dict[str, object] = {"id": "pc-1", "input_digest": None}
    check = PolicyCheck.from_body(reserved)
    # Then nothing recorded reads back, and it writes back unchanged
    assert (check.outcome, check.results, check.result_digest, check.override) == (
        None,
        None,
        None,
        None,
    )
    assert check.to_body() == reserved


PREPARED_IMPORT: dict[str, object] = {
    "resolution": "import_emergency_state",
    "reason": "the apply was interrupted",
    "prepared_by": "user:ada",
    "current_state_version_id": "sv-1",
    "pre_apply_state_version_id": "sv-1",
    "takeovers": [{"from": "user:ada", "to": "user:bob", "at": "t", "reason": "r"}],
    "discard_claimed_upload": {"id": "sv-2", "claimed_at": "2026-01-01T00:00:00+00:00"},
    "emergency_state": {"sha256": "e" * 64, "size": 120},
    "target_state_version_id": "sv-3",
    "result": {"recovery_id": "rec-1", "fence": 3},
}


def test_a_completed_import_recovery_round_trips() -> None:
    recovery = RecoveryBody.from_body(PREPARED_IMPORT)
    assert (recovery.emergency_sha256, recovery.emergency_size) == ("e" * 64, 120)
    assert recovery.discard_claimed_upload == {
        "id": "sv-2",
        "claimed_at": "2026-01-01T00:00:00+00:00",
    }
    assert recovery.to_body() == PREPARED_IMPORT


def test_a_prepared_verification_recovery_has_no_import_keys() -> None:
    optional = {"discard_claimed_upload", "emergency_state", "target_state_version_id", "result"}
    prepared = {k: v for k, v in PREPARED_IMPORT.items() if k not in optional}
    prepared |= {"resolution": "current_state_verified", "takeovers": []}
    recovery = RecoveryBody.from_body(prepared)
    assert (recovery.emergency_state, recovery.result, recovery.takeovers) == (None, None, ())
    assert recovery.to_body() == prepared


def test_both_shapes_of_the_drift_record_round_trip() -> None:
    found: dict[str, object] = {
        "schedule_id": "sch-1",
        "summary": {"adds": 1, "changes": 0, "destroys": 0, "replaces": 0, "drifted": 2},
        "cleared_by": None,
    }
    cleared: dict[str, object] = {"cleared_by": "apply", "previous_run_id": "run-1"}
    assert DriftFinding.from_body(found).summary == found["summary"]
    assert DriftFinding.from_body(found).to_body() == found
    assert DriftFinding.from_body(cleared).schedule_id is None
    assert DriftFinding.from_body(cleared).to_body() == cleared
