"""Ephemeral workspaces over the in-memory stores, on a fake clock: the auto-destroy's
whole timeline (notices 24 h and 1 h before, a postponement, the destroy run once due,
a failure notified and retried with backoff, the destroy carried out once), inactivity
counted from the last state change, the approval an opted-in workspace gives, and the
refusals that write nothing."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from runplane.domain.auto_destroy import AutoDestroy, AutoDestroySettings
from runplane.domain.entities import Run, Workspace
from runplane.domain.errors import (
    AutoDestroyUnderway,
    ConcurrentChange,
    InvalidInput,
    NotFound,
)
from runplane.domain.identity import Forbidden, Principal, PrincipalKind
from runplane.domain.parts import ApprovalState, RunPart
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.run_events import EventType
from runplane.domain.run_options import RunOptions
from runplane.domain.transitions import MAIN_PATH
from tests.service.conftest import Tier
from tests.service.scenarios import awaiting_approval, reader_beside
from tests.service.test_run_creation import _runs_of, _uploaded

HOUR = timedelta(hours=1)


def _armed(tier: Tier, **settings: object) -> tuple[Principal, Workspace]:
    """An admin and a workspace with an uploaded configuration and ``settings`` set."""
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    workspace = tier.workspaces.create(admin, "acme", "preview")
    _uploaded(tier, workspace)
    tier.auto_destroys.set(admin, workspace.id, AutoDestroySettings(**settings))  # type: ignore[arg-type]
    return admin, workspace


def _notices(tier: Tier) -> list[tuple[str, str | None, str]]:
    return [
        (e.type.value, e.details.get("notice"), e.details.get("destroy_at", ""))
        for e in tier.notified
    ]


def _end(tier: Tier, run_id: str, status: RunStatus, reason: str | None = None) -> None:
    """The destroy run ended with ``status`` (the workflow's doing, not under test)."""
    run = tier.run_reader.get_run(run_id)
    tier.run_reader.runs[run_id] = replace(run, status=status, status_reason=reason)


def test_the_whole_timeline_notices_postponement_failure_retry_and_destroy(tier: Tier) -> None:
    # Given a workspace set to destroy itself in 48 hours
    start = tier.clock.current
    admin, ws = _armed(tier, destroy_at=(start + 48 * HOUR).replace(microsecond=0))
    due = tier.auto_destroys.get(admin, ws.id)["due_at"]

    # When the sweep runs long before it is due, then it does nothing
    assert tier.auto_destroys.sweep() == {"waiting": 1}
    assert tier.notified == []

    # When 24 hours are left, then the 24 h notice goes out, once
    tier.clock.advance(24 * HOUR + timedelta(minutes=1))
    assert tier.auto_destroys.sweep() == {"noticed": 1}
    assert tier.auto_destroys.sweep() == {"waiting": 1}
    assert _notices(tier) == [("auto_destroy_scheduled", "24h", due)]
    notice = tier.notified[0]
    assert notice.run_id is None
    assert notice.status is None
    assert notice.details["postpone"] == "runplane workspace auto-destroy preview postpone --by 24h"

    # When one hour is left, then the 1 h notice goes out
    tier.clock.advance(23 * HOUR)
    assert tier.auto_destroys.sweep() == {"noticed": 1}
    assert _notices(tier)[-1] == ("auto_destroy_scheduled", "1h", due)

    # When a person postpones it by three hours
    later = datetime.fromisoformat(due) + 3 * HOUR
    view = tier.auto_destroys.postpone(admin, ws.id, later)

    # Then it is due later, the postponement audited; the next sweep gives the notice
    # for the new time (inside its 24 hours), then the 1 h one when it comes
    assert view["due_at"] == later.isoformat()
    assert tier.auto_destroy_store.audit[-1].type == "workspace.auto_destroy_postponed"
    assert tier.auto_destroys.sweep() == {"noticed": 1}
    assert _notices(tier)[-1] == ("auto_destroy_scheduled", "24h", later.isoformat())
    tier.clock.advance(3 * HOUR)
    assert tier.auto_destroys.sweep() == {"noticed": 1}
    assert _notices(tier)[-1] == ("auto_destroy_scheduled", "1h", later.isoformat())
    assert _runs_of(tier, ws.id) == []

    # When it is due, then a destroy run of the latest configuration is created
    tier.clock.advance(timedelta(hours=1))
    assert tier.auto_destroys.sweep() == {"launched": 1}
    [first] = _runs_of(tier, ws.id)
    assert first.kind is RunKind.PLAN_AND_APPLY
    assert first.created_by == f"system:auto-destroy:{ws.id}"
    snapshot = tier.run_reader.parts(first.id)["input"].body
    assert RunOptions.from_body(snapshot["options"]) == RunOptions(destroy=True)
    assert snapshot["auto_destroy"]["due_at"] == later.isoformat()
    assert tier.auto_destroys.sweep() == {"waiting": 1}

    # When that run fails, then the failure is notified with its retry, 30 minutes on
    _end(tier, first.id, RunStatus.PLAN_FAILED, "provider error")
    assert tier.auto_destroys.sweep() == {"failed": 1}
    failed = tier.notified[-1]
    assert (failed.type, failed.run_id, failed.status) == (
        EventType.AUTO_DESTROY_FAILED,
        first.id,
        RunStatus.PLAN_FAILED,
    )
    assert "provider error" in (failed.reason or "")
    retry_at = datetime.fromisoformat(failed.details["next_attempt_at"])
    assert timedelta(minutes=29) < retry_at - tier.clock.current <= timedelta(minutes=30)

    # When the sweep runs before the retry, nothing starts; after it, a second run does
    tier.clock.advance(timedelta(minutes=10))
    assert tier.auto_destroys.sweep() == {"waiting": 1}
    tier.clock.advance(timedelta(minutes=21))
    assert tier.auto_destroys.sweep() == {"launched": 1}
    second = _runs_of(tier, ws.id)[0]
    assert second.id != first.id
    assert tier.run_reader.parts(second.id)["input"].body["auto_destroy"]["attempt"] == 2

    # When it succeeds, then the workspace counts as destroyed and nothing more happens
    _end(tier, second.id, RunStatus.SUCCEEDED)
    assert tier.auto_destroys.sweep() == {"destroyed": 1}
    view = tier.auto_destroys.get(admin, ws.id)
    assert (view["last_outcome"], view["due_at"], view["active_run_id"]) == (
        "destroyed",
        None,
        None,
    )
    tier.clock.advance(30 * 24 * HOUR)
    assert tier.auto_destroys.sweep() == {"waiting": 1}
    assert len(_runs_of(tier, ws.id)) == 2


def test_the_backoff_doubles_up_to_a_day_and_every_failure_is_notified(tier: Tier) -> None:
    # Given a workspace whose destroy is due now
    _admin, ws = _armed(tier, destroy_at=(tier.clock.current + 2 * HOUR).replace(microsecond=0))
    tier.clock.advance(2 * HOUR)
    waits = []

    # When each destroy run fails as soon as it starts
    for _ in range(8):
        assert tier.auto_destroys.sweep() == {"launched": 1}
        _end(tier, _runs_of(tier, ws.id)[0].id, RunStatus.APPLY_FAILED)
        assert tier.auto_destroys.sweep() == {"failed": 1}
        retry_at = datetime.fromisoformat(tier.notified[-1].details["next_attempt_at"])
        waits.append(round((retry_at - tier.clock.current).total_seconds() / 60))
        tier.clock.current = retry_at

    # Then the waits double from 30 minutes and stop at a day; each failure was told
    assert waits == [30, 60, 120, 240, 480, 960, 1440, 1440]
    failures = [e for e in tier.notified if e.type is EventType.AUTO_DESTROY_FAILED]
    assert len({e.id for e in failures}) == 8


def test_a_workspace_with_no_configuration_fails_to_start_and_says_so(tier: Tier) -> None:
    # Given a workspace that never uploaded a configuration, due now
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    ws = tier.workspaces.create(admin, "acme", "empty")
    at = (tier.clock.current + 2 * HOUR).replace(microsecond=0)
    tier.auto_destroys.set(admin, ws.id, AutoDestroySettings(destroy_at=at))
    tier.clock.advance(3 * HOUR)

    # When the sweep runs
    outcome = tier.auto_destroys.sweep()

    # Then no run exists, and the failure is notified with its reason and retry
    assert outcome == {"failed": 1}
    assert _runs_of(tier, ws.id) == []
    failed = tier.notified[-1]
    assert failed.type is EventType.AUTO_DESTROY_FAILED
    assert failed.run_id is None
    assert "no uploaded configuration" in (failed.reason or "")


def test_inactivity_counts_from_the_last_state_change(tier: Tier) -> None:
    # Given a workspace to destroy after 3 days without a state change
    admin, ws = _armed(tier, destroy_after_inactivity=timedelta(days=3))
    set_at = tier.clock.current

    # When its state changes a day later
    tier.clock.advance(24 * HOUR)
    tier.auto_destroy_store.activity[ws.id] = tier.clock.current

    # Then it is due three days after that change, not after the setting
    due = datetime.fromisoformat(tier.auto_destroys.get(admin, ws.id)["due_at"])
    assert due - tier.auto_destroy_store.activity[ws.id] == timedelta(days=3)
    tier.clock.current = set_at + timedelta(days=3, minutes=1)
    assert tier.auto_destroys.sweep() == {"noticed": 1}
    tier.clock.current = due + timedelta(minutes=1)
    assert tier.auto_destroys.sweep() == {"launched": 1}

    # And once destroyed (its state published by the destroy), a later change re-arms it
    run = _runs_of(tier, ws.id)[0]
    tier.auto_destroy_store.activity[ws.id] = tier.clock.current
    _end(tier, run.id, RunStatus.SUCCEEDED)
    assert tier.auto_destroys.sweep() == {"destroyed": 1}
    assert tier.auto_destroys.get(admin, ws.id)["due_at"] is None
    tier.clock.advance(HOUR)
    tier.auto_destroy_store.activity[ws.id] = tier.clock.current
    assert tier.auto_destroys.get(admin, ws.id)["due_at"] is not None


def test_an_opted_in_workspace_approves_its_destroy_run_and_nothing_else(tier: Tier) -> None:
    # Given a destroy run awaiting approval, of a workspace that opted into auto-apply
    run = awaiting_approval(tier, policy="passed")
    record = _record_for(tier, run.workspace_id, run.id, auto_apply=True)
    tier.auto_destroy_store.records[run.workspace_id] = record

    # When the sweep runs
    assert tier.auto_destroys.sweep() == {"approved": 1}

    # Then the run is approved by the auto-destroy, naming who opted in, and resumed
    approval = tier.run_reader.parts(run.id)["approval"]
    assert approval.state == ApprovalState.APPROVED
    assert approval.body["decided_by"] == f"system:auto-destroy:{run.workspace_id}"
    assert "set by user:ada" in approval.body["comment"]
    assert len(tier.workflow.resumed) == 1


def test_without_the_opt_in_the_destroy_run_waits_for_a_person(tier: Tier) -> None:
    # Given a destroy run awaiting approval, of a workspace that did not opt in
    run = awaiting_approval(tier, policy="passed")
    tier.auto_destroy_store.records[run.workspace_id] = _record_for(
        tier, run.workspace_id, run.id, auto_apply=False
    )

    # When the sweep runs, then the approval still waits
    assert tier.auto_destroys.sweep() == {"waiting": 1}
    assert tier.run_reader.parts(run.id)["approval"].state == ApprovalState.WAITING
    assert tier.workflow.resumed == []


def test_a_soft_failed_policy_is_left_to_people_even_with_the_opt_in(tier: Tier) -> None:
    # Given an opted-in destroy run whose policy soft-failed
    run = awaiting_approval(tier, policy="soft_failed")
    tier.auto_destroy_store.records[run.workspace_id] = _record_for(
        tier, run.workspace_id, run.id, auto_apply=True
    )

    # When the sweep runs, then it approves nothing: an override is a person's
    assert tier.auto_destroys.sweep() == {"waiting": 1}
    assert tier.run_reader.parts(run.id)["approval"].state == ApprovalState.WAITING


def test_refusals_write_nothing(tier: Tier) -> None:
    # Given an armed workspace, a reader, and another organization's admin
    admin, ws = _armed(tier, destroy_at=(tier.clock.current + 48 * HOUR).replace(microsecond=0))
    reader = reader_beside(admin)
    other = tier.admin(tier.tenancy.create_organization("globex"))
    before = copy.deepcopy((tier.auto_destroy_store.records, tier.auto_destroy_store.audit))
    now = tier.clock.current

    # When each refused change is asked
    with pytest.raises(InvalidInput) as past:
        tier.auto_destroys.set(admin, ws.id, AutoDestroySettings(destroy_at=now - HOUR))
    with pytest.raises(InvalidInput) as neither:
        tier.auto_destroys.set(admin, ws.id, AutoDestroySettings())
    with pytest.raises(InvalidInput) as short:
        tier.auto_destroys.set(
            admin, ws.id, AutoDestroySettings(destroy_after_inactivity=timedelta(minutes=5))
        )
    with pytest.raises(ConcurrentChange):
        tier.auto_destroys.set(
            admin,
            ws.id,
            AutoDestroySettings(destroy_at=now + 72 * HOUR),
            expected_version=7,
        )
    with pytest.raises(InvalidInput) as earlier:
        tier.auto_destroys.postpone(admin, ws.id, now + HOUR)
    with pytest.raises(Forbidden):
        tier.auto_destroys.postpone(reader, ws.id, now + 72 * HOUR)
    with pytest.raises(NotFound):
        tier.auto_destroys.postpone(other, ws.id, now + 72 * HOUR)
    with pytest.raises(NotFound):
        tier.auto_destroys.get(other, ws.id)

    # Then each says which field, and nothing was written
    assert (past.value.pointer, neither.value.pointer) == ("/destroy_at", "/destroy_at")
    assert short.value.pointer == "/destroy_after_inactivity"
    assert earlier.value.pointer == "/until"
    assert (tier.auto_destroy_store.records, tier.auto_destroy_store.audit) == before


def test_a_destroy_under_way_cannot_be_postponed_and_clearing_stops_the_sweep(
    tier: Tier,
) -> None:
    # Given a workspace whose destroy run has started
    admin, ws = _armed(tier, destroy_at=(tier.clock.current + 2 * HOUR).replace(microsecond=0))
    tier.clock.advance(3 * HOUR)
    assert tier.auto_destroys.sweep() == {"launched": 1}
    run = _runs_of(tier, ws.id)[0]

    # When a person postpones it, then it is refused naming the run
    with pytest.raises(AutoDestroyUnderway) as underway:
        tier.auto_destroys.postpone(admin, ws.id, tier.clock.current + 24 * HOUR)
    assert underway.value.run_id == run.id

    # When it is cleared instead, then the sweep has nothing left to do
    assert tier.auto_destroys.clear(admin, ws.id) == {"workspace_id": ws.id, "armed": False}
    assert tier.auto_destroy_store.audit[-1].type == "workspace.auto_destroy_cleared"
    assert tier.auto_destroys.sweep() == {}
    with pytest.raises(NotFound):
        tier.auto_destroys.clear(admin, ws.id)


def test_two_sweeps_at_once_start_one_destroy_run(tier: Tier) -> None:
    # Given a workspace due now
    _, ws = _armed(tier, destroy_at=(tier.clock.current + 2 * HOUR).replace(microsecond=0))
    tier.clock.advance(3 * HOUR)

    # When a second sweep takes its step between the first one's read and its write
    outcomes: list[dict[str, int]] = []
    tier.clock.on_next_reading(lambda: outcomes.append(tier.auto_destroys.sweep()))
    outcomes.append(tier.auto_destroys.sweep())

    # Then exactly one destroy run exists; the late sweep wrote nothing
    assert sorted(outcomes, key=str) == [{"contended": 1}, {"launched": 1}]
    assert len(_runs_of(tier, ws.id)) == 1


def _record_for(tier: Tier, workspace_id: str, run_id: str, *, auto_apply: bool) -> AutoDestroy:
    now = tier.clock.current
    # The run scenarios' workspace, in the directory the sweep reads it from.
    tier.directory.workspaces.setdefault(
        workspace_id,
        Workspace(
            id=workspace_id,
            organization_id="org-acme",
            name="preview",
            created_at=now,
            fence=0,
            writer_run_id=run_id,
            lock_id=None,
            lock_run_id=None,
            queue_length=0,
        ),
    )
    return AutoDestroy(
        workspace_id=workspace_id,
        organization_id="org-acme",
        settings=AutoDestroySettings(destroy_at=now - HOUR, auto_apply=auto_apply),
        set_at=now - 2 * HOUR,
        set_by=f"{PrincipalKind.USER}:ada",
        active_run_id=run_id,
        attempts=1,
    )


def test_a_deleted_workspace_is_forgotten_by_the_sweep(tier: Tier) -> None:
    # Given an armed workspace, then deleted without its clean-up reaching the auto-destroy
    _admin, ws = _armed(tier, destroy_at=(tier.clock.current + 2 * HOUR).replace(microsecond=0))
    del tier.directory.workspaces[ws.id]
    tier.clock.advance(3 * HOUR)

    # When the sweep runs
    outcome = tier.auto_destroys.sweep()

    # Then it starts nothing and disarms the auto-destroy, audited
    assert outcome == {"gone": 1}
    assert tier.auto_destroy_store.records == {}
    assert tier.auto_destroy_store.audit[-1].details == {"why": "the workspace was deleted"}
    assert tier.notified == []


def test_a_previews_destroy_rejects_its_pull_requests_waiting_runs_only(tier: Tier) -> None:
    # Given a pull request's preview workspace, due to be destroyed, whose pull request's
    # run awaits approval, beside a person's run of it that awaits approval too
    admin, ws = _armed(tier, destroy_at=(tier.clock.current + 2 * HOUR).replace(microsecond=0))
    tier.directory.workspaces[ws.id] = replace(ws, preview_of="ws-parent")
    ledger = tier.run_reader
    pulls = _waiting(tier, ws, "run-pull", "source:src-1")
    persons = _waiting(tier, ws, "run-person", admin.ref)
    tier.clock.advance(3 * HOUR)

    # When the sweep runs
    assert tier.auto_destroys.sweep() == {"launched": 1}

    # Then the pull request's run was rejected by the auto-destroy, naming why, and the
    # person's run still waits
    approval = ledger.parts(pulls)["approval"]
    assert approval.state == ApprovalState.REJECTED
    assert approval.body["decided_by"] == f"system:auto-destroy:{ws.id}"
    assert "pull request closed" in approval.body["comment"]
    assert ledger.get_run(persons).status is RunStatus.AWAITING_APPROVAL
    assert ledger.parts(persons)["approval"].state == ApprovalState.WAITING


def _waiting(tier: Tier, ws: Workspace, run_id: str, created_by: str) -> str:
    """A plan-and-apply run of ``ws`` by ``created_by``, awaiting approval."""
    ledger, now = tier.run_reader, tier.clock.now()
    run = Run(
        id=run_id,
        organization_id=ws.organization_id,
        workspace_id=ws.id,
        kind=RunKind.PLAN_AND_APPLY,
        status=MAIN_PATH[0],
        version=1,
        created_at=now,
        updated_at=now,
    )
    ledger.create(run, actor=created_by, input={"configuration_version_id": "cv-1"})
    updates: dict[RunStatus, dict[str, object]] = {
        RunStatus.PLAN_COMPLETE: {"plan_has_changes": True},
        RunStatus.AWAITING_APPROVAL: {"approval_expires_at": now + 24 * HOUR},
    }
    for target in MAIN_PATH[1 : MAIN_PATH.index(RunStatus.AWAITING_APPROVAL) + 1]:
        ledger.move(
            ledger.get_run(run_id), target, actor="workflow", run_updates=updates.get(target)
        )
    body = {"expires_at": (now + 24 * HOUR).isoformat(), "binding": {}}
    ledger.add_part(RunPart(run_id, "approval", "waiting", body, f"tok-{run_id}", now, now))
    return run_id
