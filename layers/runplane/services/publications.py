"""The publication check's facts, read from a run's apply attempt and a state version
(the rule itself is ``runplane.domain.publications.published_by``)."""

from __future__ import annotations

from runplane.domain.entities import Run
from runplane.domain.parts import AttemptBody
from runplane.domain.publications import ApplyIdentity, publication_of

# ``publication_of`` is the domain's (the store writes a workspace's copy of its current
# version's with the pointer); kept importable from here for the services that use it.
__all__ = ["apply_identity", "publication_of"]


def apply_identity(run: Run, attempt: AttemptBody | None) -> ApplyIdentity:
    """What the run's apply attempt stamps on what it publishes (None: it has none)."""
    return ApplyIdentity(
        run_id=run.id,
        attempt_id=attempt.attempt_id if attempt else None,
        sandbox_id=attempt.sandbox_id if attempt else None,
        lock_id=attempt.lock_id if attempt else None,
        fence=attempt.fence if attempt else None,
        predecessor_id=run.predecessor_sv_id,
    )
