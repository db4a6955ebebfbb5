"""Where a run's overhead goes on the embedded stack: a timeline and a sampler.

The timeline splits the wall clock from a run's creation to ``succeeded`` at
its sandboxes' edges: each runner process from spawn to exit (its start-up up
to its first HTTP request, the engine, the rest: transfers, reports, the
runner's own work) and the control plane's time between them (workflow steps,
task Lambdas, the approval and its polling). The sampler looks at every thread
of this process every few milliseconds and charges each busy one to the
innermost frame it recognizes: moto, the AWS SDK (botocore, HTTP), our code
(``runplane``, ``functions``) or other libraries; threads blocked in a wait are
idle. It is a poor man's py-spy: in process, so it needs no ptrace.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from runplane.adapters.launchers import LocalProcessLauncher
from runplane.local.gateway import Gateway

# Frames a thread sits in while it waits for something (not CPU).
_WAITS = {
    ("threading.py", "wait"),
    ("threading.py", "_wait_for_tstate_lock"),
    ("selectors.py", "select"),
    ("socket.py", "readinto"),
    ("socket.py", "accept"),
    ("socketserver.py", "serve_forever"),
    ("queue.py", "get"),
    ("subprocess.py", "_wait"),
    ("subprocess.py", "wait"),
    ("subprocess.py", "_try_wait"),
}
_IDS = re.compile(r"/(?:[a-z]{2,5}-(?=[A-Za-z0-9_-]*[0-9A-Z])[A-Za-z0-9_-]{6,}|\d+)(?=/|$)")


def _category(frame: Any) -> str:
    """'idle' for a blocked thread, else what its innermost recognized frame is."""
    if frame.f_code.co_name in {"sleep", "wait"} or frame.f_code.co_name == "select":
        return "idle"
    while frame is not None:
        path = frame.f_code.co_filename
        name = path.rsplit("/", 1)[-1]
        if (name, frame.f_code.co_name) in _WAITS:
            return "idle"
        if "/moto/" in path:
            return "moto"
        if "/botocore/" in path or "/boto3/" in path or "/urllib3/" in path:
            return "aws sdk"
        if "/werkzeug/" in path or name in {"socketserver.py", "server.py", "client.py"}:
            return "http servers and clients (moto's, the gateway's)"
        if "/runplane/local/" in path:
            return "embedded stack (gateway, moto glue)"
        if "/runplane/" in path or "/functions/" in path:
            return "ours"
        if "/pynamodb/" in path:
            return "ours"
        frame = frame.f_back
    return "other"


def _library(frame: Any) -> str:
    """The package of the innermost frame (what "other" is made of)."""
    path = frame.f_code.co_filename
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    return "stdlib " + path.rsplit("/", 1)[-1].removesuffix(".py")


class Sampler:
    """Charges each thread's CPU time since the last sample to where it is now."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.cpu: Counter[str] = Counter()
        self.other: Counter[str] = Counter()
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        me = threading.get_ident()
        main = threading.main_thread().ident
        while not self._stop.wait(self.interval):
            for ident, frame in sys._current_frames().items():
                if ident in (me, main):
                    continue
                try:
                    cpu = time.clock_gettime(time.pthread_getcpuclockid(ident))
                except OSError:  # the thread ended meanwhile
                    continue
                last = self._last.get(ident, cpu)
                # A new thread may reuse an ended one's identifier.
                spent = cpu - last if cpu >= last else cpu
                self._last[ident] = cpu
                category = _category(frame)
                self.cpu[category] += spent
                if category == "other":
                    self.other[_library(frame)] += spent

    def seconds(self) -> dict[str, float]:
        return {k: round(v, 2) for k, v in self.cpu.most_common()}


@dataclass
class Sandbox:
    spawned: float
    first_request: float | None = None
    exited: float | None = None


@dataclass
class Timeline:
    """Sandboxes in spawn order and the HTTP calls made, by caller and route."""

    sandboxes: list[Sandbox] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Seconds spent serving each route (by caller: sandbox or person) and in each
    # workflow task's handler, summed over the measured runs.
    route_seconds: dict[str, float] = field(default_factory=dict)
    task_seconds: dict[str, float] = field(default_factory=dict)

    def _add(self, table: dict[str, float], key: str, seconds: float) -> None:
        with self.lock:
            table[key] = table.get(key, 0.0) + seconds

    def time_tasks(self, handlers: dict[str, Any]) -> None:
        """Time each workflow task's handler (the embedded stack reads ``handlers``
        when it starts: call this before)."""
        for name, handler in list(handlers.items()):

            def timed(event: Any, context: Any, _name: str = name, _fn: Any = handler) -> Any:
                started = time.perf_counter()
                try:
                    return _fn(event, context)
                finally:
                    self._add(self.task_seconds, _name, time.perf_counter() - started)

            handlers[name] = timed

    def install(self) -> None:
        launch = LocalProcessLauncher.launch
        handle = Gateway.handle
        timeline = self

        def launched(launcher: LocalProcessLauncher, request: Any) -> str:
            # Listed before it starts: a runner on standby asks at once.
            sandbox = Sandbox(time.perf_counter())
            with timeline.lock:
                timeline.sandboxes.append(sandbox)
            reference = launch(launcher, request)
            process = launcher.processes[-1]

            def reap() -> None:
                process.wait()
                sandbox.exited = time.perf_counter()

            threading.Thread(target=reap, daemon=True).start()
            return reference

        def handled(
            gateway: Gateway, method: str, target: str, headers: dict[str, str], *rest: Any
        ) -> dict[str, Any]:
            auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
            path = target.split("?", 1)[0]
            runner = auth.startswith("Bearer rps_") or path == "/api/v1/runner/sessions"
            route = f"{method} {_IDS.sub('/:id', path)}"
            if runner:
                with timeline.lock:
                    pending = [s for s in timeline.sandboxes if s.first_request is None]
                    if pending and path == "/api/v1/runner/sessions":
                        pending[0].first_request = time.perf_counter()
                    timeline.calls[route] += 1
            started = time.perf_counter()
            try:
                return handle(gateway, method, target, headers, *rest)
            finally:
                who = "sandbox" if runner else "person"
                timeline._add(
                    timeline.route_seconds, f"{who} {route}", time.perf_counter() - started
                )

        setattr(LocalProcessLauncher, "launch", launched)  # noqa: B010
        setattr(Gateway, "handle", handled)  # noqa: B010

    def reset(self) -> None:
        with self.lock:
            self.sandboxes.clear()

    def split(self, started: float, ended: float, engine_s: float) -> dict[str, float]:
        """The run's wall clock: sandbox start-up, engine, the runners' other work,
        and the control plane's time outside any sandbox."""
        with self.lock:
            boxes = list(self.sandboxes)
        deadline = time.perf_counter() + 10
        while any(s.exited is None for s in boxes) and time.perf_counter() < deadline:
            time.sleep(0.01)
        startup = sum((s.first_request or s.spawned) - s.spawned for s in boxes)
        # A runner exits just after its last report: count only what precedes the end.
        inside = sum(min(s.exited or ended, ended) - s.spawned for s in boxes)
        total = ended - started
        return {
            "sandbox_start_up_s": round(startup, 2),
            "engine_s": round(engine_s, 2),
            "runner_other_s": round(max(inside - startup - engine_s, 0.0), 2),
            "control_plane_s": round(max(total - inside, 0.0), 2),
        }
