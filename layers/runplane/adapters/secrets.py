"""Secrets Manager reads, cached briefly in memory (never logged, never stored)."""

from __future__ import annotations

import threading
import time
from typing import Any

from runplane.domain.errors import GitHubNotConfigured

# A rotated secret is picked up within this long.
CACHE_SECONDS = 300.0


class Secrets:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, str]] = {}

    def read(self, arn: str | None, what: str) -> str:
        if not arn:
            raise GitHubNotConfigured(f"no {what} is configured for this deployment")
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(arn)
            if cached is not None and now - cached[0] < CACHE_SECONDS:
                return cached[1]
        value = self._client.get_secret_value(SecretId=arn).get("SecretString")
        if not isinstance(value, str) or not value:
            raise GitHubNotConfigured(f"the {what} secret is empty")
        with self._lock:
            self._cache[arn] = (now, value)
        return value
