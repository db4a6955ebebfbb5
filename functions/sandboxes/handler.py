"""The sandbox-stopped Lambda: an EventBridge rule's target, one ECS task state change
per invocation (the rule passes only the sandbox cluster's tasks that stopped).

Every event is acknowledged: one that is not a stopped task, or names a task no
sandbox was recorded for, or whose attempt already reported, changes nothing. The
event also carries the task's overrides (the runner's environment, its handles
included): nothing here logs the event or reads them.
"""

from __future__ import annotations

from typing import Any

from functions.observability import observed
from runplane.domain.sandbox_exits import stopped_task
from runplane.wiring import services


@observed
def stopped(event: dict[str, Any], context: Any) -> dict[str, str]:
    task = stopped_task(event)
    if task is None:
        return {"outcome": "ignored", "why": "not a stopped ECS task"}
    return services().sandbox_exits.task_stopped(task).as_dict()


@observed
def top_up(event: dict[str, Any], context: Any) -> dict[str, int]:
    """The standby pool's schedule (docs/standby.md): clear what ended, refill."""
    pool = services().standby_pool
    if pool is None:
        return {"cleared": 0, "live": 0, "started": 0}
    return pool.top_up()
