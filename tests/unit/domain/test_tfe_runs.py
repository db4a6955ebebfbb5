"""The one table from managed-run statuses to what TFE clients read."""

from __future__ import annotations

import pytest

from runplane.domain.run import ACTIVE_STATUSES, RunKind, RunStatus, StageStatus
from runplane.domain.tfe_runs import (
    APPLY_PREFIX,
    PLAN_PREFIX,
    POLICY_CHECK_PREFIX,
    RUN_STATUS_TABLE,
    RunFacts,
    TfeRunStatus,
    apply_status,
    derived_id,
    is_cancelable,
    is_confirmable,
    is_discardable,
    plan_status,
    policy_check_status,
    run_of,
    tfe_status,
    waits_behind,
)

S, T, K = RunStatus, TfeRunStatus, RunKind
RUN = "run-" + "a" * 26
AHEAD = "run-" + "b" * 26


def facts(status: RunStatus, **more: object) -> RunFacts:
    values: dict[str, object] = {
        "status": status,
        "kind": RunKind.PLAN_AND_APPLY,
        "applied": False,
        "approval": None,
        "policy": None,
    }
    values.update(more)
    return RunFacts(**values)  # type: ignore[arg-type]


def test_every_run_status_has_a_tfe_status() -> None:
    # Given the table, Then it covers every status exactly once
    assert set(RUN_STATUS_TABLE) == set(RunStatus)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (S.DISPATCH_PENDING, T.PLAN_QUEUED),
        (S.QUEUED, T.PLAN_QUEUED),
        (S.PLANNING, T.PLANNING),
        (S.POLICY_EVALUATING, T.POLICY_CHECKING),
        (S.APPLYING, T.APPLYING),
        (S.PLAN_FAILED, T.ERRORED),
        (S.POLICY_FAILED, T.ERRORED),
        (S.REJECTED, T.DISCARDED),
        (S.EXPIRED, T.DISCARDED),
        (S.CANCELED, T.CANCELED),
        (S.APPLY_START_UNCERTAIN, T.ERRORED),
        (S.APPLY_INTERRUPTED, T.ERRORED),
        (S.NEEDS_RECOVERY, T.ERRORED),
    ],
)
def test_statuses_map_as_the_client_expects(status: RunStatus, expected: TfeRunStatus) -> None:
    assert tfe_status(facts(status)) is expected


@pytest.mark.parametrize("status", [S.DISPATCH_PENDING, S.QUEUED])
def test_a_run_behind_another_runs_reservation_reads_pending(status: RunStatus) -> None:
    # Given a plan_and_apply run not started while another run holds the workspace
    behind = waits_behind(RUN, K.PLAN_AND_APPLY, status, holder=AHEAD)
    waiting = facts(status, waiting_for=behind)

    # Then it waits behind that run: pending, its plan pending too, and cancelable
    assert behind == AHEAD
    assert tfe_status(waiting) is T.PENDING
    assert plan_status(waiting) == "pending"
    assert is_cancelable(waiting) is True
    # And once nobody else holds the workspace it is queued to plan, as before
    assert tfe_status(facts(status)) is T.PLAN_QUEUED


@pytest.mark.parametrize(
    ("kind", "status", "holder"),
    [
        # The holder itself, before it plans
        (K.PLAN_AND_APPLY, S.QUEUED, RUN),
        # Nobody holds the workspace
        (K.PLAN_AND_APPLY, S.QUEUED, None),
        # Runs that never take the reservation plan while another run holds it
        (K.SPECULATIVE, S.QUEUED, AHEAD),
        (K.PLAN_ONLY, S.DISPATCH_PENDING, AHEAD),
        (K.REFRESH_ONLY, S.QUEUED, AHEAD),
        # A run that started (it held the reservation to plan) waits behind nobody
        (K.PLAN_AND_APPLY, S.PLANNING, AHEAD),
        (K.PLAN_AND_APPLY, S.AWAITING_APPROVAL, AHEAD),
        (K.PLAN_AND_APPLY, S.CANCELED, AHEAD),
    ],
)
def test_only_a_run_that_needs_the_reservation_and_has_not_started_waits(
    kind: RunKind, status: RunStatus, holder: str | None
) -> None:
    assert waits_behind(RUN, kind, status, holder) is None


def test_success_reads_applied_only_when_the_apply_stage_completed() -> None:
    # Given succeeded runs that did and did not apply
    # Then one reads applied and the other planned_and_finished
    assert tfe_status(facts(S.SUCCEEDED, applied=True)) is T.APPLIED
    assert tfe_status(facts(S.SUCCEEDED, kind=RunKind.SPECULATIVE)) is T.PLANNED_AND_FINISHED


def test_a_run_awaiting_a_decision_is_confirmable_discardable_and_not_cancelable() -> None:
    # Given a run awaiting approval after its policy passed
    waiting = facts(S.AWAITING_APPROVAL, approval="waiting", policy="passed")
    # Then it reads policy_checked, can be confirmed or discarded, and is not canceled
    assert tfe_status(waiting) is T.POLICY_CHECKED
    assert (is_confirmable(waiting), is_discardable(waiting)) == (True, True)
    assert is_cancelable(waiting) is False


def test_a_soft_failed_policy_is_not_confirmable_but_can_be_discarded() -> None:
    soft = facts(S.AWAITING_APPROVAL, approval="waiting", policy="soft_failed")
    assert tfe_status(soft) is T.POLICY_SOFT_FAILED
    assert (is_confirmable(soft), is_discardable(soft)) == (False, True)


def test_an_approved_run_waiting_for_its_apply_reads_confirmed() -> None:
    approved = facts(S.AWAITING_APPROVAL, approval="approved", policy="passed")
    assert tfe_status(approved) is T.CONFIRMED
    assert (is_confirmable(approved), is_discardable(approved)) == (False, False)
    assert apply_status(approved) == "queued"


def test_only_active_runs_are_cancelable() -> None:
    for status in RunStatus:
        expected = status in ACTIVE_STATUSES and status is not S.AWAITING_APPROVAL
        assert is_cancelable(facts(status)) is expected, status


def test_the_policy_check_stays_pending_until_the_run_rests_where_someone_can_act() -> None:
    # Given a run whose policy passed but which is not awaiting approval yet
    moving = facts(S.POLICY_PASSED, policy="passed")
    # Then the client, which waits on the check, keeps waiting
    assert policy_check_status(moving) == "pending"
    # And once the run awaits approval the result shows, as TFE names it
    assert policy_check_status(facts(S.AWAITING_APPROVAL, policy="passed")) == "passed"
    assert policy_check_status(facts(S.POLICY_FAILED, policy="failed")) == "hard_failed"
    assert policy_check_status(facts(S.AWAITING_APPROVAL, policy="soft_failed")) == "soft_failed"
    # And a run that ended before its policy was evaluated does not keep the client waiting
    assert policy_check_status(facts(S.PLAN_FAILED)) == "unreachable"
    assert policy_check_status(facts(S.CANCELED)) == "canceled"


@pytest.mark.parametrize(
    ("status", "stage", "expected"),
    [
        (S.QUEUED, None, "queued"),
        (S.DISPATCH_PENDING, None, "pending"),
        (S.PLANNING, StageStatus.RUNNING, "running"),
        (S.POLICY_EVALUATING, StageStatus.COMPLETED, "finished"),
        (S.PLAN_FAILED, StageStatus.FAILED, "errored"),
        (S.CANCELED, StageStatus.FAILED, "canceled"),
        (S.CANCELED, None, "canceled"),
    ],
)
def test_plan_status_follows_the_plan_stage(
    status: RunStatus, stage: StageStatus | None, expected: str
) -> None:
    assert plan_status(facts(status, plan_stage=stage)) == expected


@pytest.mark.parametrize(
    ("status", "stage", "expected"),
    [
        (S.AWAITING_APPROVAL, None, "pending"),
        (S.APPLYING, StageStatus.RUNNING, "running"),
        (S.SUCCEEDED, StageStatus.COMPLETED, "finished"),
        (S.APPLY_FAILED, StageStatus.FAILED, "errored"),
        (S.APPLY_INTERRUPTED, StageStatus.FAILED, "canceled"),
        (S.REJECTED, StageStatus.SKIPPED, "unreachable"),
        (S.CANCELED, StageStatus.SKIPPED, "canceled"),
    ],
)
def test_apply_status_follows_the_apply_stage(
    status: RunStatus, stage: StageStatus | None, expected: str
) -> None:
    assert apply_status(facts(status, apply_stage=stage)) == expected


def test_plan_apply_and_policy_check_ids_lead_back_to_their_run_only() -> None:
    for prefix in (PLAN_PREFIX, APPLY_PREFIX, POLICY_CHECK_PREFIX):
        derived = derived_id(prefix, RUN)
        assert run_of(derived, prefix) == RUN
    # A plan ID is not an apply ID, and malformed IDs name no run
    assert run_of(derived_id(PLAN_PREFIX, RUN), APPLY_PREFIX) is None
    assert run_of("plan-../../x", PLAN_PREFIX) is None
    assert run_of("plan-" + "a" * 27, PLAN_PREFIX) is None
