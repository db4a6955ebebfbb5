"""The DynamoDB run-trigger store (``services.repositories.RunTriggerStore``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from runplane.domain.run import RunKind
from runplane.domain.run_triggers import Triggered, Triggers
from runplane.store import run_triggers as store
from runplane.store.transaction import Transaction


class DynamoRunTriggerStore:
    def get(self, workspace_id: str) -> Triggers:
        return store.get(workspace_id)

    def dependents(self, source_id: str) -> list[str]:
        return store.dependents(source_id)

    def add_source(
        self,
        current: Triggers,
        source_id: str,
        *,
        org_id: str,
        run_kind: RunKind,
        now: datetime,
        unchanged: Sequence[Triggers] = (),
    ) -> None:
        known = source_id in current.sources
        sources = current.sources if known else (*current.sources, source_id)
        # A source listed already is linked already (the list and its links change
        # together, at the version read): only a new one is linked, and counted.
        link = [] if known else [store.link(source_id, current.workspace_id, org_id)]
        Transaction().extend(
            [
                store.replace(current, org_id, sources, run_kind, now),
                *link,
                *(store.unchanged(t) for t in unchanged),
            ]
        ).commit()

    def remove_source(
        self, current: Triggers, source_id: str, *, org_id: str, now: datetime
    ) -> None:
        sources = tuple(s for s in current.sources if s != source_id)
        unlink = (
            [store.unlink(source_id, current.workspace_id)] if source_id in current.sources else []
        )
        Transaction().extend(
            [store.replace(current, org_id, sources, current.run_kind, now), *unlink]
        ).commit()


class DynamoTriggerClaims:
    """``services.repositories.creation.TriggerClaims``: a claim is written with its
    run by ``store.run_creations``; a skip here, with its organization audit event."""

    def of_source(self, source_run_id: str) -> list[Triggered]:
        return store.triggered_runs(source_run_id)

    def skip(
        self,
        source_run_id: str,
        dependent_id: str,
        *,
        org_id: str,
        reason: str,
        event_id: str,
        now: datetime,
    ) -> None:
        store.skip(source_run_id, dependent_id, org_id, reason, event_id, now).commit()
