"""What the Cloud API tells each caller about a workspace in remote execution mode."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.cloud_api import jsonapi, run_documents
from runplane.domain.entities import Organization, Run, Workspace
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.tfe_runs import RunFacts, waits_behind
from runplane.services.remote_runs import RemoteRun

K, S = RunKind, RunStatus

NOW = datetime(2026, 1, 1, tzinfo=UTC)
REMOTE = Workspace(
    id="ws-" + "a" * 26,
    organization_id="org-" + "a" * 26,
    name="net",
    created_at=NOW,
    fence=0,
    writer_run_id=None,
    lock_id=None,
    lock_run_id=None,
    queue_length=0,
    terraform_version="1.0.3",
    execution_mode="remote",
)


def principal(kind: PrincipalKind) -> Principal:
    return Principal(
        kind=kind,
        id="x",
        organization_id=REMOTE.organization_id,
        permissions=frozenset(Permission),
        display="X",
    )


def test_people_see_remote_operations_and_a_sandbox_never_does() -> None:
    # Given a workspace in remote execution mode
    org = Organization(REMOTE.organization_id, "acme", NOW)
    person, sandbox = principal(PrincipalKind.API_TOKEN), principal(PrincipalKind.RUNNER)

    # When a person and a managed run's sandbox read it and the entitlements
    seen = jsonapi.workspace(REMOTE, "acme", person)["attributes"]
    by_sandbox = jsonapi.workspace(REMOTE, "acme", sandbox)["attributes"]

    # Then the person's client runs remotely; the sandbox's engine runs the plan itself
    assert (seen["execution-mode"], seen["operations"]) == ("remote", True)
    assert jsonapi.entitlements(org, person)["attributes"]["operations"] is True
    assert by_sandbox["operations"] is False
    assert jsonapi.entitlements(org, sandbox)["attributes"]["operations"] is False


# -- what Terraform 1.0.3 prints while its run waits ---------------------------------------

# The statuses Terraform 1.0.3's remote backend skips as final while it counts the runs
# ahead of its own (``planned_and_finished`` is not among them).
FINAL = frozenset({"applied", "canceled", "discarded", "errored"})


def waiting_message(ours: str, runs: list[dict[str, Any]], workspace: dict[str, Any]) -> str:
    """What Terraform 1.0.3 prints for an apply's run at its first poll while the run
    reads ``pending`` (a model of the remote backend's wait, see docs/cloud-api.md):
    it reads the workspace; a locked workspace whose current run is pending is "manually
    locked"; otherwise, unless its run is the current one, it counts down the run list
    (newest first) the runs after its own that are not final, up to and including the
    current run; with none it asks the organization queue, which is empty here."""
    current = ((workspace["relationships"].get("current-run") or {}).get("data") or {}).get("id")
    status = {run["id"]: run["attributes"]["status"] for run in runs}
    if workspace["attributes"]["locked"] and status.get(current or "") == "pending":
        return "Waiting for the manually locked workspace to be unlocked..."
    if current != ours:
        ahead = 0
        for run in runs[[r["id"] for r in runs].index(ours) + 1 :]:
            if run["attributes"]["status"] in FINAL:
                continue
            ahead += 1
            if run["id"] == current:
                break
        if ahead:
            return f"Waiting for {ahead} run(s) to finish before being queued..."
    return "Waiting for the apply to start..."


PERSON = principal(PrincipalKind.API_TOKEN)


def run(name: str, kind: RunKind, status: RunStatus, minute: int) -> Run:
    return Run(
        id="run-" + name * 26,
        organization_id=REMOTE.organization_id,
        workspace_id=REMOTE.id,
        kind=kind,
        status=status,
        version=1,
        created_at=NOW + timedelta(minutes=minute),
        updated_at=NOW + timedelta(minutes=minute),
    )


def listed(
    runs: list[Run], holder: str | None, approved: str | None = None
) -> list[dict[str, Any]]:
    """The workspace's run list as the Cloud API serves it, newest first (the run
    ``approved`` was approved, every other one awaiting approval still waits)."""
    documents = []
    for r in sorted(runs, key=lambda r: r.created_at, reverse=True):
        decision = "approved" if r.id == approved else "waiting"
        facts = RunFacts(
            status=r.status,
            kind=r.kind,
            applied=r.status is S.SUCCEEDED and r.kind is K.PLAN_AND_APPLY,
            approval=decision if r.status is S.AWAITING_APPROVAL else None,
            policy="passed" if r.status in (S.AWAITING_APPROVAL, S.SUCCEEDED) else None,
            waiting_for=waits_behind(r.id, r.kind, r.status, holder),
        )
        view = RemoteRun(r, facts, None, None, {}, None)
        documents.append(run_documents.run(view, PERSON))
    return documents


APPLIED = run("a", K.PLAN_AND_APPLY, S.SUCCEEDED, 0)
OLD_PLAN = run("b", K.SPECULATIVE, S.SUCCEEDED, 1)
HOLDER = run("c", K.PLAN_AND_APPLY, S.AWAITING_APPROVAL, 2)
QUEUED_FIRST = run("d", K.PLAN_AND_APPLY, S.QUEUED, 3)
OURS = run("e", K.PLAN_AND_APPLY, S.DISPATCH_PENDING, 4)
NEWER_PLAN = run("f", K.SPECULATIVE, S.PLANNING, 5)


def held_by(holder: Run) -> dict[str, Any]:
    held = replace(REMOTE, writer_run_id=holder.id)
    return jsonapi.workspace(held, "acme", PERSON)


def test_a_queued_apply_counts_the_runs_ahead_of_it_in_the_workspace_only() -> None:
    # Given a workspace held by a run awaiting approval, another apply queued behind it,
    # and speculative plans older than the holder (finished) and newer than this apply
    runs = [APPLIED, OLD_PLAN, HOLDER, QUEUED_FIRST, OURS, NEWER_PLAN]
    documents = listed(runs, HOLDER.id)
    workspace = held_by(HOLDER)

    # When Terraform 1.0.3 reads them while this apply waits
    printed = waiting_message(OURS.id, documents, workspace)

    # Then it waits behind exactly the two runs ahead of it: pending, naming the holder
    assert printed == "Waiting for 2 run(s) to finish before being queued..."
    status = {d["id"]: d["attributes"]["status"] for d in documents}
    assert (status[OURS.id], status[QUEUED_FIRST.id], status[NEWER_PLAN.id]) == (
        "pending",
        "pending",
        "planning",
    )
    ours = next(d for d in documents if d["id"] == OURS.id)["attributes"]
    assert ours["runplane-waiting-for"] == HOLDER.id
    assert workspace["relationships"]["current-run"]["data"]["id"] == HOLDER.id
    # And without the current run it would have counted the finished plan before it too
    del workspace["relationships"]["current-run"]
    assert waiting_message(OURS.id, documents, workspace).startswith("Waiting for 3 run(s)")


def test_a_plan_created_while_the_apply_waits_counts_as_terraform_counts_it_against_tfe() -> None:
    # Given a speculative plan created after the holder and before this apply, finished
    between = run("g", K.SPECULATIVE, S.SUCCEEDED, 3)
    documents = listed([HOLDER, between, OURS], HOLDER.id)

    # When Terraform 1.0.3 counts the runs ahead
    printed = waiting_message(OURS.id, documents, held_by(HOLDER))

    # Then it counts the plan too: it does not take planned_and_finished as final
    assert [d["attributes"]["status"] for d in documents] == [
        "pending",
        "planned_and_finished",
        "policy_checked",
    ]
    assert printed == "Waiting for 2 run(s) to finish before being queued..."


@pytest.mark.parametrize("status", [S.DISPATCH_PENDING, S.QUEUED])
def test_the_run_holding_the_workspace_waits_behind_nobody(status: RunStatus) -> None:
    # Given this apply's run holds the workspace and has not started planning
    documents = listed([APPLIED, replace(OURS, status=status)], OURS.id)

    # Then it reads plan_queued: Terraform 1.0.3 stops polling and streams its plan
    assert documents[0]["attributes"]["status"] == "plan_queued"
    assert documents[0]["attributes"]["runplane-waiting-for"] is None


def test_an_approved_run_waits_for_its_own_apply_only() -> None:
    # Given this apply's run approved, its apply not started yet, and an older plan
    approved = replace(OURS, status=S.AWAITING_APPROVAL)
    documents = listed([OLD_PLAN, approved], OURS.id, approved=OURS.id)

    # When Terraform 1.0.3 polls it (it reads confirmed)
    workspace = held_by(approved)
    printed = waiting_message(OURS.id, documents, workspace)

    # Then the client sees it is the workspace's current run and counts nothing
    assert documents[0]["attributes"]["status"] == "confirmed"
    assert printed == "Waiting for the apply to start..."
    # And without the current run it would have waited for the finished plan
    del workspace["relationships"]["current-run"]
    assert waiting_message(OURS.id, documents, workspace).startswith("Waiting for 1 run(s)")
