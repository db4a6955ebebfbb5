"""The outbox relay: a Lambda on the table's DynamoDB stream (filtered to inserted
outbox items). It queues each item's run event; a record that cannot be queued is
reported (partial batch response), so it and the records after it are retried."""

from __future__ import annotations

from typing import Any

from functions.observability import observed
from runplane.wiring import services


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    failed = services().event_relay.relay(event.get("Records") or [])
    return {"batchItemFailures": [{"itemIdentifier": failed}] if failed else []}
