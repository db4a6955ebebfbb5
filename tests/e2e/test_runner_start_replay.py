"""A retried runner-start step completes from the attempt's evidence: one sandbox, always."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runplane.domain.errors import RunEnded
from runplane.store import run_parts
from tests.e2e.conftest import Local
from tests.e2e.test_managed_runs import HELLO, new_workspace, writer_of


def test_a_retried_plan_start_does_not_start_a_second_sandbox(local: Local) -> None:
    # Given a run whose plan sandbox started and finished
    ws = new_workspace(local, "replay")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    assert local.stack.services is not None
    assert local.stack.launcher is not None
    launched = len(local.stack.launcher.processes)
    attempt = run_parts.require(run["id"], "attempt#plan").body

    # When the start step runs again (its first response was lost)
    replay = local.stack.services.orchestration.start_runner(run["id"], "plan", "token-retry")

    # Then it answers from the evidence and launches nothing
    assert replay == {"attempt_id": attempt["attempt_id"], "replayed": True}
    assert len(local.stack.launcher.processes) == launched
    assert local.client.review(run["id"])["status"] == "awaiting_approval"
    local.client.cancel(run["id"])


def test_partial_start_evidence_fails_closed(local: Local) -> None:
    # Given an approved run whose apply attempt was recorded but never launched
    ws = new_workspace(local, "partial-start")
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=120)
    assert local.stack.services is not None
    assert local.stack.launcher is not None
    services = local.stack.services
    run_parts.put(
        run["id"],
        "attempt#apply",
        state="launching",
        body={"attempt_id": "att-" + "p" * 26, "sandbox_id": "sbx-" + "p" * 26},
        now=datetime.now(UTC),
    ).commit()
    launched = len(local.stack.launcher.processes)

    # When the start step runs for it
    with pytest.raises(RunEnded):
        services.orchestration.start_runner(run["id"], "apply", "token-retry")

    # Then nothing started and the run says its start is uncertain, keeping the workspace
    assert len(local.stack.launcher.processes) == launched
    review = local.client.review(run["id"])
    assert review["status"] == "apply_start_uncertain"
    assert writer_of(ws)[0] == run["id"]
