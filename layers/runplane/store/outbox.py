"""The outbox: run events written in the same transaction as the change they announce.

An outbox item (``RUN#<run_id>`` / ``EVENT#<event_id>``) is put once, never
updated, and expires after ``RETENTION``. DynamoDB Streams carries each new item
to the relay, which queues its message: an event exists exactly when its change
committed, whatever happens to the process that committed it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from runplane.domain.errors import ConcurrentChange
from runplane.store.models import OUTBOX_PREFIX, OutboxItem, outbox_key
from runplane.store.table import SORT_KEY
from runplane.store.transaction import Transaction

# Long enough to look at what was relayed; the relay itself reads the stream (24 h).
RETENTION = timedelta(days=7)
INSERT = "INSERT"


def put(run_id: str, event_id: str, message: Mapping[str, Any], now: datetime) -> Transaction:
    """The put of one event's queue ``message`` (refused if the event exists already)."""
    return Transaction().put_new(
        OutboxItem(
            *outbox_key(run_id, event_id),
            run_id=run_id,
            event_id=event_id,
            message=json.dumps(dict(message), sort_keys=True),
            created_at=now,
            expires_at=now + RETENTION,
        ),
        on_refused=lambda current: ConcurrentChange(
            f"run {run_id}: event {event_id} was written already"
        ),
    )


def message_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The queue message of a stream record that inserted an outbox item, else None.

    Only an INSERT announces: an outbox item is never updated, and its REMOVE (TTL)
    or any other item's record is not an event."""
    if record.get("eventName") != INSERT:
        return None
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    sort_key = (image.get(SORT_KEY) or {}).get("S", "")
    body = (image.get("message") or {}).get("S")
    if not sort_key.startswith(OUTBOX_PREFIX) or body is None:
        return None
    message = json.loads(body)
    return message if isinstance(message, dict) else None


def sequence_number(record: Mapping[str, Any]) -> str:
    """The record's position in its shard (what a partial batch response names)."""
    return str((record.get("dynamodb") or {}).get("SequenceNumber", ""))


class DynamoEventOutbox:
    """``OutboxWrites`` and ``OutboxStream`` on the table and its stream
    (``services.repositories.operations``); its writes are transactions."""

    def put(
        self, run_id: str, event_id: str, message: Mapping[str, Any], at: datetime
    ) -> Transaction:
        return put(run_id, event_id, message, at)

    def message_of(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        return message_of(record)

    def position(self, record: Mapping[str, Any]) -> str:
        return sequence_number(record)
