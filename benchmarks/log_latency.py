"""Live log latency: from the engine printing a line to `run logs --follow` printing it.

    python -m benchmarks.log_latency [--runs 3] [--lines 5] [--period 1.5]

The embedded stack runs the pinned engine behind a wrapper that, on ``plan``, prints
``--lines`` lines stamped with the wall clock (``date +%s%N``), ``--period`` seconds
apart, before handing over to the real engine. For each plan-only run of
examples/hello, ``python -m runplane.cli run logs RUN --follow`` runs as its own
process; every stamped line it prints is timed on arrival (same machine, same clock).

Baseline, measured in the same runs: when the line could be read without live logs,
i.e. when the follower sees the phase's log complete (the final log is stored). The
ratio live / baseline is reported. Target: live under 2 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runplane.client import Client, Connection
from runplane.local.stack import EmbeddedStack

REPO = Path(__file__).resolve().parents[1]
MARK = "runplane-latency-line"


def _wrapper(directory: Path, engine: Path, lines: int, period: float) -> Path:
    script = directory / "stamping-engine"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = plan ]; then\n'
        f"  for n in $(seq 1 {lines}); do\n"
        f'    echo "{MARK} $n $(date +%s%N)"\n'
        f"    sleep {period}\n"
        "  done\n"
        "fi\n"
        f"exec '{engine}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script


def _one_run(client: Client, workspace: str, connection: list[str]) -> dict[str, Any]:
    run_id = client.create_run(workspace, REPO / "examples" / "hello", kind="plan_only")["id"]
    follower = subprocess.Popen(
        [sys.executable, "-m", "runplane.cli", "run", "logs", run_id, "--follow", *connection],
        stdout=subprocess.PIPE,
        bufsize=0,
    )
    assert follower.stdout is not None
    stamps: list[int] = []
    arrivals: list[int] = []
    for raw in iter(follower.stdout.readline, b""):
        line = raw.decode("utf-8", "replace")
        if line.startswith(MARK):
            arrivals.append(time.time_ns())
            stamps.append(int(line.split()[2]))
    complete = time.time_ns()  # the follower saw the log complete and exited
    if follower.wait() != 0:
        raise SystemExit(f"the follower of {run_id} failed")
    client.watch(run_id, timeout=300)
    live = [(a - s) / 1e9 for s, a in zip(stamps, arrivals, strict=True)]
    final = [(complete - s) / 1e9 for s in stamps]
    return {"run_id": run_id, "live_s": live, "final_s": final}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lines", type=int, default=5)
    parser.add_argument("--period", type=float, default=1.5)
    args = parser.parse_args()
    engine = REPO / ".venv" / "engine" / "terraform"
    if not engine.exists():
        raise SystemExit("run `make engine` first")

    with tempfile.TemporaryDirectory(prefix="runplane-bench-") as data:
        # The engine runs as the sandbox's own user, which sees its binary's directory
        # (read-only): the wrapper gets a directory of its own that user may enter.
        Path(data).chmod(0o755)
        directory = Path(data) / "engine"
        directory.mkdir(mode=0o755)
        wrapper = _wrapper(directory, engine, args.lines, args.period)
        stack = EmbeddedStack(Path(data) / "stack", port=0, engine=str(wrapper))
        credentials = stack.start()
        try:
            client = Client(Connection(credentials.url, credentials.token))
            workspace = client.create_workspace("bench-logs")["id"]
            connection = [
                *("--url", credentials.url, "--token", credentials.token),
                *("--organization", credentials.organization),
            ]
            _one_run(client, workspace, connection)  # warm-up: first executions parse the ASL
            rows = [_one_run(client, workspace, connection) for _ in range(args.runs)]
        finally:
            stack.stop()

    header = f"{'run':<4} {'lines':>5} {'live median s':>14} {'live max s':>11}"
    print(f"{header} {'final median s':>15}")
    for i, row in enumerate(rows):
        print(
            f"{i:<4} {len(row['live_s']):>5} {statistics.median(row['live_s']):>14.3f} "
            f"{max(row['live_s']):>11.3f} {statistics.median(row['final_s']):>15.3f}"
        )
    live = sorted(x for row in rows for x in row["live_s"])
    final = sorted(x for row in rows for x in row["final_s"])
    p90 = live[min(len(live) - 1, int(0.9 * len(live)))]
    summary = {
        "runs": len(rows),
        "lines": len(live),
        "period_s": args.period,
        "live_median_s": round(statistics.median(live), 3),
        "live_p90_s": round(p90, 3),
        "live_max_s": round(max(live), 3),
        "final_median_s": round(statistics.median(final), 3),
        "live_vs_final_ratio": round(statistics.median(live) / statistics.median(final), 3),
        "target_s": 2.0,
    }
    print(
        f"live: median {summary['live_median_s']} s, p90 {summary['live_p90_s']} s, "
        f"max {summary['live_max_s']} s (target < 2 s); without live logs a line shows "
        f"after {summary['final_median_s']} s (ratio {summary['live_vs_final_ratio']})"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
