"""Ship the run's log to the control plane while the phase runs.

The :class:`~runplane.runner.bounded_log.BoundedLog` hands its redacted head to
:meth:`LogShipper.feed` as it is decided (one redaction path: nothing reaches the
shipper unredacted). A sender thread cuts what it holds into chunks numbered from 0,
each sent with the byte offset it starts at. A chunk, once cut, is resent unchanged
until it is acknowledged, so a retried send is the same (attempt, sequence) and the
control plane stores it once.

``feed`` only appends to a buffer under a lock: however slow or absent the control
plane is, the engine never waits for it. The buffer is bounded by the live log's
bound. Transient failures (no connection, timeouts, 408, 429, 5xx) are retried with
exponential backoff; a refusal (any other 4xx) ends streaming, since the final log
artifact stays the source of truth. Standard library only (it runs in the sandbox).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from runplane.domain.logs import LIVE_LOG_BYTES, MAX_CHUNK_BYTES

TRANSIENT_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})


class SendFailed(Exception):
    """A chunk was not acknowledged; ``status`` is the HTTP status, None without one."""

    def __init__(self, status: int | None, message: str = "") -> None:
        super().__init__(message or f"chunk send failed ({status})")
        self.status = status

    @property
    def transient(self) -> bool:
        return self.status is None or self.status in TRANSIENT_STATUSES


Send = Callable[[int, int, bytes], None]
"""Send one chunk: (sequence, offset, data); raises :class:`SendFailed`."""


@dataclass(frozen=True)
class Pacing:
    interval: float = 2.0
    """Least time between two sends: a quiet log's next line goes after ``gather``,
    a busy log's lines are batched per interval. Each send is a runner call (its session's
    authentication, then one transaction): two seconds halves a busy phase's calls
    against one, and keeps a line's latency within about twice what it was."""
    gather: float = 0.25
    """How long the first line after a quiet spell waits for the lines that follow
    it (an engine prints in bursts: a burst goes as one chunk, not two)."""
    quiet: float = 1.0
    """A line after this long without output starts a quiet spell's burst: it goes
    after ``gather`` whenever the last send was."""
    batch_bytes: int = 32 * 1024
    """Send before the interval has passed once this much is waiting."""
    first_send: float = 1.0
    """How long after the phase starts its first chunk may go (sooner if ``batch_bytes``
    wait). A phase that ends within it streams nothing: its final log, stored as it
    ends, holds every line about as soon as streaming would have (a reader polls
    every half second), and the phase saves a runner call and a write."""
    first_backoff: float = 0.5
    max_backoff: float = 5.0
    drain_seconds: float = 10.0
    """How long :meth:`LogShipper.close` keeps trying to deliver what is left."""


def send_delay(
    pacing: Pacing, *, waiting: int, since: float, last_send: float, now: float, quiet: bool
) -> float:
    """Seconds until what is waiting (fed from ``since``; after a quiet spell if
    ``quiet``) should be sent; 0: now."""
    if waiting >= pacing.batch_bytes:
        return 0.0
    gathered = since + pacing.gather - now
    if quiet:
        return max(gathered, 0.0)
    return max(last_send + pacing.interval - now, gathered, 0.0)


class LogShipper:
    def __init__(
        self,
        send: Send,
        *,
        pacing: Pacing = Pacing(),
        limit: int = LIVE_LOG_BYTES,
        chunk_bytes: int = MAX_CHUNK_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._pacing = pacing
        self._limit = limit
        self._chunk_bytes = chunk_bytes
        self._clock = clock
        self._wake = threading.Condition()
        self._buffer = bytearray()  # fed, not yet cut into a chunk
        self._fed = 0
        self._since = 0.0  # when the buffer last went from empty to not empty
        self._quiet = True  # and whether that ended a quiet spell
        self._last_fed = float("-inf")
        self._in_flight: tuple[int, int, bytes] | None = None
        self._sequence = 0
        self._offset = 0  # where the next chunk starts
        self._closing = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.attempts = 0
        """Sends tried, retries included (for diagnostics and tests)."""
        self.stopped_reason: str | None = None

    @property
    def acknowledged(self) -> int:
        """Bytes the control plane has acknowledged."""
        in_flight = self._in_flight
        return in_flight[1] if in_flight else self._offset

    @property
    def chunks(self) -> int:
        """Chunks acknowledged."""
        return self._sequence - (1 if self._in_flight else 0)

    def feed(self, data: bytes) -> None:
        """Take more of the redacted log; never blocks on the network."""
        with self._wake:
            if self._stopped or self._closing:
                return
            room = self._limit - self._fed
            piece = data[: max(room, 0)]
            if piece:
                now = self._clock()
                if not self._buffer:
                    self._since = now
                    self._quiet = now - self._last_fed >= self._pacing.quiet
                self._last_fed = now
                self._buffer += piece
                self._fed += len(piece)
                self._wake.notify()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="log-shipper", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Deliver what is left, trying for at most ``drain_seconds``, then stop."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(self._pacing.drain_seconds)
        with self._wake:
            if not self._stopped:
                self._stopped = True
                self.stopped_reason = self.stopped_reason or "the drain time ran out"
            self._wake.notify()

    def abandon(self) -> None:
        """Stop now, sending nothing more: the final log, stored, holds the rest (it
        starts with exactly what was streamed). A send under way is not waited for."""
        with self._wake:
            self._stopped = True
            self._buffer.clear()
            self._wake.notify()

    # -- the sender thread ----------------------------------------------------------------

    def _loop(self) -> None:
        opening = self._clock() + self._pacing.first_send
        last_send = float("-inf")
        backoff = self._pacing.first_backoff
        while True:
            chunk = self._next_chunk(last_send, opening)
            if chunk is None:
                return
            sequence, offset, data = chunk
            last_send = self._clock()
            self.attempts += 1
            try:
                self._send(sequence, offset, data)
            except Exception as error:  # whatever went wrong, the engine must go on
                failed = error if isinstance(error, SendFailed) else SendFailed(None)
                if not failed.transient:
                    self._stop(f"the control plane refused chunk {sequence} ({failed.status})")
                    return
                if self._wait(backoff):
                    return
                backoff = min(backoff * 2, self._pacing.max_backoff)
                continue
            backoff = self._pacing.first_backoff
            with self._wake:
                self._in_flight = None
                self._offset = offset + len(data)

    def _next_chunk(self, last_send: float, opening: float) -> tuple[int, int, bytes] | None:
        """The chunk to send now (the unacknowledged one first); None to stop."""
        with self._wake:
            while True:
                if self._stopped:
                    return None
                if self._in_flight is not None:
                    return self._in_flight
                waiting = len(self._buffer)
                if waiting == 0 and self._closing:
                    self._stopped = True
                    return None
                now = self._clock()
                due = send_delay(
                    self._pacing,
                    waiting=waiting,
                    since=self._since,
                    last_send=last_send,
                    now=now,
                    quiet=self._quiet,
                )
                if last_send == float("-inf") and waiting < self._pacing.batch_bytes:
                    due = max(due, opening - now)
                if waiting and (self._closing or due <= 0):
                    data = bytes(self._buffer[: self._chunk_bytes])
                    del self._buffer[: len(data)]
                    self._in_flight = (self._sequence, self._offset, data)
                    self._sequence += 1
                    return self._in_flight
                self._wake.wait(due if waiting else None)

    def _wait(self, seconds: float) -> bool:
        """Back off; True if the shipper was stopped meanwhile."""
        with self._wake:
            self._wake.wait_for(lambda: self._stopped, timeout=seconds)
            return self._stopped

    def _stop(self, reason: str) -> None:
        with self._wake:
            self._stopped = True
            self.stopped_reason = reason
            self._buffer.clear()
            self._wake.notify()
