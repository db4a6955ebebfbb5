"""Task Lambdas of the source workflow (statemachines/source.asl.json).

Inputs carry the source ingestion's ID (or, for a commit status, the run's);
outputs carry only what the next Choice needs. The installation token a step
exchanges (or the GitLab access token it unseals) stays inside that step. One
workflow serves both providers: each step asks GitLab's service whether the
ingestion or run is its own, else GitHub's handles it.
"""

from __future__ import annotations

from typing import Any

from functions.observability import observed
from runplane.services.github import GitHubSources
from runplane.services.gitlab import GitLabSources
from runplane.wiring import services


def _of_source(source_id: str) -> GitHubSources | GitLabSources:
    gitlab = services().gitlab
    return gitlab if gitlab.owns(source_id) else services().github


def _of_run(run_id: str) -> GitHubSources | GitLabSources:
    gitlab = services().gitlab
    return gitlab if gitlab.owns_run(run_id) else services().github


@observed
def ingest_source(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _of_source(event["source_id"]).ingest(event["source_id"])


@observed
def create_source_runs(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _of_source(event["source_id"]).create_runs(event["source_id"])


@observed
def fail_source(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _of_source(event["source_id"]).fail(event["source_id"], str(event["error"]))


@observed
def report_commit_status(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _of_run(event["run_id"]).report_status(event["run_id"])


# The ASL's ${<Name>FunctionArn} placeholders, by handler.
SOURCE_HANDLERS = {
    "IngestSource": ingest_source,
    "CreateSourceRuns": create_source_runs,
    "FailSource": fail_source,
    "ReportCommitStatus": report_commit_status,
}
