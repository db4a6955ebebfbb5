"""The outbox relay on hand-built stream records, in the shape AWS hands a Lambda: only
an outbox item's INSERT is queued; the first record that cannot be queued is named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runplane.services.event_relay import EventRelay
from runplane.store.outbox import DynamoEventOutbox

EVENT: dict[str, str] = {"id": "run-a.0000000003", "type": "applied"}
MESSAGE: dict[str, Any] = {"kind": "run_event", "event": EVENT}


def record(name: str, sort_key: str, sequence: int, **image: Any) -> dict[str, Any]:
    """A DynamoDB stream record (NEW_IMAGE view) of an item of the table."""
    keys = {"PK": {"S": "RUN#run-a"}, "SK": {"S": sort_key}}
    body: dict[str, Any] = {
        "ApproximateCreationDateTime": 1764590400.0,
        "Keys": keys,
        "SequenceNumber": str(sequence),
        "SizeBytes": 120,
        "StreamViewType": "NEW_IMAGE",
    }
    if name != "REMOVE":
        body["NewImage"] = {**keys, **{k: {"S": v} for k, v in image.items()}}
    return {
        "eventID": f"{sequence:032x}",
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": body,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/runplane/stream/x",
    }


class Queue:
    def __init__(self, fail_on: int | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self._fail_on = fail_on

    def send(self, message: Any, delay_seconds: int = 0) -> None:
        if self._fail_on is not None and len(self.sent) == self._fail_on:
            raise ConnectionError("queue unreachable")
        self.sent.append(dict(message))


def outbox(name: str, sequence: int, event_id: str = "run-a.0000000003") -> dict[str, Any]:
    message = {**MESSAGE, "event": {**EVENT, "id": event_id}}
    return record(name, f"EVENT#{event_id}", sequence, message=json.dumps(message))


def test_only_inserted_outbox_items_are_queued() -> None:
    # Given the records of one move: the run's two MODIFY records (moto writes two per
    # update), its audit INSERT, the outbox INSERT, then later the outbox item's MODIFY
    # and its TTL REMOVE, and an item whose sort key merely contains EVENT#
    records = [
        record("MODIFY", "RUN", 1, status="succeeded"),
        record("MODIFY", "RUN", 2, status="succeeded"),
        record("INSERT", "AUDIT#0000000003", 3, type="run.applied"),
        outbox("INSERT", 4),
        outbox("MODIFY", 5),
        outbox("REMOVE", 6),
        record("INSERT", "PART#EVENT#x", 7, message=json.dumps(MESSAGE)),
    ]
    queue = Queue()
    # When the relay handles them
    failed = EventRelay(lambda: queue, DynamoEventOutbox()).relay(records)
    # Then exactly the outbox item's message was queued, and every record was handled
    assert failed is None
    assert queue.sent == [MESSAGE]


def test_the_first_record_that_cannot_be_queued_is_named_and_stops_the_batch() -> None:
    # Given three outbox inserts and a queue that fails on the second send
    records = [outbox("INSERT", 10, "e1"), outbox("INSERT", 11, "e2"), outbox("INSERT", 12, "e3")]
    queue = Queue(fail_on=1)
    # When the relay handles them
    failed = EventRelay(lambda: queue, DynamoEventOutbox()).relay(records)
    # Then the first was queued, and the second is named for the retry (the third waits)
    assert [m["event"]["id"] for m in queue.sent] == ["e1"]
    assert failed == "11"


@pytest.mark.parametrize("records", [[], [record("INSERT", "RUN", 1, status="queued")]])
def test_batches_without_outbox_items_queue_nothing(records: list[dict[str, Any]]) -> None:
    queue = Queue()
    assert EventRelay(lambda: queue, DynamoEventOutbox()).relay(records) is None
    assert queue.sent == []
