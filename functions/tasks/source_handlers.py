"""Task Lambdas of the source workflow (statemachines/source.asl.json).

Inputs carry the source ingestion's ID (or, for a commit status, the run's);
outputs carry only what the next Choice needs. The installation token a step
exchanges stays inside that step.
"""

from __future__ import annotations

from typing import Any

from functions.observability import observed
from runplane.wiring import services


@observed
def ingest_source(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().github.ingest(event["source_id"])


@observed
def create_source_runs(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().github.create_runs(event["source_id"])


@observed
def fail_source(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().github.fail(event["source_id"], str(event["error"]))


@observed
def report_commit_status(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return services().github.report_status(event["run_id"])


# The ASL's ${<Name>FunctionArn} placeholders, by handler.
SOURCE_HANDLERS = {
    "IngestSource": ingest_source,
    "CreateSourceRuns": create_source_runs,
    "FailSource": fail_source,
    "ReportCommitStatus": report_commit_status,
}
