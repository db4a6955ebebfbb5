"""Starting points the service tier's run-control tests share."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from runplane.domain.entities import Run, Workspace
from runplane.domain.identity import Permission, Principal
from runplane.domain.parts import AttemptState, RunPart
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.transitions import MAIN_PATH
from tests.fakes import LedgerState
from tests.service.conftest import Tier

APPROVAL_WAIT = "tok-approval"
"""The default token of the approval's wait (a test value, no secret)."""


def run_at(
    tier: Tier, status: RunStatus, run_id: str = "run-1", window: timedelta = timedelta(hours=4)
) -> Run:
    """A plan-and-apply run of ``ws-1`` moved along the main path to ``status`` (its
    approval, if it got that far, due ``window`` after now)."""
    ledger, now = tier.run_reader, tier.clock.now()
    run = Run(
        id=run_id,
        organization_id="org-acme",
        workspace_id="ws-1",
        kind=RunKind.PLAN_AND_APPLY,
        status=MAIN_PATH[0],
        version=1,
        created_at=now,
        updated_at=now,
    )
    ledger.create(run, actor="user:ada", input={"configuration_version_id": "cv-1"})
    updates: dict[RunStatus, dict[str, object]] = {
        RunStatus.PLAN_COMPLETE: {"plan_has_changes": True},
        RunStatus.AWAITING_APPROVAL: {"approval_expires_at": now + window},
    }
    for target in MAIN_PATH[1 : MAIN_PATH.index(status) + 1]:
        ledger.move(
            ledger.get_run(run.id), target, actor="workflow", run_updates=updates.get(target)
        )
    return ledger.get_run(run.id)


def open_attempt(
    tier: Tier, run: Run, phase: str, reference: str, slot: str, session: str
) -> RunPart:
    """An open attempt of ``phase`` in sandbox ``reference``, holding sandbox ``slot``
    and runner ``session``."""
    now = tier.clock.now()
    body = {
        "attempt_id": f"att-{phase}",
        "sandbox_id": f"sbx-{phase}",
        "phase": phase,
        "launched_at": now.isoformat(),
        "slots": [slot],
        "sandbox_ref": reference,
    }
    attempt = RunPart(
        run.id,
        f"attempt#{phase}",
        AttemptState.STARTED,
        body,
        f"tok-{phase}",
        now,
        now,
        frozenset({session}),
    )
    tier.run_reader.add_part(attempt)
    tier.sandboxes.active[slot] = tier.sandboxes.active.get(slot, 0) + 1
    tier.sandboxes.sessions[session] = None
    return attempt


def approving_workspace(tier: Tier, window: int | None = None) -> None:
    """``ws-1`` of ``org-acme``, free, whose approvals wait ``window`` seconds if set."""
    tier.directory.workspaces["ws-1"] = Workspace(
        id="ws-1",
        organization_id="org-acme",
        name="network",
        created_at=tier.clock.now(),
        fence=0,
        writer_run_id=None,
        lock_id=None,
        lock_run_id=None,
        queue_length=0,
        approval_window_seconds=window,
    )


def settle(tier: Tier) -> None:
    """Forget how the runs were set up: only the step's own writes are looked at."""
    tier.run_reader.audit.clear()
    tier.run_reader.announced.clear()


def written(tier: Tier) -> tuple[LedgerState, object, object, object, object]:
    """What the run's stores, the queue, the sandboxes and the workflow hold."""
    return (
        tier.run_reader.saved(),
        (
            dict(tier.writer_queue.holders),
            {k: list(v) for k, v in tier.writer_queue.waiting.items()},
        ),
        tier.sandboxes.saved(),
        list(tier.workflow.resumed),
        list(tier.workflow.failed),
    )


def awaiting_approval(
    tier: Tier,
    *,
    window: timedelta = timedelta(hours=4),
    binding: Mapping[str, str] | None = None,
    policy: str | None = None,
    token: str | None = APPROVAL_WAIT,
) -> Run:
    """A plan-and-apply run, ``run-1`` of ``ws-1``, awaiting approval for ``window``:
    its approval waits (bound to ``binding``, its wait's ``token`` stored), a policy part
    in state ``policy`` if one is given, and it holds the workspace's writer reservation
    with ``run-2`` waiting for it. The ledger's audit and announced events are cleared,
    so a test sees only what it does."""
    ledger, now = tier.run_reader, tier.clock.now()
    run = run_at(tier, RunStatus.AWAITING_APPROVAL, window=window)
    deadline = now + window
    body = {"expires_at": deadline.isoformat(), "binding": dict(binding or {})}
    ledger.add_part(RunPart(run.id, "approval", "waiting", body, token, now, now))
    if policy is not None:
        ledger.add_part(RunPart(run.id, "policy", policy, {"digest": "out-1"}, None, now, now))
    tier.writer_queue.holders["ws-1"] = run.id
    tier.writer_queue.waiting["ws-1"] = [("run-2", "tok-waiter")]
    ledger.audit.clear()
    ledger.announced.clear()
    return ledger.get_run(run.id)


def reader_beside(admin: Principal) -> Principal:
    """Bob, who may read ``admin``'s organization and its workspaces, and nothing more."""
    return Principal(
        kind=admin.kind,
        id="bob",
        organization_id=admin.organization_id,
        permissions=frozenset({Permission.ORGANIZATION_READ, Permission.WORKSPACE_READ}),
        display="bob",
    )
