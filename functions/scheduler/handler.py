"""The fire-schedule Lambda: EventBridge Scheduler's target, one call per fire.

A workspace schedule's input carries the schedule ID and the scheduled time only; a
duplicate delivery of the same fire creates nothing (the service's conditional put).
The deployment's own auto-destroy sweep (``{"sweep": "auto_destroy"}``, every five
minutes) takes one step for every armed workspace (docs/auto-destroy.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from functions.observability import observed
from runplane.domain.auto_destroy import SWEEP
from runplane.domain.errors import InvalidInput
from runplane.wiring import services


@observed
def fire(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("sweep") is not None:
        if event["sweep"] != SWEEP:
            raise InvalidInput(f"no sweep is named {str(event['sweep'])[:40]!r}", "/sweep")
        return {"sweep": SWEEP, "steps": services().auto_destroys.sweep()}
    try:
        schedule_id = str(event["schedule_id"])
        scheduled_at = datetime.fromisoformat(str(event["scheduled_time"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        raise InvalidInput("a fire names schedule_id and scheduled_time (ISO 8601)") from None
    if scheduled_at.tzinfo is None:
        raise InvalidInput("scheduled_time must carry its time zone", "/scheduled_time")
    return services().schedules.fire(schedule_id, scheduled_at)
