"""Path filters in the source workflow: list what a push or pull request changed, decide
per bound workspace whether it runs, and tell a skipped pull request so.

The rules are ``domain.path_filters``; this module only asks GitHub for the changed
files (with the installation token of the step that holds it) and posts the commit
statuses of skipped workspaces. Whatever keeps the list from being complete makes the
change run (fail open), with the reason recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from runplane.adapters.github import GitHubApp
from runplane.domain.errors import RunplaneError
from runplane.domain.github import Binding, Ingestion
from runplane.domain.path_filters import (
    FALLBACK_FORCE_PUSH,
    FALLBACK_NEW_BRANCH,
    FALLBACK_UNAVAILABLE,
    ChangedFiles,
    PathDecision,
    decide,
)

logger = logging.getLogger("runplane.github")

_NO_COMMIT = "0" * 40
# GitHub cuts a commit status's description at 140 characters.
_STATUS_DESCRIPTION = 140


def changed_files(app: GitHubApp, token: str, source: Ingestion) -> ChangedFiles:
    """What the ingestion's push or pull request changed, or why that is unknown."""
    number = source.pull_request
    before = source.before_sha
    if number is None and (before is None or before == _NO_COMMIT):
        return ChangedFiles.unknown(FALLBACK_NEW_BRANCH)
    if number is None and source.forced:
        return ChangedFiles.unknown(FALLBACK_FORCE_PUSH)
    try:
        if number is not None:
            return app.pull_request_files(token, source.repository, number)
        assert before is not None
        return app.compare_files(token, source.repository, before, source.commit_sha)
    except RunplaneError as failed:
        # Refused or unreachable: the change runs rather than being skipped unseen.
        logger.warning(
            "changed files not listed: path filters fail open",
            extra={"source_id": source.id, "error": failed.code},
        )
        return ChangedFiles.unknown(FALLBACK_UNAVAILABLE)


def path_decisions(
    app: GitHubApp, token: str, source: Ingestion, bindings: Sequence[Binding]
) -> tuple[PathDecision, ...]:
    """Each binding's decision, in order. GitHub is asked for the changed files only if
    some binding has path filters."""
    needed = any(b.path_filters.active for b in bindings)
    changed = changed_files(app, token, source) if needed else None
    return tuple(
        decide(
            b.workspace_id,
            b.path_filters,
            b.working_directory,
            changed if b.path_filters.active else None,
        )
        for b in bindings
    )


def skipped_status(decision: PathDecision, source: Ingestion, review_url: str) -> dict[str, str]:
    """The commit status of a workspace whose path filters skipped a pull request: a
    success (nothing to plan is not a failure), saying why, linking to the ingestion."""
    description = f"skipped: {decision.reason}"
    if len(description) > _STATUS_DESCRIPTION:
        description = description[: _STATUS_DESCRIPTION - 1] + "…"
    return {
        "state": "success",
        "context": f"runplane/{decision.workspace_id}",
        "description": description,
        "target_url": f"{review_url.rstrip('/')}/api/v1/github/ingestions/{source.id}",
    }


def post_skipped_statuses(
    app: GitHubApp, now: datetime, source: Ingestion, review_url: str
) -> None:
    token = app.installation_token(int(source.installation_id), now)
    for decision in source.skipped:
        app.post_status(
            token,
            source.repository,
            source.commit_sha,
            skipped_status(decision, source, review_url),
        )
    del token


def ingestion_view(source: Ingestion) -> dict[str, Any]:
    """What a member reads of an ingestion: the event, its status and, per bound
    workspace, the run it made and what its path filters decided."""
    return {
        "id": source.id,
        "delivery_id": source.delivery_id,
        "event": source.event,
        "action": source.action,
        "repository": source.repository,
        "branch": source.branch,
        "ref": source.ref,
        "commit_sha": source.commit_sha,
        "pull_request": source.pull_request,
        "status": source.status,
        "reason": source.reason,
        "created_at": source.created_at.isoformat(),
        "updated_at": source.updated_at.isoformat(),
        "targets": [
            {
                "workspace_id": t.workspace_id,
                "bound_workspace_id": t.binding_workspace_id,
                "run_id": t.run_id,
                "error": t.error,
            }
            for t in source.targets
        ],
        "path_filters": [d.to_dict() for d in source.path_decisions],
    }
