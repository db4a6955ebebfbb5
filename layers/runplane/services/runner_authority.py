"""What a runner session may do with its workspace's state.

A runner session's permissions name what kind of thing it may touch; this
module says exactly which. It may read only what its run needs: the state
version the run pinned when it started planning, and what its own run
published. It may take the workspace lock and publish state only with the
apply authority of the run's current attempt: an apply-phase session of that
exact attempt and sandbox, while the attempt is open and the run is
``applying``, under the lock and fence that attempt was granted. Every write
made with that authority also carries condition checks on the run and the
attempt, so a result, a cancellation or a loss that commits first refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from runplane.domain.capabilities import Phase
from runplane.domain.entities import Workspace
from runplane.domain.errors import RunnerAuthorityRefused, RunNotApplying, StaleFence
from runplane.domain.identity import Principal
from runplane.domain.parts import OPEN_ATTEMPT, AttemptBody
from runplane.domain.run import RunStatus
from runplane.domain.state import ApplyGuard

if TYPE_CHECKING:
    from runplane.services.repositories.state import WorkspaceLocks


@dataclass(frozen=True)
class ApplyAuthority:
    """The lock and fence a runner's current apply attempt holds on the workspace."""

    run_id: str
    attempt_id: str
    sandbox_id: str
    lock_id: str
    fence: int


def apply_authority(
    principal: Principal, workspace: Workspace, locks: WorkspaceLocks
) -> ApplyAuthority:
    """The apply authority ``principal`` (a runner session) holds on ``workspace``,
    or the typed refusal: 403 for the wrong session, 409 for the wrong moment."""
    run_id = principal.run_id or ""
    if principal.phase != Phase.APPLY.value:
        raise RunnerAuthorityRefused(
            run_id, "a plan session may read the run's pinned state but never lock or write it"
        )
    # The run and its apply attempt in one consistent request.
    run, attempt = locks.apply_attempt(run_id)
    body = AttemptBody.from_body(attempt.body) if attempt is not None else None
    if attempt is None or body is None or body.attempt_id != principal.attempt_id:
        raise RunnerAuthorityRefused(run_id, "it is not the session of the run's current apply")
    if body.sandbox_id != principal.sandbox_id:
        raise RunnerAuthorityRefused(run_id, "it belongs to another sandbox")
    if attempt.state not in OPEN_ATTEMPT:
        raise RunnerAuthorityRefused(run_id, f"its apply attempt has ended ({attempt.state})")
    if run.status is not RunStatus.APPLYING:
        raise RunNotApplying(run.id, run.status)
    if body.lock_id is None or body.fence is None:
        raise RunnerAuthorityRefused(run_id, "its apply attempt was granted no lock")
    lock_id, fence = body.lock_id, body.fence
    if workspace.lock_run_id != run.id or workspace.lock_id != lock_id or workspace.fence != fence:
        raise StaleFence(workspace.id, fence, workspace.fence)
    return ApplyAuthority(run.id, body.attempt_id, body.sandbox_id, lock_id, fence)


def still_applying(run_id: str) -> ApplyGuard:
    """What every state write made with a run's authority commits with: the run still
    applying and its apply attempt still open (the store turns it into conditions)."""
    return ApplyGuard(run_id)
