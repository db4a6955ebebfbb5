"""The bounded, redacting engine log: what the runner keeps and ships of an engine's output."""

from __future__ import annotations

import builtins
import json
from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from runplane.domain.logs import LOG_CAP_BYTES

DEFAULT_LOG_CAP: Final = LOG_CAP_BYTES
"""Default byte cap of a :class:`BoundedLog` (1 MiB)."""

REDACTED: Final = b"[redacted]"
"""What a secret is replaced with in a :class:`BoundedLog`."""

MIN_SECRET_LINE: Final = 4
"""Shortest line of a multi-line secret that is also redacted on its own."""

_READ_CHUNK: Final = 64 * 1024


def _secret_forms(secret: str) -> set[str]:
    """The spellings under which the engine may print ``secret``.

    The raw value; its JSON escaping (ASCII and UTF-8, and Go's HTML-safe variant as used
    by ``output -json``); its HCL quoting as rendered in plans; and for a multi-line secret
    each line of at least :data:`MIN_SECRET_LINE` characters, since plans render such
    strings as indented heredocs.
    """
    utf8_json = json.dumps(secret, ensure_ascii=False)[1:-1]
    go_json = utf8_json.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    hcl = (
        secret.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("${", "$${")
        .replace("%{", "%%{")
    )
    forms = {secret, json.dumps(secret)[1:-1], utf8_json, go_json, hcl}
    if "\n" in secret or "\r" in secret:
        forms.update(
            line.strip() for line in secret.splitlines() if len(line.strip()) >= MIN_SECRET_LINE
        )
    return {form for form in forms if form}


class _Tail:
    """The most recent ``cap`` bytes of a stream, held as a queue of sealed chunks.

    Small writes are coalesced into an open chunk of up to :data:`_READ_CHUNK` bytes;
    bytes falling out of the window are skipped inside the oldest chunk until all of it
    is out. So memory is ``cap`` plus at most two chunks, with no per-write copying of
    the window.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.size = 0
        self._sealed: deque[bytearray] = deque()
        self._skip = 0  # bytes of the oldest sealed chunk already out of the window
        self._open = bytearray()

    def add(self, data: bytes) -> int:
        """Append ``data``; return how many bytes fell out of the window."""
        if self._open and len(self._open) + len(data) > _READ_CHUNK:
            self._sealed.append(self._open)
            self._open = bytearray()
        self._open += data
        self.size += len(data)
        dropped = 0
        while self.size > self.cap:
            excess = self.size - self.cap
            if self._sealed:
                available = len(self._sealed[0]) - self._skip
                step = min(excess, available)
                self._skip += step
                if self._skip == len(self._sealed[0]):
                    self._sealed.popleft()
                    self._skip = 0
            else:
                step = excess
                del self._open[:step]
            self.size -= step
            dropped += step
        return dropped

    def value(self) -> bytes:
        parts: list[bytes | bytearray] = [*self._sealed, self._open]
        if self._sealed:
            parts[0] = memoryview(self._sealed[0])[self._skip :].tobytes()
        return b"".join(parts)


class BoundedLog:
    """Engine output, capped at ``cap_bytes`` and with secrets redacted.

    Size: the first half of the cap is kept (the head), then only the most recent half
    (the tail); :meth:`bytes` joins them with one ``[... N bytes truncated ...]`` line
    where N is the number of (redacted) bytes dropped. Memory stays at the cap plus a few
    read chunks plus the redaction carry, whatever the output size.

    Redaction happens on the stream, before anything is stored, so neither the head, the
    tail nor the truncation point can expose a secret. A secret may be split across
    writes, so the last ``len(longest secret) - 1`` raw bytes are held back until more
    output (or :meth:`bytes`) shows whether they start a secret: a match that starts
    before the hold-back boundary is always complete in the buffer. Matches of all secrets
    (overlapping or adjacent ones too) are merged into runs and each run becomes one
    ``[redacted]``. A run that crosses the boundary is emitted as a marker at once and its
    remainder is remembered as already covered, so the raw bytes stay available for
    matching a secret that overlaps it. The result is exactly that of redacting the whole
    stream at once, however it was split into writes. Empty secrets are ignored; see
    :func:`_secret_forms` for the spellings of a secret that are redacted. Only a suffix
    that could still begin a secret is held back, so a line that cannot is decided (and
    streamed) as soon as it is written.

    Streaming: ``sink``, if given, receives the head as it is decided, redacted, in
    order; :meth:`close` decides the held-back rest. What a sink received is always the
    start of :meth:`bytes`.
    """

    def __init__(
        self,
        cap_bytes: int = DEFAULT_LOG_CAP,
        secrets: Iterable[str] = (),
        sink: Callable[[builtins.bytes], None] | None = None,
    ) -> None:
        if cap_bytes < 2:
            raise ValueError("a BoundedLog needs a cap of at least 2 bytes")
        self.cap_bytes = cap_bytes
        self._head_cap = cap_bytes // 2
        self._head = bytearray()
        self._tail = _Tail(cap_bytes - self._head_cap)
        self._dropped = 0
        self._total = 0
        needles: set[builtins.bytes] = set()
        for secret in secrets:
            if secret:
                needles.update(form.encode("utf-8") for form in _secret_forms(secret))
        self._needles = tuple(sorted(needles, key=len, reverse=True))
        self._hold = max((len(n) for n in self._needles), default=1) - 1
        self._firsts = frozenset(needle[0] for needle in self._needles)
        self._sink = sink
        # Raw bytes that may still start a secret, and how many of them a marker covers.
        self._pending: builtins.bytes = b""
        self._covered = 0
        self._joined = False  # the last byte stored was the end of a marker

    @property
    def total_bytes(self) -> int:
        """Bytes written to the log (before redaction and truncation)."""
        return self._total

    @property
    def truncated(self) -> bool:
        """Whether output was dropped to stay within the cap."""
        rest = self._redact(self._pending, self._covered, self._joined, final=True)[0]
        beyond_head = max(0, len(rest) - (self._head_cap - len(self._head)))
        return self._dropped > 0 or self._tail.size + beyond_head > self._tail.cap

    def write(self, data: builtins.bytes | str) -> None:
        """Append engine output (``str`` is encoded as UTF-8)."""
        raw = data.encode("utf-8") if isinstance(data, str) else builtins.bytes(data)
        for start in range(0, len(raw), _READ_CHUNK):
            piece = raw[start : start + _READ_CHUNK]
            self._total += len(piece)
            out, self._pending, self._covered, self._joined = self._redact(
                self._pending + piece, self._covered, self._joined, final=False
            )
            self._store(out)

    def close(self) -> None:
        """Decide the held-back bytes now: nothing more will be written that could
        complete a secret. Writing after this starts afresh (call it at the end)."""
        rest = self._redact(self._pending, self._covered, self._joined, final=True)[0]
        self._pending, self._covered = b"", 0
        self._store(rest)

    def _store(self, out: builtins.bytes) -> None:
        room = self._head_cap - len(self._head)
        if room > 0:
            head = out[:room]
            self._head += head
            out = out[room:]
            if self._sink is not None and head:
                self._sink(head)
        if out:
            self._dropped += self._tail.add(out)

    def bytes(self) -> builtins.bytes:
        """The log as stored: head, a truncation marker if anything was dropped, tail."""
        rest = self._redact(self._pending, self._covered, self._joined, final=True)[0]
        room = self._head_cap - len(self._head)
        head = builtins.bytes(self._head) + rest[: max(room, 0)]
        tail = self._tail.value() + rest[max(room, 0) :]
        dropped = self._dropped + max(0, len(tail) - self._tail.cap)
        if dropped:
            tail = tail[len(tail) - self._tail.cap :]
            marker = f"\n[... {dropped} bytes truncated ...]\n".encode()
            return head + marker + tail
        return head + tail

    def text(self) -> str:
        """:meth:`bytes` decoded as UTF-8 (a character cut by truncation becomes U+FFFD)."""
        return self.bytes().decode("utf-8", errors="replace")

    def _undecided(self, buf: builtins.bytes) -> int:
        """Where the suffix of ``buf`` that may still begin a secret starts.

        Any match starting before it is complete in ``buf``: a position within the last
        ``hold`` bytes whose suffix is no secret's prefix starts no unfinished match.
        """
        for at in range(max(0, len(buf) - self._hold), len(buf)):
            if buf[at] in self._firsts:
                suffix = buf[at:]
                if any(needle.startswith(suffix) for needle in self._needles):
                    return at
        return len(buf)

    def _redact(
        self, buf: builtins.bytes, covered: int, joined: bool, *, final: bool
    ) -> tuple[builtins.bytes, builtins.bytes, int, bool]:
        """Redact the part of ``buf`` that can be decided now.

        ``covered`` leading bytes of ``buf`` are already inside an emitted marker, and
        ``joined`` says the last emitted byte was a marker (so a run starting at 0
        continues it). Returns the output, the raw bytes held back, and the new
        ``covered`` and ``joined`` for them.
        """
        limit = len(buf) if final else self._undecided(buf)
        if limit == 0:
            return b"", buf, covered, joined
        spans: list[tuple[int, int]] = [(0, covered)] if covered else []
        for needle in self._needles:
            at = buf.find(needle)
            while at != -1:
                spans.append((at, at + len(needle)))
                at = buf.find(needle, at + 1)
        if not spans:
            return buf[:limit], buf[limit:], 0, False
        spans.sort()
        runs: list[list[int]] = []
        for start, end in spans:
            if runs and start <= runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], end)
            else:
                runs.append([start, end])
        out = bytearray()
        pos = 0
        for start, end in runs:
            if start >= limit:
                break
            out += buf[pos:start]
            if not (start == 0 and (covered or joined)):  # else: continues the last marker
                out += REDACTED
            if end >= limit:
                return builtins.bytes(out), buf[limit:], end - limit, True
            pos = end
        out += buf[pos:limit]
        return builtins.bytes(out), buf[limit:], 0, False
