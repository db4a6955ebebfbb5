"""Drive the pinned engine binary (OpenTofu, or Terraform as a compatible stand-in).

This module resolves the engine and runs its commands with bounded, redacted logs
(``bounded_log.py``) and hard timeouts; its neighbours write the files that point it at the
Runplane Cloud API (``engine_config.py``), define its errors (``engine_errors.py``) and
recognise failures caused by missing cloud credentials (``engine_classify.py``). They use
the standard library (and the pure domain rules for variable names and plan options) only:
no network and no AWS code.

The log names each step in words (``==> Planning``, :data:`STEP_PREFIX`), never the
command line: its flags and file paths are the sandbox's, which the run's log (read by
the dashboard, ``runplane run logs`` and Terraform's remote backend) has no use for.

Every command runs in its own session (so in its own process group) with stdin closed.
Output is read incrementally from the pipes and streamed into a :class:`BoundedLog`; the
whole output is never buffered. A timeout sends SIGTERM to the group (the engine stops
gracefully, releasing locks where it can), then SIGKILL after a grace period, and raises
:class:`EngineTimeout`. A non-zero exit is never an exception for the commands that
return an :class:`EngineResult`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from runplane.domain.log_view import STEP_PREFIX
from runplane.domain.run_options import NO_OPTIONS, RunOptions
from runplane.runner.bounded_log import _READ_CHUNK, BoundedLog
from runplane.runner.confinement import Confinement, Isolation
from runplane.runner.engine_errors import (
    EngineCommandFailed,
    EngineError,
    EngineNotFound,
    EngineOutputInvalid,
    EngineOutputTooLarge,
    EngineTimeout,
)

MAX_PLAN_JSON_BYTES: Final = 200 * 1024 * 1024
"""Largest ``show -json`` document :meth:`Engine.show_json` accepts (200 MiB)."""

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

_VERSION = re.compile(r"\bv?(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?)")


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


# --------------------------------------------------------------------------- engine


# How a wrapper (bubblewrap, a shell) reports a child a signal ended: 128 + its number.
_WRAPPED_SIGNAL_BASE: Final = 128
_LAST_SIGNAL: Final = 64  # SIGRTMAX on Linux


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

    @property
    def ended_by_signal(self) -> int | None:
        """The signal that ended the engine, if one did: a negative exit status when it
        ran directly, or 128 + the signal when bubblewrap reports its child's end (the
        engine itself only ever exits 0, 1 or 2)."""
        if self.exit_code < 0:
            return -self.exit_code
        if _WRAPPED_SIGNAL_BASE < self.exit_code <= _WRAPPED_SIGNAL_BASE + _LAST_SIGNAL:
            return self.exit_code - _WRAPPED_SIGNAL_BASE
        return None


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
        confinement: Confinement | None = None,
    ) -> None:
        self.binary = Path(binary)
        # Every command runs confined, and what it leaves running is killed when it ends.
        self.confinement = confinement or Confinement(Isolation.NONE, None)
        self.workdir = Path(workdir)
        self.log = log
        self.timeout_seconds = timeout_seconds
        self.kill_grace_seconds = kill_grace_seconds
        self.max_json_bytes = max_json_bytes
        self._env = {**_ENGINE_ENV_DEFAULTS, **env, **_ENGINE_ENV_PLATFORM}
        self._init_accepts_lock: bool | None = None

    def add_environment(self, extra: Mapping[str, str], *, replacing: Iterable[str] = ()) -> None:
        """Add ``extra`` to the environment of the commands run from now on (a phase's
        cloud credentials). It replaces only the names in ``replacing`` (the run's own
        env variables) of what is set already, and never what the platform reserves."""
        replaceable = set(replacing) - set(_ENGINE_ENV_PLATFORM)
        clash = sorted(set(extra) & (set(self._env) - set(_ENGINE_ENV_DEFAULTS) - replaceable))
        if clash:
            raise ValueError(f"the engine's environment already sets {', '.join(clash)}")
        self._env = {**self._env, **extra, **_ENGINE_ENV_PLATFORM}

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
        return self._result(args, "Initializing the working directory")

    def plan(
        self,
        out: Path,
        lock: bool,
        *,
        var_file: Path | None = None,
        options: RunOptions | None = None,
    ) -> EngineResult:
        """``plan -detailed-exitcode -out=OUT``; the result's ``has_changes`` reads exit 2.

        ``options`` (the run's, checked: see ``runplane.domain.run_options``) add their
        flags: ``-destroy`` or ``-refresh-only`` (exit code 2 then means the refresh
        found changes made outside the engine), ``-target=`` and ``-replace=``.
        Variable values never go on the command line (any local user can read it): they
        are in ``var_file`` (see :func:`write_var_file`), passed as ``-var-file``, which
        wins over the configuration's own ``*.tfvars`` files as ``-var`` would.
        """
        args = ["plan", "-input=false", "-no-color", "-detailed-exitcode", f"-out={out}"]
        if not lock:
            args.append("-lock=false")
        args.extend((options or NO_OPTIONS).engine_flags())
        if var_file is not None:
            args.append(f"-var-file={var_file}")
        exit_code, duration = self._run(args, step=_planning(options or NO_OPTIONS))
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
        step = "Reading the saved plan"
        exit_code, _ = self._run(args, step=step, stdout=capture.write)
        if exit_code != 0:
            raise EngineCommandFailed(args, exit_code, step)
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
        return self._result(args, "Applying the saved plan")

    def version(self) -> str:
        """The engine's version number, such as ``"1.0.3"`` (from ``version -json``)."""
        args = ["version", "-json"]
        capture = _Capture(_SMALL_OUTPUT)
        exit_code, _ = self._run(args, step=None, stdout=capture.write)
        if exit_code != 0:
            raise EngineCommandFailed(args, exit_code, "Reading the engine's version")
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
            self._run(["init", "-help"], step=None, stdout=capture.write)
            self._init_accepts_lock = b"-lock=" in capture.data
        return self._init_accepts_lock

    def _result(self, args: list[str], step: str) -> EngineResult:
        exit_code, duration = self._run(args, step=step)
        return EngineResult(exit_code, tuple(args), duration)

    def _run(
        self,
        args: Sequence[str],
        *,
        step: str | None,
        stdout: Callable[[bytes], None] | None = None,
    ) -> tuple[int, float]:
        """Run one command; stdout to ``stdout`` (else the log), stderr to the log.
        ``step`` (the log's words for it) heads its output; a step the user need not
        follow (the version, a help text) has none."""
        display = tuple(args)
        if step is not None:
            self.log.write(f"{STEP_PREFIX}{step}\n")
        started = time.monotonic()
        deadline = started + self.timeout_seconds
        try:
            process = self.confinement.spawn(
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
        try:
            with process:
                try:
                    self._pump(process, stdout or self.log.write, deadline, (display, step))
                except BaseException:
                    self._kill(process)
                    raise
        finally:
            self.confinement.sweep()
        return process.returncode, time.monotonic() - started

    def _pump(
        self,
        process: subprocess.Popen[bytes],
        stdout: Callable[[bytes], None],
        deadline: float,
        display: tuple[tuple[str, ...], str | None],
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

    def _time_out(
        self, process: subprocess.Popen[bytes], display: tuple[tuple[str, ...], str | None]
    ) -> None:
        self._kill(process)
        command, step = display
        error = EngineTimeout(command, self.timeout_seconds, step)
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


def _planning(options: RunOptions) -> str:
    """The plan step in words: its mode, which the user chose (targets and forced
    replacements are listed by the engine's own plan output)."""
    if options.destroy:
        return "Planning to destroy"
    if options.refresh_only:
        return "Planning a refresh"
    return "Planning"


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
