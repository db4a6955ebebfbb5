"""Deterministic stand-ins for the clock and ID ports."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from runplane.domain.ids import IdKind


class FakeClock:
    """Starts at a fixed instant and moves forward a millisecond per reading."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self.current += timedelta(milliseconds=1)
        return self.current

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
