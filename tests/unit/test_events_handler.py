"""The run-event worker Lambda: a batch's records run side by side, fairly per
organization, each failure reported alone (partial batch response)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from functions.events import handler as worker_lambda
from runplane.settings import Settings

PATIENCE = 10.0


def _record(message_id: str, body: Any) -> dict[str, Any]:
    return {"messageId": message_id, "body": body if isinstance(body, str) else json.dumps(body)}


def _deliver(organization: str, destination: str) -> dict[str, Any]:
    return {
        "kind": "deliver",
        "organization_id": organization,
        "destination_id": destination,
        "workspace_id": f"ws-{organization}",
        "event_id": "ev-1",
        "attempt": 1,
    }


def test_a_batch_is_handled_fairly_and_failures_reported_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release, a_done = threading.Event(), threading.Event()

    def handle(message: Mapping[str, Any]) -> None:
        if message["organization_id"] == "org-b":
            # B's trickling endpoints: they answer only after A's delivery was made
            assert a_done.wait(PATIENCE)
            assert release.wait(PATIENCE)
            if message["destination_id"] == "dest-b4":
                raise RuntimeError("no answer")
            return
        a_done.set()

    monkeypatch.setattr(
        worker_lambda,
        "services",
        lambda: SimpleNamespace(event_worker=SimpleNamespace(handle=handle), settings=Settings()),
    )
    records = [_record(f"m-b{n}", _deliver("org-b", f"dest-b{n}")) for n in range(1, 5)]
    records += [_record("m-bad", "{not json"), _record("m-a", _deliver("org-a", "dest-a1"))]
    # When the batch is handled (B's four records first)
    answer: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: answer.update(worker_lambda.handler({"Records": records}, None))
    )
    runner.start()
    # Then A's record is made while B's endpoints still hang
    assert a_done.wait(PATIENCE)
    release.set()
    runner.join(PATIENCE)
    assert not runner.is_alive()
    # And only the unreadable record and B's failed delivery are redelivered
    assert answer == {
        "batchItemFailures": [{"itemIdentifier": "m-bad"}, {"itemIdentifier": "m-b4"}]
    }
