"""Concurrent runs over several workspaces on the embedded stack.

    python -m benchmarks.throughput [--runs 50] [--workspaces 10] [--clients 10]

Creates ``--runs`` plan_and_apply runs of examples/hello spread round-robin over
``--workspaces`` workspaces, from ``--clients`` threads at once; each run is
approved the moment it awaits approval. Runs of one workspace queue FIFO for
its writer reservation, so a workspace applies one run at a time. Reported:
runs per minute, creation-to-terminal time (p50, p95), this process's peak
resident memory (the embedded stack, moto and the gateway all live in it; the
runners are separate processes), its resident memory as each quarter of the
runs ends (to see whether it levels off), and the sandbox directories still on
disk once every run has ended.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from runplane.client import Client, Connection
from runplane.local.stack import EmbeddedStack

REPO = Path(__file__).resolve().parents[1]
ENDED = {"succeeded", "plan_failed", "policy_failed", "apply_failed", "needs_recovery", "canceled"}


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mib() -> float:
    """This process's resident memory now (not its peak)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def _one_run(client: Client, workspace: str, value: str) -> tuple[str, float]:
    started = time.perf_counter()
    run = client.create_run(workspace, REPO / "examples" / "hello", variables={"greeting": value})
    approved = False
    while True:
        review = client.review(run["id"])
        if review["status"] == "awaiting_approval" and not approved:
            client.decide(run["id"], "approve")
            approved = True
        if review["status"] in ENDED:
            return str(review["status"]), time.perf_counter() - started
        time.sleep(0.25)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(runs: int, workspaces: int, clients: int) -> dict[str, Any]:
    engine = REPO / ".venv" / "engine" / "terraform"
    if not engine.exists():
        raise SystemExit("run `make engine` first")
    with tempfile.TemporaryDirectory(prefix="runplane-throughput-") as data:
        stack = EmbeddedStack(Path(data), port=0, engine=str(engine))
        credentials = stack.start()
        try:
            client = Client(Connection(credentials.url, credentials.token))
            names = [client.create_workspace(f"bench-{i}")["id"] for i in range(workspaces)]
            rss_before = _peak_rss_mib()
            ended: list[float] = []
            lock = threading.Lock()

            def job(i: int) -> tuple[str, float]:
                outcome = _one_run(client, names[i % workspaces], f"v{i}")
                with lock:
                    ended.append(_rss_mib())
                return outcome

            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=clients) as pool:
                outcomes = list(pool.map(job, range(runs)))
            elapsed = time.perf_counter() - started
            # Reapers remove a sandbox's directory once its runner exits.
            time.sleep(2)
            assert stack.launcher is not None
            left = sum(1 for path in stack.launcher.sandboxes.values() if path.exists())
        finally:
            stack.stop()
    durations = [seconds for _, seconds in outcomes]
    statuses = sorted({status for status, _ in outcomes})
    return {
        "runs": runs,
        "workspaces": workspaces,
        "clients": clients,
        "statuses": statuses,
        "elapsed_s": round(elapsed, 1),
        "runs_per_minute": round(runs / elapsed * 60, 2),
        "p50_s": round(statistics.median(durations), 1),
        "p95_s": round(_percentile(durations, 0.95), 1),
        "peak_rss_mib_before": round(rss_before, 1),
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        "rss_mib_by_quarter": [
            round(ended[max(0, len(ended) * q // 4 - 1)], 1) for q in (1, 2, 3, 4)
        ],
        "sandbox_dirs_left": left,
        "threads_at_end": threading.active_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--workspaces", type=int, default=10)
    parser.add_argument("--clients", type=int, default=10)
    args = parser.parse_args()
    result = measure(args.runs, args.workspaces, args.clients)
    print(
        f"{result['runs']} runs over {result['workspaces']} workspaces in {result['elapsed_s']} s: "
        f"{result['runs_per_minute']} runs/min, p50 {result['p50_s']} s, p95 {result['p95_s']} s, "
        f"peak RSS {result['peak_rss_mib']} MiB (after start-up {result['peak_rss_mib_before']}); "
        f"RSS as each quarter ended {result['rss_mib_by_quarter']} MiB; "
        f"sandbox directories left {result['sandbox_dirs_left']}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
