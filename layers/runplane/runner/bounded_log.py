"""The bounded, redacting engine log: what the runner keeps and ships of an engine's output.

What is redacted of each secret (the run's sensitive variable values and the session's
own credentials; :mod:`runplane.domain.redaction` lists the spellings; the run's other
variable values are redacted only as written, the first item below):

- Every non-empty secret, whatever its length, as written: its UTF-8 bytes raw; escaped
  inside a JSON string (ASCII-only, UTF-8, and Go's HTML-safe variant of
  ``output -json``); inside an HCL quoted string as plans render it; inside a Go-quoted
  string (``%q``, as the engine's function errors print arguments: ``parseint``,
  ``timeadd``, ``sum``); and each line of at least :data:`MIN_SECRET_LINE` characters of
  a multi-line secret (plans render those as indented heredocs). A secret shorter than
  :data:`MIN_TRANSFORMED_SECRET` characters is matched exactly so, case included: a
  secret ``"1"`` blanks every ``1`` of the log, as it always did, and nothing more.
- A secret of at least :data:`MIN_TRANSFORMED_SECRET` characters also: in any letter
  case (ASCII letters in any mix; other letters all upper or all lower case, Python's
  case mapping); reversed by code point (``strrev``, ``reverse(split("", ...))``), in
  any case, each of these with the escapings above; and its UTF-8 bytes in base64,
  standard and URL-safe alphabets, alone (with and without padding) and as the
  characters that encode only the secret when it is embedded in a longer base64 stream
  at any of the three byte alignments (the one or two characters it shares with its
  neighbours stay); in hex (either case); URL-encoded (``urlencode``: ``+`` or ``%20``
  for a space, either hex case). In all of these a space of the secret also matches a
  newline, as the engine word-wraps its messages at 78 columns by replacing a space
  with one.

What is not: anything else a configuration can compute from a value, because Terraform
runs the configuration's code: a transformation composed of two of the above (base64 of
the upper-cased value, hex of the reversed one), a slice or a few characters of it (the
engine's ``regex`` errors quote just the offending range of a pattern, such as ``k-T``),
other encodings (base32, base64 wrapped across lines, rot13), per-character arithmetic
or interleaving, a run of several spaces that word-wrapping turned into one newline, and
a secret shorter than the minimum in any other spelling. Those are why a sensitive
workspace variable is also declared ``sensitive = true`` to the engine
(:mod:`runplane.runner.sensitive_override`), which then masks every value derived from
it in its plans and refuses to output one, and why the variables file itself is kept
out of the engine's reach.

Where this redaction is the only protection, for the spellings above: output of
providers and provisioners, and the engine's messages that print values it holds as
sensitive. In Terraform 1.0.3 those are the errors of ``file``, ``templatefile``,
``filebase64``, ``parseint``, ``base64decode``, ``cidrhost``, ``cidrsubnet``,
``cidrnetmask``, ``lookup``, ``timeadd``, ``formatdate``, ``sum`` and the regular
expressions of ``regex`` and ``replace``, and the "Invalid value for input variable"
error, which quotes the variables file's line (every value on it).
"""

from __future__ import annotations

import builtins
from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from runplane.domain.logs import LOG_CAP_BYTES
from runplane.domain.redaction import (
    MIN_SECRET_LINE,
    MIN_TRANSFORMED_SECRET,
    Needles,
    fold,
    secret_needles,
)

__all__ = [
    "DEFAULT_LOG_CAP",
    "MIN_SECRET_LINE",
    "MIN_TRANSFORMED_SECRET",
    "REDACTED",
    "BoundedLog",
]

DEFAULT_LOG_CAP: Final = LOG_CAP_BYTES
"""Default byte cap of a :class:`BoundedLog` (1 MiB)."""

REDACTED: Final = b"[redacted]"
"""What a secret is replaced with in a :class:`BoundedLog`."""

_READ_CHUNK: Final = 64 * 1024


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
    writes, so up to ``len(longest spelling) - 1`` raw bytes are held back until more
    output (or :meth:`bytes`) shows whether they start a secret: a match that starts
    before the hold-back boundary is always complete in the buffer. Matches of all secrets
    (overlapping or adjacent ones too) are merged into runs and each run becomes one
    ``[redacted]``. A run that crosses the boundary is emitted as a marker at once and its
    remainder is remembered as already covered, so the raw bytes stay available for
    matching a secret that overlaps it. The result is exactly that of redacting the whole
    stream at once, however it was split into writes. Empty secrets are ignored; the
    module's documentation lists the spellings of a secret that are redacted. Only a suffix
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
        *,
        values: Iterable[str] = (),
    ) -> None:
        """``secrets`` are redacted in every spelling listed above; ``values`` (a run's
        variables that are not sensitive) only as written, so what a configuration
        derives from one (an upper-cased region) still shows."""
        if cap_bytes < 2:
            raise ValueError("a BoundedLog needs a cap of at least 2 bytes")
        self.cap_bytes = cap_bytes
        self._head_cap = cap_bytes // 2
        self._head = bytearray()
        self._tail = _Tail(cap_bytes - self._head_cap)
        self._dropped = 0
        self._total = 0
        exact: set[builtins.bytes] = set()
        folded: set[builtins.bytes] = set()
        for secret, transformed in [*((s, True) for s in secrets), *((v, False) for v in values)]:
            spellings = secret_needles(secret, transformed=transformed)
            exact |= spellings.exact
            folded |= spellings.folded
        self._exact, self._folded = exact, folded
        self._needles = Needles(exact, folded)
        self._sink = sink
        # Raw bytes that may still start a secret, and how many of them a marker covers.
        self._pending: builtins.bytes = b""
        self._covered = 0
        self._joined = False  # the last byte stored was the end of a marker

    def also_redact(self, secrets: Iterable[str]) -> None:
        """Redact ``secrets`` too, in every spelling, in whatever is written from now on
        (and in the bytes held back). For secrets that did not exist before (credentials
        issued mid-phase): nothing already decided can hold them."""
        for secret in secrets:
            spellings = secret_needles(secret, transformed=True)
            self._exact |= spellings.exact
            self._folded |= spellings.folded
        self._needles = Needles(self._exact, self._folded)

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

    def _redact(
        self, buf: builtins.bytes, covered: int, joined: bool, *, final: bool
    ) -> tuple[builtins.bytes, builtins.bytes, int, bool]:
        """Redact the part of ``buf`` that can be decided now.

        ``covered`` leading bytes of ``buf`` are already inside an emitted marker, and
        ``joined`` says the last emitted byte was a marker (so a run starting at 0
        continues it). Returns the output, the raw bytes held back, and the new
        ``covered`` and ``joined`` for them.
        """
        folded = fold(buf)
        limit = len(buf) if final else self._needles.undecided(folded)
        if limit == 0:
            return b"", buf, covered, joined
        spans = ([(0, covered)] if covered else []) + self._needles.spans(buf, folded)
        if not spans:
            return buf[:limit], buf[limit:], 0, False
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
