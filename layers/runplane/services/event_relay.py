"""The outbox relay: queue the message of every outbox item the table's stream inserts.

The same service runs behind the stream's Lambda event source in AWS
(functions/events/relay.py) and behind the embedded stack's stream reader
(local/stream_relay.py). Records are handled in stream order; the first one whose
message cannot be queued stops the batch and is named, so it and those after it
are read again (a partial batch response). Relaying twice sends an event twice:
every consumer dedupes on the event ID, as the queue delivers at least once anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from runplane.adapters.event_queue import EventQueue

if TYPE_CHECKING:
    from runplane.services.repositories.operations import OutboxStream

logger = logging.getLogger("runplane.events")


class EventRelay:
    def __init__(self, queue: Callable[[], EventQueue], stream: OutboxStream) -> None:
        self._queue = queue
        self._stream = stream

    def relay(self, records: Iterable[Mapping[str, Any]]) -> str | None:
        """Queue each outbox INSERT among ``records``; ignore every other record.

        Returns None when all were handled, else the sequence number of the first
        record not handled (retry from it)."""
        for record in records:
            message = self._stream.message_of(record)
            if message is None:
                continue
            try:
                self._queue().send(message)
            except Exception as error:  # retried from this record: nothing is lost
                logger.error(
                    "outbox event not queued",
                    extra={"event_id": _event_id(message), "error": type(error).__name__},
                )
                return self._stream.position(record)
        return None


def _event_id(message: Mapping[str, Any]) -> str | None:
    event = message.get("event")
    return str(event.get("id")) if isinstance(event, Mapping) else None
