"""The outbox relay Lambda: a stream batch of outbox inserts goes to the event queue
(SQS), and a record it cannot queue is reported so the batch resumes from it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from functions.events import relay
from runplane import wiring
from runplane.services.run_events import RunEvents
from runplane.settings import Settings
from runplane.store.outbox import DynamoEventOutbox
from tests.integration.arena import Arena, awaiting_approval
from tests.integration.conftest import BUCKET, TABLE
from tests.integration.outbox import inserted_records
from tests.integration.test_run_events import ListQueue


def _install(arena: Arena, queue_url: str) -> None:
    wiring.install(
        wiring.build_services(
            Settings(
                table_name=TABLE,
                artifact_bucket=BUCKET,
                event_queue_url=queue_url,
                aws_region="us-east-1",
            ),
            clock=arena.stack.clock,
            ids=arena.stack.ids,
        )
    )


@pytest.fixture(autouse=True)
def announcing(arena: Arena, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack's lifecycle writes its moves' events to the outbox (nothing is sent)."""
    monkeypatch.setattr(
        arena.stack.lifecycle,
        "events",
        RunEvents(arena.stack.clock, lambda: ListQueue(), DynamoEventOutbox()),
    )


@pytest.fixture
def queue_url(arena: Arena) -> Iterator[str]:
    url = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="run-events")[
        "QueueUrl"
    ]
    _install(arena, url)
    yield url
    wiring._installed.clear()


def _received(url: str) -> list[dict[str, object]]:
    sqs = boto3.client("sqs", region_name="us-east-1")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(message["Body"]) for message in messages]


def test_a_batch_of_outbox_inserts_is_queued_and_reports_no_failure(
    arena: Arena, queue_url: str
) -> None:
    # Given a run whose move to awaiting approval wrote an outbox item, as the stream
    # hands it
    _, run_id = awaiting_approval(arena, "relayed")
    records = [
        record
        for record in inserted_records(arena.stack.scan())
        if record["dynamodb"]["Keys"]["PK"]["S"] == f"RUN#{run_id}"
    ]
    assert records, "the moves wrote no outbox item"

    # When the relay Lambda receives the batch
    answer = relay.handler({"Records": records}, None)

    # Then every event is on the queue, and no record is reported as failed
    assert answer == {"batchItemFailures": []}
    queued = _received(queue_url)
    assert sorted(str(m["event"]["id"]) for m in queued) == sorted(  # type: ignore[index]
        json.loads(r["dynamodb"]["NewImage"]["message"]["S"])["event"]["id"] for r in records
    )
    assert all(m["event"]["run_id"] == run_id for m in queued)  # type: ignore[index]


def test_a_record_that_cannot_be_queued_is_reported_for_retry(arena: Arena) -> None:
    # Given outbox inserts, and a relay whose queue does not exist
    awaiting_approval(arena, "unqueued")
    records = inserted_records(arena.stack.scan())
    _install(arena, "https://sqs.us-east-1.amazonaws.com/123456789012/missing")
    try:
        # When the relay Lambda receives the batch
        answer = relay.handler({"Records": records}, None)
    finally:
        wiring._installed.clear()

    # Then the first record is reported, so the batch is retried from it
    first = records[0]["dynamodb"]["SequenceNumber"]
    assert answer == {"batchItemFailures": [{"itemIdentifier": first}]}
