"""Running a Rego engine's work in isolation, and reading its results: engine-neutral.

By default (``isolation="process"``) work runs in a forked child process that reports
records over a pipe. At the deadline the child is killed (SIGKILL), so a runaway policy
really stops, and a crash in the engine is contained; every policy without a result is
reported ``errored``. ``isolation="thread"`` (and platforms without ``fork``) runs the
work in a daemon thread instead: the caller still gets fail-closed results at the
deadline (an engine holding the GIL, as regorus does, delays that return until its
query ends; what it reports after the deadline is dropped), but the running query
cannot be stopped and keeps a CPU busy until it returns (the thread then stops before
the next query); a crash takes the whole process down. In
every mode the function timeout of the hosting Lambda is the outer bound. The child
clears its environment first: the evaluator's process has nothing (no cloud
credentials, no settings) to reveal.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from runplane.domain.policy import PolicyDefinition

Isolation = Literal["process", "thread"]
Record = dict[str, Any]
Emit = Callable[[Record], None]

MAX_MESSAGES: Final = 100
"""Violation messages kept per policy result (sorted, deduplicated); the rest are counted."""
MAX_MESSAGE_CHARS: Final = 1000
MAX_ERROR_CHARS: Final = 300


def short(messages: Sequence[str]) -> str:
    """Distinct messages joined, cut to ``MAX_ERROR_CHARS``."""
    text = "; ".join(dict.fromkeys(m for m in messages if m)) or "unknown error"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def violations(value: Any, max_messages: int) -> tuple[list[str], int]:
    messages = {
        (item if isinstance(item, str) else compact(item))[:MAX_MESSAGE_CHARS] for item in value
    }
    ordered = sorted(messages)
    return ordered[:max_messages], max(0, len(ordered) - max_messages)


def describe(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "null"


def policy_record(
    policy: PolicyDefinition, value: Any, *, defined: bool, max_messages: int
) -> Record:
    """The record of a policy whose query gave ``value`` (``defined`` false: undefined):
    undefined or empty passes, a collection fails, anything else errors."""
    if not defined or value == []:
        return {"outcome": "passed", "messages": []}
    if not isinstance(value, list):
        return {
            "outcome": "errored",
            "messages": [
                f"{policy.query} is {describe(value)}, not a set or array of violation messages"
            ],
        }
    messages, omitted = violations(value, max_messages)
    return {"outcome": "failed", "messages": messages, "omitted": omitted}


def shape_problem(policy: PolicyDefinition, value: Any, where: str) -> str:
    """Why a policy whose query gave ``value`` on an empty input cannot be published."""
    problem = (
        f"policy {policy.name}: {policy.query}{where} is {describe(value)}, "
        "not a set or array of violation messages"
    )
    if isinstance(value, dict):
        problem += (
            " (in Rego v1, name[x] if { ... } defines an object: write "
            "name contains x if { ... } for a set of messages)"
        )
    return problem


@dataclass(frozen=True)
class Stopped:
    """Why isolated work stopped before emitting every record."""

    timed_out: bool
    reason: str


def run_isolated(
    work: Callable[[threading.Event, Emit], None],
    timeout_seconds: float,
    isolation: Isolation,
) -> tuple[dict[int, Record], Stopped | None]:
    """Run ``work`` isolated: its records by index, and why it stopped early (or None)."""
    if isolation == "process" and hasattr(os, "fork"):
        return run_in_child(work, timeout_seconds)
    return run_in_thread(work, timeout_seconds)


def run_in_thread(
    work: Callable[[threading.Event, Emit], None], timeout_seconds: float
) -> tuple[dict[int, Record], Stopped | None]:
    records: dict[int, Record] = {}
    lock = threading.Lock()
    stop = threading.Event()
    failure: list[str] = []
    deadline = time.monotonic() + max(0.0, timeout_seconds)

    def emit(record: Record) -> None:
        with lock:
            # An engine that holds the GIL while it evaluates (regorus) keeps join()
            # from returning at the deadline: a record that comes late is dropped here.
            if time.monotonic() > deadline:
                stop.set()
            if not stop.is_set():
                records[record["i"]] = record

    def target() -> None:
        try:
            work(stop, emit)
        except Exception as error:  # reported as errored policies, never raised
            failure.append(f"the evaluator failed ({type(error).__name__})")

    thread = threading.Thread(target=target, name="rego-evaluation", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_seconds))
    with lock:
        if thread.is_alive() or stop.is_set():
            stop.set()
            return dict(records), Stopped(True, f"timed out after {timeout_seconds:g}s")
        return dict(records), Stopped(False, failure[0]) if failure else None


def run_in_child(
    work: Callable[[threading.Event, Emit], None], timeout_seconds: float
) -> tuple[dict[int, Record], Stopped | None]:
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() in a threaded process: the child only runs
        # the evaluator and writes to a pipe, and a child that deadlocks is killed at the deadline.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process; its results are asserted on
        status = 0
        try:
            os.close(read_end)
            faulthandler.disable()  # a crash is reported by the parent, not dumped here
            # Defence in depth behind the refused builtins: the evaluator's process
            # has no environment (no cloud credentials, no settings) to reveal.
            os.environ.clear()

            def emit(record: Record) -> None:
                data = (json.dumps(record, ensure_ascii=True) + "\n").encode("ascii")
                view = memoryview(data)
                while view:
                    view = view[os.write(write_end, view) :]

            work(threading.Event(), emit)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    records: dict[int, Record] = {}
    buffer = b""
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], remaining)
            if not ready:
                timed_out = True
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                record = json.loads(line)
                records[record["i"]] = record
    finally:
        os.close(read_end)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return records, Stopped(True, f"timed out after {timeout_seconds:g}s")
    if os.WIFSIGNALED(status):
        return records, Stopped(False, f"the evaluator crashed (signal {os.WTERMSIG(status)})")
    if os.WEXITSTATUS(status) != 0:
        return records, Stopped(False, "the evaluator failed")
    return records, None
