"""Deterministic stand-ins for the clock and ID ports."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from runplane.domain.ids import IdKind


class FakeClock:
    """Starts at a fixed instant and moves forward a millisecond per reading."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._interruptions: list[Callable[[], object]] = []

    def now(self) -> datetime:
        self.current += timedelta(milliseconds=1)
        if self._interruptions:
            self._interruptions.pop(0)()
        return self.current

    def on_next_reading(self, interruption: Callable[[], object]) -> None:
        """Run ``interruption`` (another actor's step) when the clock is next read: a
        deterministic way to land it between a service's read and its write."""
        self._interruptions.append(interruption)

    def advance(self, delta: timedelta) -> None:
        self.current += delta


class SeededIds:
    """Well-formed public IDs from a seeded generator, so failures reproduce."""

    _ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"

    def __init__(self, seed: int = 7) -> None:
        self._random = random.Random(seed)

    def new(self, kind: IdKind) -> str:
        body = "".join(self._random.choice(self._ALPHABET) for _ in range(26))
        return f"{kind.value}-{body}"
