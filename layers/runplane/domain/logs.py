"""Run logs: the bounds shared by the runner that streams them and the API that serves them.

A phase's log is bounded twice over: the runner keeps at most ``LOG_CAP_BYTES``
(the first half and the most recent half, see ``runplane.runner.bounded_log.BoundedLog``)
for the final log artifact, and streams live only the first half, ``LIVE_LOG_BYTES``.
That half is exactly the start of the final log, so an offset into the live log is an
offset into the final log too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

LOG_CAP_BYTES: Final = 1024 * 1024
"""Most bytes of one phase's final log (1 MiB, plus one truncation line)."""

LIVE_LOG_BYTES: Final = LOG_CAP_BYTES // 2
"""Most bytes of one phase's log streamed while it runs (the final log's head)."""

MAX_CHUNK_BYTES: Final = 64 * 1024
"""Largest live log chunk the runner may send at once."""

MAX_CHUNKS: Final = 4096
"""Most live chunks one attempt may store; past it only the final log is shown."""

DEFAULT_READ_BYTES: Final = 2 * LOG_CAP_BYTES
"""What one log read returns when no ``limit`` is given: a whole log."""

MIN_READ_BYTES: Final = 4
"""Smallest ``limit`` of a log read: room for any one UTF-8 character."""

END_OF_TEXT: Final = "\x03"
"""Ends the body of a read that reached the end of a complete log (as TFE logs do)."""


def utf8_end(data: bytes, *, more: bool) -> int:
    """Where to cut ``data`` so that it does not end inside a UTF-8 character.

    With ``more`` (the log goes on after ``data``) a trailing incomplete character is
    left for the next read; otherwise, or if nothing else would be returned, all of
    ``data`` is kept.
    """
    if not more:
        return len(data)
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back for the lead
            continue
        need = 2 if byte >= 0xC0 else 1
        need = 3 if byte >= 0xE0 else need
        need = 4 if byte >= 0xF0 else need
        cut = len(data) - back
        return cut if need > back and cut > 0 else len(data)
    return len(data)


@dataclass(frozen=True)
class LogChunk:
    """One chunk of an attempt's live log: bytes ``offset`` to ``end`` of the phase's
    log, stored as an artifact of their own."""

    run_id: str
    organization_id: str
    attempt_id: str
    phase: str
    sequence: int
    offset: int
    size: int
    sha256: str
    artifact_id: str
    created_at: datetime

    @property
    def end(self) -> int:
        return self.offset + self.size
