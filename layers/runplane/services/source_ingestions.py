"""What every VCS source shares once a delivery is recorded (GitHub's and GitLab's
deliveries and ingestions are the same records): answering a repeated delivery,
starting the source workflow, failing an ingestion, and adopting the run an earlier
try of the run-creation step made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from runplane.adapters.workflow import Workflow
from runplane.domain.errors import GitHubNotConfigured, WebhookReplayRefused
from runplane.domain.github import Delivery
from runplane.domain.identity import PrincipalKind
from runplane.domain.run import RunStatus
from runplane.services.lifecycle import RunLifecycle
from runplane.services.repositories.github import GitHubSourceStore
from runplane.services.runs import Runs


@dataclass(frozen=True)
class WebhookReply:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


def refuse_stale(
    delivery_id: str, occurred_at: datetime | None, now: datetime, window: timedelta
) -> None:
    """A delivery must say when its event happened, within ``window`` of ``now``: an
    older one may be a replay (``WebhookReplayRefused``, nothing recorded)."""
    if occurred_at is None:
        raise WebhookReplayRefused(
            f"delivery {delivery_id} carries no event time; it cannot be checked for replay"
        )
    if now - occurred_at > window:
        raise WebhookReplayRefused(
            f"delivery {delivery_id} is for an event older than "
            f"{int(window.total_seconds())} s; nothing was recorded"
        )


def start_ingestion(workflow: Workflow | None, source_id: str) -> None:
    """Start the source workflow of an ingestion (named by it: at most once)."""
    if workflow is None:
        raise GitHubNotConfigured("no source workflow is configured for this deployment")
    workflow.start_named(source_id, {"action": "ingest", "source_id": source_id})


def repeat_delivery(
    store: GitHubSourceStore,
    recorded: Delivery,
    digest: str,
    start: Callable[[str], None],
) -> WebhookReply:
    """A delivery seen before: its first outcome if the body is the same (refused
    otherwise), its ingestion's workflow started if the first try stopped before."""
    if recorded.body_sha256 != digest:
        raise WebhookReplayRefused(
            "this delivery was received before with a different body; nothing was recorded"
        )
    if recorded.source_id is not None:
        source = store.ingestion(recorded.source_id)
        if source is not None and source.status == "pending":
            # The first attempt may have recorded it without starting its workflow.
            start(recorded.source_id)
    return WebhookReply(recorded.status_code, {**recorded.outcome, "duplicate": True})


def fail_ingestion(
    store: GitHubSourceStore, now: datetime, source_id: str, error: str
) -> dict[str, Any]:
    """A pending ingestion the workflow gave up on, marked failed (once)."""
    source = store.ingestion(source_id)
    if source is not None and source.status == "pending":
        store.mark_failed(source_id, f"ingestion failed: {error[:100]}", now)
    return {"source_id": source_id, "status": "failed"}


def adopt_run(
    lifecycle: RunLifecycle, runs: Runs, run_id: str, source_id: str, workspace_id: str
) -> str | None:
    """The run an earlier try of the step created under ``run_id`` (derived from the
    ingestion and the workspace), its workflow started if that try stopped before; None
    for a run of that ID that the ingestion did not create for that workspace."""
    run = lifecycle.runs.get(run_id)
    if run.created_by != f"{PrincipalKind.SOURCE}:{source_id}" or run.workspace_id != workspace_id:
        return None
    # The execution is named by the run ID: Step Functions starts it at most once.
    if run.status is RunStatus.DISPATCH_PENDING:
        runs.start_workflow(run)
    return run.id
