"""Run creation to the engine running, with and without the standby pool, on the
embedded stack.

    python -m benchmarks.standby_latency [--runs 5] [--configs 0,2:2,2:1]

For each configuration, ``N:P`` (``runplane local --runner-standby N``, each standby
claiming every P seconds; N = 0 is the launcher's own standby runner, handed its run
on standard input at once), a fresh embedded stack runs
``--runs`` plan-and-apply runs of examples/hello after one warm-up run. The engine
is the pinned one behind a wrapper that prints the wall clock (``date +%s%N``) as it
starts ``init``, each phase's first logged engine command: when that phase's engine
started. Measured per run:

- creation to plan engine: from the client sending the run's creation to the plan's
  first engine start;
- approval to apply engine: from the client sending the approval to the apply's.

Each pool size runs in a process of its own (one embedded stack per process). These
are embedded-stack figures (local processes, moto, loopback HTTP), not AWS figures:
docs/standby.md models AWS.
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

REPO = Path(__file__).resolve().parents[1]
MARK = "runplane-engine-started"


def _wrapper(directory: Path, engine: Path) -> Path:
    # The engine runs as a user of its own (a stack run as root): it must read this.
    directory.mkdir(mode=0o755)
    Path(directory.parent).chmod(0o711)
    script = directory / "stamping-engine"
    # Stamped only where output goes to the log (``version -json`` and ``show -json``
    # are parsed): ``init`` is every phase's first such command.
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = init ] && [ "$2" != -help ]; then\n'
        f'  echo "{MARK} $(date +%s%N)"\n'
        "fi\n"
        f"exec '{engine}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script


def _first_stamp(log: str) -> int:
    stamps = [int(line.split()[1]) for line in log.splitlines() if line.startswith(MARK)]
    if not stamps:
        raise SystemExit("no engine stamp in the phase's log")
    return min(stamps)


def _one_run(client: Any, name: str) -> dict[str, float]:
    # A workspace of its own: the example then has a change to apply.
    workspace = client.create_workspace(name)["id"]
    created = time.time_ns()
    run_id = client.create_run(workspace, REPO / "examples" / "hello")["id"]
    planned = client.watch(run_id, until=["awaiting_approval"], timeout=300)
    if planned["status"] != "awaiting_approval":
        log = client.log(run_id, "plan")[-1500:]
        raise SystemExit(
            f"run {run_id} ended {planned['status']}: {planned.get('status_reason')}\n{log}"
        )
    approved = time.time_ns()
    client.decide(run_id, "approve")
    done = client.watch(run_id, timeout=300)
    if done["status"] != "succeeded":
        raise SystemExit(f"run {run_id} ended {done['status']}")
    plan = _first_stamp(client.log(run_id, "plan"))
    apply = _first_stamp(client.log(run_id, "apply"))
    return {
        "creation_to_plan_engine_s": (plan - created) / 1e9,
        "approval_to_apply_engine_s": (apply - approved) / 1e9,
    }


def _measure(pool: int, poll: int, runs: int) -> dict[str, Any]:
    from runplane.client import Client, Connection
    from runplane.local.stack import EmbeddedStack

    engine = REPO / ".venv" / "engine" / "terraform"
    if not engine.exists():
        raise SystemExit("run `make engine` first")
    with tempfile.TemporaryDirectory(prefix="runplane-bench-") as data:
        # Beside the stack's directory, not above it: the engine's sandbox is given
        # the wrapper's directory to read, and nothing of the stack's.
        wrapper = _wrapper(Path(data) / "engine", engine)
        stack = EmbeddedStack(
            Path(data) / "stack", port=0, engine=str(wrapper), runner_standby=pool
        )
        credentials = stack.start()
        if pool and poll != 2:
            stack.use_standby_pool(pool, poll_seconds=poll)
        try:
            client = Client(Connection(credentials.url, credentials.token))
            _one_run(client, "warm-up")  # first executions parse the ASL
            rows = [_one_run(client, f"bench-standby-{n}") for n in range(runs)]
            assert stack.launcher is not None
            on_pool = len(stack.launcher.pool_standbys)
        finally:
            stack.stop()
    summary: dict[str, Any] = {"pool": pool, "poll_s": poll if pool else None, "runs": runs}
    summary["pool_standbys_started"] = on_pool
    for key in rows[0]:
        values = sorted(row[key] for row in rows)
        summary[key] = {
            "median": round(statistics.median(values), 3),
            "min": round(values[0], 3),
            "max": round(values[-1], 3),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--configs", default="0,2:2,2:1", help="pool size:poll seconds to compare (0: no pool)"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        size, _, poll = args.one.partition(":")
        print(json.dumps(_measure(int(size), int(poll or 2), args.runs)))
        return
    results = []
    for pool in args.configs.split(","):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.standby_latency",
                "--one",
                pool,
                "--runs",
                str(args.runs),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
        )
        if done.returncode != 0:
            raise SystemExit(f"pool {pool} failed:\n{done.stderr[-2000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        f"{'pool':<5} {'poll s':>6} {'runs':>4} {'creation->plan engine s (median, min-max)':>44} "
        f"{'approval->apply engine s (median, min-max)':>44}"
    )
    for row in results:
        plan, apply = row["creation_to_plan_engine_s"], row["approval_to_apply_engine_s"]
        print(
            f"{row['pool']:<5} {row['poll_s'] or '-':>6} {row['runs']:>4} "
            f"{plan['median']:>24.3f} ({plan['min']:.3f}-{plan['max']:.3f})"
            f"{apply['median']:>26.3f} ({apply['min']:.3f}-{apply['max']:.3f})"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
