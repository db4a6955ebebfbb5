"""Relaying the outbox in tests that run under moto's decorator mode, where DynamoDB
Streams cannot be read: each outbox item becomes the INSERT record the stream would
carry (the shape AWS hands the relay Lambda), in commit order, and goes through the
real relay. tests/integration/test_outbox_relay.py reads the real stream instead."""

from __future__ import annotations

from typing import Any

from runplane.adapters.event_queue import EventQueue
from runplane.services.event_relay import EventRelay
from runplane.store.outbox import DynamoEventOutbox


def inserted_records(scanned: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stream records of the outbox items among ``scanned`` (DynamoDB JSON items)."""
    items = [item for item in scanned if item["SK"]["S"].startswith("EVENT#")]
    items.sort(key=lambda item: item["created_at"]["S"])
    return [
        {
            "eventID": f"{n:032x}",
            "eventName": "INSERT",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {
                "Keys": {"PK": item["PK"], "SK": item["SK"]},
                "NewImage": item,
                "SequenceNumber": str(100 + n),
                "SizeBytes": 100,
                "StreamViewType": "NEW_IMAGE",
            },
        }
        for n, item in enumerate(items)
    ]


def relay_outbox(scanned: list[dict[str, Any]], queue: EventQueue) -> None:
    """Relay every outbox item of ``scanned`` to ``queue``, as the stream relay would."""
    assert EventRelay(lambda: queue, DynamoEventOutbox()).relay(inserted_records(scanned)) is None
