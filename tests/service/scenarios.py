"""Starting points the service tier's run-control tests share."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from runplane.domain.entities import Run
from runplane.domain.parts import RunPart
from runplane.domain.run import RunKind, RunStatus
from runplane.domain.transitions import MAIN_PATH
from tests.service.conftest import Tier

APPROVAL_WAIT = "tok-approval"
"""The default token of the approval's wait (a test value, no secret)."""


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
    run = Run(
        id="run-1",
        organization_id="org-acme",
        workspace_id="ws-1",
        kind=RunKind.PLAN_AND_APPLY,
        status=MAIN_PATH[0],
        version=1,
        created_at=now,
        updated_at=now,
    )
    ledger.create(run, actor="user:ada", input={"configuration_version_id": "cv-1"})
    deadline = now + window
    updates: dict[RunStatus, dict[str, object]] = {
        RunStatus.PLAN_COMPLETE: {"plan_has_changes": True},
        RunStatus.AWAITING_APPROVAL: {"approval_expires_at": deadline},
    }
    for target in MAIN_PATH[1 : MAIN_PATH.index(RunStatus.AWAITING_APPROVAL) + 1]:
        ledger.move(
            ledger.get_run(run.id), target, actor="workflow", run_updates=updates.get(target)
        )
    body = {"expires_at": deadline.isoformat(), "binding": dict(binding or {})}
    ledger.add_part(RunPart(run.id, "approval", "waiting", body, token, now, now))
    if policy is not None:
        ledger.add_part(RunPart(run.id, "policy", policy, {"digest": "out-1"}, None, now, now))
    tier.writer_queue.holders["ws-1"] = run.id
    tier.writer_queue.waiting["ws-1"] = [("run-2", "tok-waiter")]
    ledger.audit.clear()
    ledger.announced.clear()
    return ledger.get_run(run.id)
