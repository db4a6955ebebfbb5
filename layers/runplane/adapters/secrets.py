"""Secrets Manager reads, cached briefly in memory (never logged, never stored)."""

from __future__ import annotations

import threading
import time
from typing import Any

from runplane.adapters.acting_function import acting_function
from runplane.domain.errors import GitHubNotConfigured

# A rotated secret is picked up within this long.
CACHE_SECONDS = 300.0


class Secrets:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        # Keyed by the function reading too: in AWS each function has its own process
        # (and cache) and that part is always None; where the embedded stack runs them
        # all in one, each still reads the secret itself, under its own role.
        self._cache: dict[tuple[str | None, str], tuple[float, str]] = {}

    def read(self, arn: str | None, what: str) -> str:
        if not arn:
            raise GitHubNotConfigured(f"no {what} is configured for this deployment")
        now = time.monotonic()
        cache_key = (acting_function(), arn)
        with self._lock:
            cached = self._cache.get(cache_key)
            if cached is not None and now - cached[0] < CACHE_SECONDS:
                return cached[1]
        value = self._client.get_secret_value(SecretId=arn).get("SecretString")
        if not isinstance(value, str) or not value:
            raise GitHubNotConfigured(f"the {what} secret is empty")
        with self._lock:
            self._cache[cache_key] = (now, value)
        return value
