"""Powertools Logger, Tracer and Metrics around every Lambda handler, built on first use.

- Logger: in a Lambda, the ``runplane`` logger tree writes Powertools' structured
  lines with the run's ID as a key when the invocation names one. Nothing here
  logs events, bodies or headers: tokens, capability handles and secrets travel
  in those.
- Metrics: one EMF metric per run status move (``RunStatusChanged``, dimension
  ``status``), read from the lifecycle's "run status changed" line, in the
  ``POWERTOOLS_METRICS_NAMESPACE`` the deployment sets (unset: no metrics, as in
  the embedded stack and tests).
- Tracer: X-Ray, only in a Lambda and unless ``POWERTOOLS_TRACE_DISABLED`` is set.
- Cold start: the process's first invocation runs with the cyclic garbage collector
  paused (``cold_start``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

Handler = Callable[[dict[str, Any], Any], Any]
H = TypeVar("H", bound=Handler)

RUN_ID = "run_id"
STATUS_METRIC = "RunStatusChanged"
# The line services/lifecycle.py writes for every committed move.
_MOVE_LOGGER, _MOVE_MESSAGE = "runplane.runs", "run status changed"
_RUN_IN_PATH = re.compile(r"/runs/(run-[A-Za-z0-9]+)")


def _in_lambda() -> bool:
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes"}


def run_id_of(event: Any) -> str | None:
    """The run an invocation is about, when its input names one: a workflow step's
    input, or a run's path on the APIs."""
    if not isinstance(event, dict):
        return None
    found = event.get(RUN_ID)
    if isinstance(found, str) and found:
        return found
    path = event.get("path")
    if isinstance(path, str):
        match = _RUN_IN_PATH.search(path)
        if match:
            return match.group(1)
    return None


@functools.lru_cache(maxsize=1)
def logger() -> Logger:
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

    built = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "runplane")
    # Our modules log through stdlib loggers under "runplane": in a Lambda they get
    # Powertools' formatter, and with it the keys appended per invocation.
    logging.getLogger("runplane")
    copy_config_to_registered_loggers(source_logger=built, include={"runplane"})
    return built


class _StatusMoves(logging.Handler):
    """Turns each run status move's log line into one EMF metric."""

    def __init__(self, namespace: str) -> None:
        super().__init__(level=logging.INFO)
        self._namespace = namespace

    def emit(self, record: logging.LogRecord) -> None:
        status = getattr(record, "to_status", None)
        if record.getMessage() != _MOVE_MESSAGE or not isinstance(status, str):
            return
        from aws_lambda_powertools.metrics import MetricUnit
        from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
            AmazonCloudWatchEMFProvider,
        )

        # One blob per move, its only dimension the status (service="" leaves out the
        # per-function one), so moves count across every function that makes them.
        metrics = AmazonCloudWatchEMFProvider(namespace=self._namespace, service="")
        metrics.add_metric(name=STATUS_METRIC, unit=MetricUnit.Count, value=1)
        metrics.add_dimension(name="status", value=status)
        metrics.flush_metrics()


@functools.lru_cache(maxsize=1)
def status_metrics() -> bool:
    """Counts run status moves from now on, where the deployment names a namespace."""
    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE")
    if not namespace or _flag("POWERTOOLS_METRICS_DISABLED"):
        return False
    moves = logging.getLogger(_MOVE_LOGGER)
    if moves.getEffectiveLevel() > logging.INFO:
        moves.setLevel(logging.INFO)
    moves.addHandler(_StatusMoves(namespace))
    return True


@functools.lru_cache(maxsize=1)
def _tracer() -> Any:
    if not _in_lambda() or _flag("POWERTOOLS_TRACE_DISABLED"):
        return None
    from aws_lambda_powertools import Tracer

    return Tracer()


# Emptied when the process's first invocation starts.
_COLD = [True]


@contextlib.contextmanager
def cold_start() -> Iterator[None]:
    """The process's first invocation, with the cyclic garbage collector paused.

    That invocation imports and builds most of the handler's code (routes, services,
    their models and clients), whose objects live as long as the process: the
    collections their allocations trigger (a young one every 700 of them, a full one
    as the heap grows) scan them and free almost nothing, 40-70 ms of a cold start.
    When it ends, everything it allocated moves to the oldest generation unscanned
    (``gc.freeze()`` then ``gc.unfreeze()``: both only move lists), and the collector
    resumes. Resumed as it was, it would scan all of it at once in a young collection
    and again in a middle one. Nothing is pinned: the invocation's garbage is freed by
    the next full collection, like any old object's (``gc.freeze()`` alone would keep
    it, an exception's frames and their locals among it, for the process's life).
    Later invocations, and a process whose collector someone had turned off or frozen
    by its first invocation, are left alone: that is decided once, as
    ``gc.get_freeze_count()`` walks the whole frozen generation (7.6 ms an invocation
    in a test process that froze its collection's objects)."""
    if not _COLD:
        yield
        return
    _COLD.clear()
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        gc.enable()


def observed(handler: H) -> H:
    """``handler`` with the run's ID as a log key, status-move metrics and tracing."""
    traced: list[Handler] = []

    @functools.wraps(handler)
    def observed_handler(event: dict[str, Any], context: Any) -> Any:
        with cold_start():
            return _invoke(event, context)

    def _invoke(event: dict[str, Any], context: Any) -> Any:
        status_metrics()
        if not traced:
            tracer = _tracer()
            traced.append(handler if tracer is None else tracer.capture_lambda_handler(handler))
        if not _in_lambda():
            return traced[0](event, context)
        log = logger()
        run_id = run_id_of(event)
        if run_id:
            log.thread_safe_append_keys(run_id=run_id)
        try:
            return traced[0](event, context)
        finally:
            if run_id:
                log.thread_safe_remove_keys([RUN_ID])

    return cast(H, observed_handler)
