"""Did this apply attempt publish that state version? One rule, with no I/O.

A runner's apply publishes state versions stamped with its provenance. A version is
the attempt's own only if it was finalized and carries the attempt's exact run,
attempt, sandbox, lock and fence: the apply's result (is the current state this
run's?), the runner's state check and operator recovery (which versions did the
interrupted apply publish?) all decide with ``published_by``.
"""

from __future__ import annotations

from dataclasses import dataclass

from runplane.domain.state import FINALIZED, StateVersion


@dataclass(frozen=True)
class ApplyIdentity:
    """What every state version an apply attempt published must carry."""

    run_id: str
    attempt_id: str | None
    sandbox_id: str | None
    lock_id: str | None
    fence: int | None
    predecessor_id: str | None  # the version the run pinned before applying


@dataclass(frozen=True)
class Publication:
    """A state version as the publication check sees it."""

    id: str
    predecessor_id: str | None
    finalized: bool
    run_id: str | None
    attempt_id: str | None
    sandbox_id: str | None
    lock_id: str | None
    fence: int | None
    serial: int
    lineage: str


def publication_of(version: StateVersion) -> Publication:
    """What the publication check sees of ``version``."""
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


def published_by(version: Publication, apply: ApplyIdentity) -> bool:
    """The version was finalized by exactly this apply attempt (run, attempt, sandbox,
    lock and fence all match)."""
    return (
        version.finalized
        and version.run_id == apply.run_id
        and version.attempt_id == apply.attempt_id
        and version.sandbox_id == apply.sandbox_id
        and version.lock_id == apply.lock_id
        and version.fence == apply.fence
    )
