"""The run-event worker: an SQS-triggered Lambda. Each record is one message for
``EventWorker.handle``; a record that fails is reported back for redelivery (and,
after the queue's receive limit, the dead-letter queue) without failing the batch."""

from __future__ import annotations

import json
import logging
from typing import Any

from functions.observability import observed
from runplane.wiring import services

logger = logging.getLogger("runplane.events")


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    failures: list[dict[str, str]] = []
    worker = services().event_worker
    for record in event.get("Records", []):
        try:
            worker.handle(json.loads(record["body"]))
        except Exception as error:
            logger.error("event message failed", extra={"error": type(error).__name__})
            failures.append({"itemIdentifier": str(record.get("messageId", ""))})
    return {"batchItemFailures": failures}
