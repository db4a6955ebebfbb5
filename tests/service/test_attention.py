"""The attention inbox over the in-memory stores: runs awaiting approval (soonest deadline
first), runs needing recovery while they hold their workspace, a workspace's latest
failure for a week, drifted workspaces; only the caller's own visible workspaces, never
another organization's."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from runplane.domain.entities import Run, Workspace
from runplane.domain.identity import Forbidden, Permission, Principal
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.schedules import Drift
from runplane.domain.transitions import MAIN_PATH
from runplane.services.attention import Attention
from tests.fakes_attention import InMemoryAttentionIndex
from tests.service.conftest import Tier
from tests.service.scenarios import reader_beside

TO_APPROVAL = MAIN_PATH[1 : MAIN_PATH.index(RunStatus.AWAITING_APPROVAL) + 1]
TO_APPLYING = (*TO_APPROVAL, RunStatus.APPLYING)
TO_PLANNING = (RunStatus.QUEUED, RunStatus.PLANNING)


@pytest.fixture
def attention(tier: Tier) -> Attention:
    index = InMemoryAttentionIndex(tier.run_reader, tier.schedule_store.drift)
    return Attention(tier.clock, tier.workspaces, index)


def _org(tier: Tier, name: str) -> Principal:
    return tier.admin(tier.tenancy.create_organization(name))


def _run(
    tier: Tier,
    ws: Workspace,
    run_id: str,
    path: tuple[RunStatus, ...],
    window: timedelta = timedelta(days=7),
) -> Run:
    """A plan-and-apply run of ``ws`` moved along ``path`` (an approval due ``window``
    after the move that asks for it)."""
    ledger, now = tier.run_reader, tier.clock.now()
    run = Run(run_id, ws.organization_id, ws.id, RunKind.PLAN_AND_APPLY, MAIN_PATH[0], 1, now, now)
    ledger.create(run, actor="user:ada", input={})
    for target in path:
        updates: dict[str, object] = {}
        if target is RunStatus.PLAN_COMPLETE:
            updates["plan_has_changes"] = True
        if target is RunStatus.AWAITING_APPROVAL:
            updates["approval_expires_at"] = tier.clock.now() + window
        ledger.move(ledger.get_run(run_id), target, actor="workflow", run_updates=updates or None)
    return ledger.get_run(run_id)


def _holds(tier: Tier, ws: Workspace, run_id: str | None) -> None:
    """As the table's workspace: ``run_id`` holds (or nobody holds) the writer authority."""
    tier.directory.workspaces[ws.id] = replace(ws, writer_run_id=run_id)


def _drifted(tier: Tier, ws: Workspace, state: str = "drifted") -> None:
    now = tier.clock.now()
    tier.schedule_store.drift_records[ws.id] = Drift(ws.id, state, now, "run-s", now, None, {})


def test_each_category_is_listed_and_approvals_soonest_deadline_first(
    tier: Tier, attention: Attention
) -> None:
    # Given, in one organization: two approvals (the later one due sooner), a run needing
    # recovery that holds its workspace, a failed plan, a drifted workspace and a quiet one
    admin = _org(tier, "acme")
    ws = {n: tier.workspaces.create(admin, "acme", n) for n in ("a", "b", "c", "d", "e", "f")}
    _run(tier, ws["a"], "run-late", TO_APPROVAL, window=timedelta(days=3))
    _run(tier, ws["b"], "run-soon", TO_APPROVAL, window=timedelta(hours=5))
    _run(tier, ws["c"], "run-stuck", (*TO_APPLYING, RunStatus.APPLY_INTERRUPTED))
    _holds(tier, ws["c"], "run-stuck")
    _run(tier, ws["d"], "run-failed", (*TO_PLANNING, RunStatus.PLAN_FAILED))
    _drifted(tier, ws["e"])
    _drifted(tier, ws["f"], state="clear")

    # When the admin reads the inbox
    view = attention.view(admin)

    # Then each category lists its own, approvals soonest deadline first with time left,
    # and the count is everything listed
    assert [e["run_id"] for e in view["awaiting_approval"]] == ["run-soon", "run-late"]
    assert view["awaiting_approval"][0]["time_left"] == "4h 59m left"
    # And the one due within a day is flagged as expiring soon, the other not
    assert [e["expiring_soon"] for e in view["awaiting_approval"]] == [True, False]
    assert view["awaiting_approval"][0]["created_by"] == "user:ada"
    assert [e["run_id"] for e in view["needs_recovery"]] == ["run-stuck"]
    assert [(e["run_id"], e["status"]) for e in view["failed"]] == [("run-failed", "plan_failed")]
    assert [e["workspace_name"] for e in view["drift"]] == ["e"]
    assert view["count"] == 5 == attention.count(admin)


def test_a_recovered_run_a_later_success_and_an_old_failure_are_not_listed(
    tier: Tier, attention: Attention
) -> None:
    # Given an interrupted apply whose workspace was recovered (the writer released), a
    # failure followed by a success, and a failure eight days old
    admin = _org(tier, "acme")
    ws = {n: tier.workspaces.create(admin, "acme", n) for n in ("a", "b", "c")}
    _run(tier, ws["a"], "run-recovered", (*TO_APPLYING, RunStatus.NEEDS_RECOVERY))
    _holds(tier, ws["a"], None)
    _run(tier, ws["b"], "run-failed", (*TO_PLANNING, RunStatus.PLAN_FAILED))
    _run(tier, ws["b"], "run-fixed", (*TO_APPLYING, RunStatus.SUCCEEDED))
    _run(tier, ws["c"], "run-old", (*TO_PLANNING, RunStatus.PLAN_FAILED))
    tier.clock.advance(timedelta(days=8))

    # When the inbox is read
    # Then nothing is listed
    assert attention.view(admin)["count"] == 0


def test_an_apply_failure_holding_its_workspace_is_listed_once_as_needing_recovery(
    tier: Tier, attention: Attention
) -> None:
    # Given an apply failure that published state and so keeps the writer authority
    admin = _org(tier, "acme")
    ws = tier.workspaces.create(admin, "acme", "a")
    _run(tier, ws, "run-1", (*TO_APPLYING, RunStatus.APPLY_FAILED))
    _holds(tier, ws, "run-1")
    # When the inbox is read
    view = attention.view(admin)
    # Then it is a recovery, not also a failure; once recovered, a failure
    assert ([e["run_id"] for e in view["needs_recovery"]], view["failed"]) == (["run-1"], [])
    _holds(tier, tier.directory.workspaces[ws.id], None)
    assert [e["run_id"] for e in attention.view(admin)["failed"]] == ["run-1"]


def test_another_organizations_items_and_a_workspace_out_of_sight_are_absent(
    tier: Tier, attention: Attention
) -> None:
    # Given two organizations, each with an approval and a drifted workspace
    acme, other = _org(tier, "acme"), _org(tier, "other")
    mine = tier.workspaces.create(acme, "acme", "mine")
    theirs = tier.workspaces.create(other, "other", "theirs")
    for ws, run_id in ((mine, "run-mine"), (theirs, "run-theirs")):
        _run(tier, ws, run_id, TO_APPROVAL)
        _drifted(tier, ws)
    # And a caller of acme confined to another workspace (as a runner's session is)
    confined = replace(acme, workspace_id="ws-elsewhere")

    # When each reads the inbox
    # Then each sees only its own organization's, and the confined caller nothing
    assert [e["run_id"] for e in attention.view(acme)["awaiting_approval"]] == ["run-mine"]
    assert [e["workspace_name"] for e in attention.view(acme)["drift"]] == ["mine"]
    assert [e["run_id"] for e in attention.view(other)["awaiting_approval"]] == ["run-theirs"]
    assert attention.view(confined)["count"] == 0


def test_a_reader_of_runs_sees_the_inbox_and_a_caller_without_run_read_is_refused(
    tier: Tier, attention: Attention
) -> None:
    # Given an approval, a reader with run:read, and bob who may read workspaces only
    admin = _org(tier, "acme")
    ws = tier.workspaces.create(admin, "acme", "a")
    _run(tier, ws, "run-1", TO_APPROVAL)
    bob = reader_beside(admin)
    reader = replace(bob, permissions=bob.permissions | {Permission.RUN_READ})
    # When each reads it
    # Then the reader sees the approval and bob is refused
    assert attention.count(reader) == 1
    with pytest.raises(Forbidden):
        attention.view(bob)
