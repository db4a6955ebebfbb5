"""The publication check's facts, read from a run's apply attempt and a state version
(the rule itself is ``runplane.domain.publications.published_by``)."""

from __future__ import annotations

from runplane.domain.entities import Run
from runplane.domain.parts import AttemptBody
from runplane.domain.publications import ApplyIdentity, Publication
from runplane.domain.state import FINALIZED, StateVersion


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


def publication_of(version: StateVersion) -> Publication:
    provenance = version.provenance or {}
    fence = provenance.get("fence")
    return Publication(
        id=version.id,
        predecessor_id=version.predecessor_id,
        finalized=version.status == FINALIZED,
        run_id=provenance.get("run_id"),
        attempt_id=provenance.get("attempt_id"),
        sandbox_id=provenance.get("sandbox_id"),
        lock_id=version.lock_id,
        fence=None if fence is None else int(fence),
        serial=version.serial,
        lineage=version.lineage,
    )
