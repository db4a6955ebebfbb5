"""Drive the pinned engine binary (OpenTofu, or Terraform as a compatible stand-in).

This module resolves the engine, writes the files that point it at the Runplane Cloud API,
runs its commands with bounded, redacted logs and hard timeouts, and recognises failures
caused by missing cloud credentials. It uses the standard library (and the pure domain
rule for variable names) only: no network and no AWS code.

Every command runs in its own session (so in its own process group) with stdin closed.
Output is read incrementally from the pipes and streamed into a :class:`BoundedLog`; the
whole output is never buffered. A timeout sends SIGTERM to the group (the engine stops
gracefully, releasing locks where it can), then SIGKILL after a grace period, and raises
:class:`EngineTimeout`. A non-zero exit is never an exception for the commands that
return an :class:`EngineResult`.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from runplane.domain.logs import LOG_CAP_BYTES
from runplane.domain.variables import name_problem
from runplane.runner.cli_config import cli_config, provider_installation
from runplane.runner.refusal import Refused

DEFAULT_LOG_CAP: Final = LOG_CAP_BYTES
"""Default byte cap of a :class:`BoundedLog` (1 MiB)."""

MAX_PLAN_JSON_BYTES: Final = 200 * 1024 * 1024
"""Largest ``show -json`` document :meth:`Engine.show_json` accepts (200 MiB)."""

REDACTED: Final = b"[redacted]"
"""What a secret is replaced with in a :class:`BoundedLog`."""

BACKEND_OVERRIDE_NAME: Final = "runplane_backend_override.tf"

MIN_SECRET_LINE: Final = 4
"""Shortest line of a multi-line secret that is also redacted on its own."""

_READ_CHUNK: Final = 64 * 1024
_SMALL_OUTPUT: Final = 1024 * 1024
_DRAIN_SECONDS: Final = 2.0
_POLL_SECONDS: Final = 0.25

# The engine reads these; the caller's environment wins where it sets them.
_ENGINE_ENV_DEFAULTS: Final[Mapping[str, str]] = {
    "TF_IN_AUTOMATION": "1",
    "TF_INPUT": "0",
    "CHECKPOINT_DISABLE": "1",
}

# Reserved by the platform, whatever the caller's environment says: recovery verifies at
# most 1,024 state publications per apply, which this persistence interval bounds.
_ENGINE_ENV_PLATFORM: Final[Mapping[str, str]] = {"TF_STATE_PERSIST_INTERVAL": "20"}

_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?")
_TFE_NAME = re.compile(r"[A-Za-z0-9_-]+")
_API_URL = re.compile(r"https?://[^\s\"'\\$%{}]+")
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=:-]+")
_VERSION = re.compile(r"\bv?(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?)")


# --------------------------------------------------------------------------- errors


class EngineError(Exception):
    """Base of every error raised by the engine driver."""


class EngineNotFound(EngineError):
    """No usable engine binary: the pinned path is wrong, or nothing is on PATH."""


class EngineTimeout(EngineError):
    """A command ran past its timeout; its whole process group was killed."""

    def __init__(self, command: Sequence[str], timeout_seconds: float) -> None:
        self.command = tuple(command)
        self.timeout_seconds = timeout_seconds
        super().__init__(
            f"engine command {' '.join(self.command)!r} did not finish within "
            f"{timeout_seconds:g} s; its process group was killed"
        )


class EngineCommandFailed(EngineError):
    """A command whose output is a value (``show -json``, ``version``) exited non-zero."""

    def __init__(self, command: Sequence[str], exit_code: int) -> None:
        self.command = tuple(command)
        self.exit_code = exit_code
        super().__init__(
            f"engine command {' '.join(self.command)!r} exited with {exit_code}; see the log"
        )


class EngineOutputTooLarge(EngineError):
    """A command printed more than the driver accepts; the command was killed."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        super().__init__(f"engine output exceeds the {limit_bytes} byte limit")


class EngineOutputInvalid(EngineError):
    """A command's output could not be understood (for example, not a JSON object)."""


# --------------------------------------------------------------------------- resolution


def resolve_engine(pinned: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path:
    """The engine binary to run.

    An explicit ``pinned`` path wins and must be an executable file. Otherwise ``tofu`` on
    ``environ["PATH"]``, else ``terraform`` on it. Raises :class:`EngineNotFound`.
    """
    if pinned is not None and os.fspath(pinned) != "":
        path = Path(pinned)
        if not path.is_file():
            raise EngineNotFound(f"pinned engine binary {str(path)!r} does not exist")
        if not os.access(path, os.X_OK):
            raise EngineNotFound(f"pinned engine binary {str(path)!r} is not executable")
        return path.absolute()
    search = environ.get("PATH", os.defpath)
    for name in ("tofu", "terraform"):
        found = shutil.which(name, path=search)
        if found is not None:
            return Path(found).absolute()
    raise EngineNotFound(
        "no engine binary: none was pinned and neither 'tofu' nor 'terraform' is on "
        f"PATH {search!r}"
    )


# --------------------------------------------------------------------------- bounded log


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


# --------------------------------------------------------------------------- engine


@dataclass(frozen=True)
class EngineResult:
    """How one engine command ended."""

    exit_code: int
    """The engine's exit status; negative if a signal ended it."""
    command: tuple[str, ...]
    """The arguments after the binary (they never carry a secret)."""
    duration_seconds: float
    has_changes: bool | None = None
    """For ``plan``: True on exit 2, False on exit 0, None on failure; None otherwise."""

    @property
    def succeeded(self) -> bool:
        """Exit 0, or exit 2 of a ``plan`` (changes present)."""
        return self.exit_code == 0 or self.has_changes is True


class _Capture:
    """A byte sink that refuses more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()

    def write(self, chunk: bytes) -> None:
        if len(self.data) + len(chunk) > self.limit:
            raise EngineOutputTooLarge(self.limit)
        self.data += chunk


class Engine:
    """Runs engine commands in ``workdir`` with exactly ``env`` (plus automation defaults).

    ``TF_IN_AUTOMATION``, ``TF_INPUT=0`` and ``CHECKPOINT_DISABLE`` are set unless ``env``
    sets them; ``TF_STATE_PERSIST_INTERVAL`` is always the platform's. Relative plan
    paths are relative to ``workdir``. ``timeout_seconds`` bounds each command;
    ``kill_grace_seconds`` is how long a timed-out engine may take to stop after
    SIGTERM before its process group gets SIGKILL.
    """

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        env: Mapping[str, str],
        log: BoundedLog,
        timeout_seconds: float = 3600,
        *,
        kill_grace_seconds: float = 10.0,
        max_json_bytes: int = MAX_PLAN_JSON_BYTES,
    ) -> None:
        self.binary = Path(binary)
        self.workdir = Path(workdir)
        self.log = log
        self.timeout_seconds = timeout_seconds
        self.kill_grace_seconds = kill_grace_seconds
        self.max_json_bytes = max_json_bytes
        self._env = {**_ENGINE_ENV_DEFAULTS, **env, **_ENGINE_ENV_PLATFORM}
        self._init_accepts_lock: bool | None = None

    # -- commands ---------------------------------------------------------------------

    def init(self, lock: bool = True, backend_config: Path | None = None) -> EngineResult:
        """``init -input=false -no-color``; ``-lock=false`` if unlocked and supported.

        Terraform 1.0.x has no ``-lock`` option on ``init`` (it takes no state lock
        there), so the flag is only passed to engines whose ``init -help`` lists it.
        ``backend_config`` (see :func:`write_backend_config`) is passed as
        ``-backend-config``: its values win over any file of the configuration.
        """
        args = ["init", "-input=false", "-no-color"]
        if not lock and self._init_supports_lock():
            args.append("-lock=false")
        if backend_config is not None:
            args.append(f"-backend-config={backend_config}")
        return self._result(args)

    def plan(
        self,
        out: Path,
        lock: bool,
        destroy: bool = False,
        var_file: Path | None = None,
        refresh_only: bool = False,
    ) -> EngineResult:
        """``plan -detailed-exitcode -out=OUT``; the result's ``has_changes`` reads exit 2.

        Variable values never go on the command line (any local user can read it): they
        are in ``var_file`` (see :func:`write_var_file`), passed as ``-var-file``, which
        wins over the configuration's own ``*.tfvars`` files as ``-var`` would.
        """
        args = ["plan", "-input=false", "-no-color", "-detailed-exitcode", f"-out={out}"]
        if not lock:
            args.append("-lock=false")
        if destroy:
            args.append("-destroy")
        if refresh_only:
            # Exit code 2 then means the refresh found changes made outside the engine.
            args.append("-refresh-only")
        if var_file is not None:
            args.append(f"-var-file={var_file}")
        exit_code, duration = self._run(args)
        has_changes = {0: False, 2: True}.get(exit_code)
        return EngineResult(exit_code, tuple(args), duration, has_changes)

    def show_json(self, plan: Path) -> dict[str, Any]:
        """The ``show -json`` document of a saved plan.

        Stdout is captured apart from the log, up to ``max_json_bytes``
        (:class:`EngineOutputTooLarge` beyond, after killing the engine); stderr goes to
        the log. Raises :class:`EngineCommandFailed` on a non-zero exit and
        :class:`EngineOutputInvalid` if stdout is not a JSON object.
        """
        args = ["show", "-json", "-no-color", str(plan)]
        capture = _Capture(self.max_json_bytes)
        exit_code, _ = self._run(args, stdout=capture.write)
        if exit_code != 0:
            raise EngineCommandFailed(args, exit_code)
        try:
            document = json.loads(capture.data)
        except ValueError as error:
            raise EngineOutputInvalid(f"show -json printed invalid JSON: {error}") from None
        if not isinstance(document, dict):
            raise EngineOutputInvalid("show -json printed JSON that is not an object")
        return document

    def apply(self, plan: Path, lock: bool = True) -> EngineResult:
        """``apply -input=false -no-color [-lock=false] PLAN``.

        A saved plan is its own approval: the engine applies it without prompting, so no
        ``-auto-approve`` is passed (checked with Terraform 1.0.3).
        """
        args = ["apply", "-input=false", "-no-color"]
        if not lock:
            args.append("-lock=false")
        args.append(str(plan))
        return self._result(args)

    def version(self) -> str:
        """The engine's version number, such as ``"1.0.3"`` (from ``version -json``)."""
        args = ["version", "-json"]
        capture = _Capture(_SMALL_OUTPUT)
        exit_code, _ = self._run(args, stdout=capture.write)
        if exit_code != 0:
            raise EngineCommandFailed(args, exit_code)
        text = capture.data.decode("utf-8", errors="replace")
        with contextlib.suppress(ValueError):
            document = json.loads(text)
            if isinstance(document, dict) and isinstance(document.get("terraform_version"), str):
                return str(document["terraform_version"])
        match = _VERSION.search(text)
        if match is None:
            raise EngineOutputInvalid(f"cannot read a version from {text[:200]!r}")
        return match.group(1)

    # -- process handling -------------------------------------------------------------

    def _init_supports_lock(self) -> bool:
        if self._init_accepts_lock is None:
            capture = _Capture(_SMALL_OUTPUT)
            self._run(["init", "-help"], stdout=capture.write, header=False)
            self._init_accepts_lock = b"-lock=" in capture.data
        return self._init_accepts_lock

    def _result(self, args: list[str]) -> EngineResult:
        exit_code, duration = self._run(args)
        return EngineResult(exit_code, tuple(args), duration)

    def _run(
        self,
        args: Sequence[str],
        *,
        stdout: Callable[[bytes], None] | None = None,
        header: bool = True,
    ) -> tuple[int, float]:
        """Run one command; stdout to ``stdout`` (else the log), stderr to the log."""
        display = tuple(args)
        if header:
            self.log.write(f"$ {self.binary.name} {' '.join(display)}\n")
        started = time.monotonic()
        deadline = started + self.timeout_seconds
        try:
            process = subprocess.Popen(  # noqa: S603 - a fixed argument list, no shell
                [str(self.binary), *args],
                cwd=self.workdir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if stdout is not None else subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            raise EngineError(
                f"cannot start the engine {str(self.binary)!r} in {str(self.workdir)!r}: "
                f"{error.strerror or error}"
            ) from error
        with process:
            try:
                self._pump(process, stdout or self.log.write, deadline, display)
            except BaseException:
                self._kill(process)
                raise
        return process.returncode, time.monotonic() - started

    def _pump(
        self,
        process: subprocess.Popen[bytes],
        stdout: Callable[[bytes], None],
        deadline: float,
        display: tuple[str, ...],
    ) -> None:
        sinks: dict[IO[bytes], Callable[[bytes], None]] = {}
        if process.stdout is not None:
            sinks[process.stdout] = stdout
        if process.stderr is not None:
            sinks[process.stderr] = self.log.write
        exited_at: float | None = None
        strays_killed = False
        with selectors.DefaultSelector() as selector:
            for pipe, sink in sinks.items():
                selector.register(pipe, selectors.EVENT_READ, sink)
            while selector.get_map():
                now = time.monotonic()
                if now >= deadline:
                    self._time_out(process, display)
                if exited_at is None and _leader_exited(process):
                    exited_at = now
                if exited_at is not None and now - exited_at > _DRAIN_SECONDS:
                    # The engine is gone but something it started still holds the pipes.
                    if strays_killed:
                        break
                    _signal_group(process, signal.SIGKILL)
                    strays_killed = True
                    exited_at = now
                wait = min(deadline - now, _POLL_SECONDS)
                for key, _ in selector.select(timeout=max(wait, 0.0)):
                    chunk = os.read(key.fd, _READ_CHUNK)
                    if chunk:
                        key.data(chunk)
                    else:
                        selector.unregister(key.fileobj)
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            self._time_out(process, display)

    def _time_out(self, process: subprocess.Popen[bytes], display: tuple[str, ...]) -> None:
        self._kill(process)
        error = EngineTimeout(display, self.timeout_seconds)
        self.log.write(f"\n[runner] {error}\n")
        raise error

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period, reap the engine.

        The engine is only reaped at the end, so its process group ID cannot be reused
        by an unrelated process while we signal it.
        """
        if process.returncode is not None:
            return
        _signal_group(process, signal.SIGTERM)
        grace_ends = time.monotonic() + self.kill_grace_seconds
        while time.monotonic() < grace_ends and not _leader_exited(process):
            time.sleep(0.02)
        _signal_group(process, signal.SIGKILL)
        process.wait()


def _leader_exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the engine exited, without reaping it (WNOWAIT keeps its PID reserved)."""
    if process.returncode is not None:
        return True
    try:
        status = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return status is not None


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


# --------------------------------------------------------------------------- configuration


def write_backend_override(
    workdir: Path, *, hostname: str, organization: str, workspace: str
) -> Path:
    """Point the configuration in ``workdir`` at the Runplane Cloud API.

    Writes ``runplane_backend_override.tf``: as an ``*_override.tf`` file it is merged
    after the configuration's own files and its ``backend "remote"`` block replaces any
    backend block they declare (or adds one where they declare none). Override files are
    merged in lexical order, so a user's own ``*_override.tf`` that sorts later and
    declares a backend would win: the runner refuses configurations that declare one
    (:mod:`runplane.runner.config_check`) and also passes the same values with
    ``-backend-config`` (:func:`write_backend_config`), which no file can override.
    """
    _check_backend_names(hostname, organization, workspace)
    path = Path(workdir) / BACKEND_OVERRIDE_NAME
    path.write_text(
        "# Written by the Runplane runner: the run's state lives in the Runplane Cloud API.\n"
        "terraform {\n"
        '  backend "remote" {\n'
        f'    hostname     = "{hostname}"\n'
        f'    organization = "{organization}"\n'
        "\n"
        "    workspaces {\n"
        f'      name = "{workspace}"\n'
        "    }\n"
        "  }\n"
        "}\n",
        encoding="utf-8",
    )
    return path


def write_backend_config(path: Path, *, hostname: str, organization: str, workspace: str) -> Path:
    """Write the ``-backend-config`` file naming the Runplane Cloud API and workspace.

    Values given with ``-backend-config`` win over those of any backend block in the
    configuration, and a backend of another type fails ``init`` on these arguments, so a
    configuration that slipped a backend past the check still cannot point the run's
    state elsewhere.
    """
    _check_backend_names(hostname, organization, workspace)
    content = (
        f'hostname     = "{hostname}"\n'
        f'organization = "{organization}"\n'
        "workspaces {\n"
        f'  name = "{workspace}"\n'
        "}\n"
    )
    return _write_private(Path(path), content)


def write_var_file(path: Path, variables: Mapping[str, str]) -> Path:
    """Write the run's variables as a ``-var-file`` (JSON, mode 0o600, created afresh).

    Each value is a JSON string, so the engine takes it literally (no template or
    expression is evaluated) and converts it to a ``number`` or ``bool`` where the
    variable declares one. Raises :class:`~runplane.runner.refusal.Refused` for a name
    the engine would not accept.
    """
    for name, value in variables.items():
        problem = name_problem(name)
        if problem is not None:
            raise Refused(problem)
        if not isinstance(value, str):
            raise Refused(f"variable {name!r} does not have a string value")
    path = Path(path)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(dict(variables), handle)
    return path


def _write_private(path: Path, content: str) -> Path:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)  # also when the file existed with a looser mode
        handle.write(content)
    return path


def _check_backend_names(hostname: str, organization: str, workspace: str) -> None:
    if not _HOSTNAME.fullmatch(hostname):
        raise ValueError(f"not a hostname[:port]: {hostname!r}")
    for label, value in (("organization", organization), ("workspace", workspace)):
        if not _TFE_NAME.fullmatch(value):
            raise ValueError(f"not a valid {label} name: {value!r}")


def write_cli_config(
    path: Path,
    *,
    host: str,
    api_url: str,
    token: str,
    provider_mirror: Path | None = None,
) -> Path:
    """Write an engine CLI configuration (mode 0o600) for the Cloud API at ``host``.

    The ``host`` block declares the ``tfe.v2``, ``tfe.v2.1`` and ``tfe.v2.2`` services at
    ``api_url``, so no https discovery request is made (plain http works); the
    ``credentials`` block carries ``token``. Terraform 1.0.x has no ``TF_TOKEN_*``
    variables, so this file is how the engine authenticates. Point ``TF_CLI_CONFIG_FILE``
    at it.

    With ``provider_mirror`` (an absolute directory path), a ``provider_installation``
    block is added: providers of the ``registry.terraform.io/runplane`` namespace are
    installed from that filesystem mirror only, every other provider directly as before
    (see docs/test-provider.md).
    """
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(f"not a hostname[:port]: {host!r}")
    if not _API_URL.fullmatch(api_url):
        raise ValueError(f"not an http(s) URL usable in a CLI configuration: {api_url!r}")
    if not _TOKEN.fullmatch(token):
        raise ValueError("the token has characters a CLI configuration cannot carry")
    installation = ""
    if provider_mirror is not None:
        mirror = os.fspath(provider_mirror)
        # No control characters, quotes, backslashes or template introducers in the string.
        if not Path(mirror).is_absolute() or not re.fullmatch(r"/[^\x00-\x1f\x7f\"\\$%]*", mirror):
            raise ValueError(
                f"not an absolute path usable in a CLI configuration: {mirror!r} (provider_mirror)"
            )
        installation = provider_installation(mirror, ["registry.terraform.io/runplane/*"])
    services = {name: api_url for name in ("tfe.v2", "tfe.v2.1", "tfe.v2.2")}
    content = cli_config(host, services, token, installation=installation, disable_checkpoint=True)
    return _write_private(Path(path), content)


# --------------------------------------------------------------------------- classification

# (provider, pattern) pairs: engine failures that mean "this plan needs cloud credentials
# the sandbox does not have". Searched case-insensitively in whitespace-normalised text,
# since the engine wraps long diagnostics at 78 columns. Invalid or expired credentials are
# deliberately not here: those are ordinary plan failures.
_MISSING_CREDENTIALS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (provider, re.compile(pattern, re.IGNORECASE))
    for provider, pattern in (
        # AWS provider v4+ ("No valid credential sources found") and v3 ("no valid
        # credential sources for Terraform AWS Provider found"); the SDK's chain errors.
        ("aws", r"no valid credential sources (?:for [\w ]{1,40} )?found"),
        ("aws", r"NoCredentialProviders"),
        ("aws", r"no EC2 IMDS role found"),
        ("aws", r"failed to refresh cached credentials"),
        # Google: application default credentials absent.
        ("google", r"could not find default credentials"),
        # AzureRM: no usable Azure CLI login in the sandbox.
        ("azurerm", r"Authenticating using the Azure CLI is only supported as a User"),
        ("azurerm", r"Please run 'az login' to set ?up account"),
        ("azurerm", r"launching Azure CLI: exec: \W*az\W*: executable file not found"),
    )
)


def missing_credentials_provider(log_text: str) -> str | None:
    """The provider whose missing credentials made the engine fail, if recognisable."""
    normalised = " ".join(log_text.split())
    for provider, pattern in _MISSING_CREDENTIALS:
        if pattern.search(normalised):
            return provider
    return None


def credentials_missing(log_text: str) -> bool:
    """Whether the engine failed for lack of cloud credentials (``plan_credentials_required``)."""
    return missing_credentials_provider(log_text) is not None
