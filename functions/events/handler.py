"""The run-event worker: an SQS-triggered Lambda. Each record is one message for
``EventWorker.handle``; a record that fails is reported back for redelivery (and,
after the queue's receive limit, the dead-letter queue) without failing the batch.

A batch's records run side by side, fairly across organizations
(``run_fairly``: at most two deliveries of one organization and one of one
destination at once), so a record is never held up behind another organization's
slow endpoints in the same batch. Across invocations the same bounds are held by
slots in the table (the notifications service's ``DeliverySlots``): a delivery
refused one is queued again a little later and its record succeeds."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from functions.observability import observed
from runplane.adapters.event_queue import Lane, lane_of, run_fairly
from runplane.wiring import services

logger = logging.getLogger("runplane.events")

# As many threads as the event source mapping's batch size (infra/constructs/events.py).
BATCH_WORKERS = 4


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    failures: list[dict[str, str]] = []
    built = services()
    worker = built.event_worker
    ids: list[str] = []
    messages: list[Mapping[str, Any]] = []
    for record in event.get("Records", []):
        message_id = str(record.get("messageId", ""))
        try:
            message = json.loads(record["body"])
            if not isinstance(message, Mapping):
                raise TypeError("an event message is a JSON object")
        except Exception as error:
            logger.error("event message failed", extra={"error": type(error).__name__})
            failures.append({"itemIdentifier": message_id})
            continue
        ids.append(message_id)
        messages.append(message)
    lanes: list[Lane] = [lane_of(message) for message in messages]
    outcomes = run_fairly(
        messages,
        lanes,
        worker.handle,
        workers=BATCH_WORKERS,
        per_organization=built.settings.notification_organization_slots,
        per_destination=built.settings.notification_destination_slots,
    )
    for message_id, outcome in zip(ids, outcomes, strict=True):
        if outcome is not None:
            logger.error("event message failed", extra={"error": type(outcome).__name__})
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}
