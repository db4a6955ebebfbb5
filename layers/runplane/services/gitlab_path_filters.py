"""Path filters for GitLab bindings: list what a push or merge request changed, decide
whether the bound workspace runs, and tell a skipped merge request so.

The rules are ``domain.path_filters``, as for GitHub; this module only asks GitLab for
the changed files (with the binding's project client) and shapes the commit status of a
skipped merge request. Whatever keeps the list from being complete makes the change run
(fail open), with the reason recorded on the ingestion.
"""

from __future__ import annotations

import logging
from typing import Protocol

from runplane.domain.errors import RunplaneError
from runplane.domain.github import Ingestion
from runplane.domain.gitlab import ZERO_SHA, GitLabBinding
from runplane.domain.path_filters import (
    FALLBACK_NEW_BRANCH,
    FALLBACK_UNAVAILABLE,
    ChangedFiles,
    PathDecision,
    decide,
)
from runplane.services.github import STATUS_CONTEXT

logger = logging.getLogger("runplane.gitlab")

PROVIDER_NAME = "GitLab"
# GitLab keeps a commit status's description to 255 characters; a short one reads best.
_STATUS_DESCRIPTION = 140


class ChangedFilesSource(Protocol):
    def merge_request_files(self, merge_request: int) -> ChangedFiles: ...

    def compare_files(self, before: str, after: str) -> ChangedFiles: ...


def changed_files(client: ChangedFilesSource, source: Ingestion) -> ChangedFiles:
    """What the ingestion's push or merge request changed, or why that is unknown."""
    before = source.before_sha
    if source.pull_request is None and (before is None or before == ZERO_SHA):
        return ChangedFiles.unknown(FALLBACK_NEW_BRANCH)
    try:
        if source.pull_request is not None:
            return client.merge_request_files(source.pull_request)
        assert before is not None
        return client.compare_files(before, source.commit_sha)
    except RunplaneError as failed:
        # Refused or unreachable: the change runs rather than being skipped unseen.
        logger.warning(
            "changed files not listed: path filters fail open",
            extra={"source_id": source.id, "error": failed.code},
        )
        return ChangedFiles.unknown(FALLBACK_UNAVAILABLE)


def path_decision(
    client: ChangedFilesSource, source: Ingestion, binding: GitLabBinding
) -> PathDecision:
    """The binding's decision; GitLab is asked for the changed files only if the binding
    has path filters."""
    filters = binding.path_filters
    changed = changed_files(client, source) if filters.active else None
    return decide(binding.workspace_id, filters, binding.working_directory, changed, PROVIDER_NAME)


def skipped_status(decision: PathDecision, source: Ingestion, review_url: str) -> dict[str, str]:
    """The commit status of a workspace whose path filters skipped a merge request: a
    success (nothing to plan is not a failure), saying why, linking to the ingestion."""
    description = f"skipped: {decision.reason}"
    if len(description) > _STATUS_DESCRIPTION:
        description = description[: _STATUS_DESCRIPTION - 1] + "…"
    return {
        "state": "success",
        "name": f"{STATUS_CONTEXT}/{decision.workspace_id}",
        "description": description,
        "target_url": f"{review_url.rstrip('/')}/api/v1/github/ingestions/{source.id}",
    }
