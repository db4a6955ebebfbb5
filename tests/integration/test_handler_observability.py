"""Every Lambda handler logs through Powertools with the run's ID as a key, counts run
status moves as EMF metrics, and never logs what its input carries in confidence."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from functions import observability
from functions.tasks import handlers
from runplane import wiring
from runplane.settings import Settings
from tests.integration.arena import Arena, created
from tests.integration.conftest import BUCKET, TABLE

TASK_TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAf-confidential-task-token"


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "runplane-QueueRun")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "runplane-QueueRun")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Runplane")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    for cached in (observability.logger, observability.status_metrics):
        cached.cache_clear()
    yield
    for cached in (observability.logger, observability.status_metrics):
        cached.cache_clear()
    for name in ("runplane", "runplane.runs"):
        logged = logging.getLogger(name)
        logged.handlers.clear()
        logged.setLevel(logging.NOTSET)
        logged.propagate = True


@pytest.fixture
def installed(arena: Arena) -> Iterator[None]:
    wiring.install(
        wiring.build_services(
            Settings(table_name=TABLE, artifact_bucket=BUCKET),
            clock=arena.stack.clock,
            ids=arena.stack.ids,
        )
    )
    yield
    wiring._installed.clear()


def _lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_status_move_is_logged_with_its_run_id_and_counted_by_status(
    arena: Arena, lambda_env: None, installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a created run and the workflow's queue step deployed as a Lambda
    _, run_id = created(arena, "observed")
    capsys.readouterr()

    # When the step runs, then the writer wait runs with its task token
    handlers.queue_run({"run_id": run_id}, None)
    handlers.wait_for_writer({"run_id": run_id, "token": TASK_TOKEN}, None)
    out = capsys.readouterr().out

    # Then the move's structured line carries the run's ID as a key
    lines = _lines(out)
    (moved,) = [line for line in lines if line.get("message") == "run status changed"]
    assert moved["run_id"] == run_id
    assert moved["to_status"] == "queued"
    assert moved["service"] == "runplane-QueueRun"
    # And one EMF metric counts the move, namespaced, with the status as its dimension
    (metric,) = [line for line in lines if line.get("_aws")]
    emf = metric["_aws"]
    assert isinstance(emf, dict)
    (directive,) = emf["CloudWatchMetrics"]
    assert directive["Namespace"] == "Runplane"
    assert directive["Metrics"] == [{"Name": "RunStatusChanged", "Unit": "Count"}]
    assert directive["Dimensions"] == [["status"]]
    assert metric["status"] == "queued"
    assert metric["RunStatusChanged"] in (1, 1.0, [1.0])
    # And the task token the input carried appears nowhere in what was written
    assert TASK_TOKEN not in out
