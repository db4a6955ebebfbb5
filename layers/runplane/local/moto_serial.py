"""Make each moto request atomic, as each AWS request is.

moto's backends are not thread-safe: concurrent conditional writes to one
DynamoDB item can both "win" or crash mid-iteration. Serializing request
handling per service restores DynamoDB's per-request atomicity while races
*between* requests stay real. One lock per service, never one across
services: a Step Functions request runs Lambda handlers that call DynamoDB.

moto also remembers every model object it ever built (``instances_tracked``, for
its own reset), and each DynamoDB transaction deep-copies every table to roll
back with: kept forever, those copies grew the embedded stack by megabytes per
run. After each request the remembered objects are dropped; the backends keep
what is live.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

_PATCHED: dict[str, threading.RLock] = {}
_GUARD = threading.Lock()
# Requests served per service and action, for benchmarks (cost per run).
REQUEST_COUNTS: dict[str, Counter[str]] = {}


def _handler_class(service: str) -> type[Any]:
    if service == "dynamodb":
        from moto.dynamodb.responses import DynamoHandler

        return DynamoHandler  # type: ignore[no-any-return, unused-ignore]
    raise ValueError(f"no request serialization is defined for {service}")


def serialize_requests(service: str) -> threading.RLock:
    """Serialize ``service``'s request handling (idempotent); returns its lock."""
    with _GUARD:
        if service in _PATCHED:
            return _PATCHED[service]
        handler = _handler_class(service)
        lock = threading.RLock()
        original: Callable[..., Any] = handler.call_action

        counts: Counter[str] = REQUEST_COUNTS.setdefault(service, Counter())

        @functools.wraps(original)
        def call_action(self: Any) -> Any:
            with lock:
                counts[str(self._get_action())] += 1
                try:
                    return original(self)
                finally:
                    forget_tracked_instances()

        handler.call_action = call_action
        _PATCHED[service] = lock
        return lock


def forget_tracked_instances() -> None:
    """Drop moto's record of every model object it built; live ones stay in backends."""
    from moto.core.model_instances import model_data

    for models in list(model_data.values()):
        for model in list(models.values()):
            tracked = getattr(model, "instances_tracked", None)
            if tracked:
                tracked.clear()
