"""Writer reservation hand-off with many runs waiting on one workspace.

    python -m benchmarks.handoff [--waiting 10 100 1000] [--handoffs 20] [--calls]

For each queue length N: N plan_and_apply runs queue FIFO behind a holder on one
workspace (moto's DynamoDB in process, the real store and writer service). Then
the holder releases, which hands the reservation to the oldest waiter in the
same write, and that run releases in turn, ``--handoffs`` times. Reported: the
median time and DynamoDB requests per hand-off. Both should stay flat as N grows.
``--calls`` also counts the Python function calls each hand-off makes (under
cProfile, so its times are the profiler's): a measure of work that, unlike time,
does not depend on what else the machine is running.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from collections import Counter
from typing import Any

import boto3
from moto import mock_aws

from runplane.adapters.clock import SystemClock
from runplane.adapters.ids import RandomIds
from runplane.domain.run import RunKind
from runplane.local import moto_serial, moto_speedups
from runplane.services.tenancy import Tenancy
from runplane.store import models
from runplane.store.provision import create_table
from runplane.store.runs import RunRepository
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from runplane.wiring import run_lifecycle
from tests.builders import bare_run

TABLE = "runplane-bench"


def _requests() -> int:
    return sum(moto_serial.REQUEST_COUNTS.get("dynamodb", Counter()).values())


def measure(waiting: int, handoffs: int, count_calls: bool = False) -> dict[str, Any]:
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE)
        models.bind(TABLE, "us-east-1", None)
        clock, ids = SystemClock(), RandomIds()
        tenancy = Tenancy(clock, ids, DynamoWorkspaceDirectory())
        lifecycle = run_lifecycle(clock, ids)
        org = tenancy.create_organization(f"bench-{waiting}")
        ws = tenancy.create_workspace(org.id, "queue")
        runs = [
            bare_run(
                clock,
                ids,
                RunRepository(clock, ids),
                org.id,
                ws.id,
                RunKind.PLAN_AND_APPLY,
                actor="bench",
            )
            for _ in range(waiting + 1)
        ]
        for run in runs:
            lifecycle.writer.reserve(run, f"token-{run.id}")
        seconds, requests, calls = [], [], []
        holder = runs[0]
        for _ in range(min(handoffs, waiting)):
            profile = cProfile.Profile() if count_calls else None
            before, started = _requests(), time.perf_counter()
            if profile is not None:
                profile.enable()
            handoff = lifecycle.writer.release(ws.id, holder.id)
            if profile is not None:
                profile.disable()
                calls.append(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
            seconds.append(time.perf_counter() - started)
            requests.append(_requests() - before)
            assert handoff is not None
            holder = next(r for r in runs if r.id == handoff.run_id)
    # Bind anew for the next measurement's fresh table.
    models.TableItem.Meta.table_name = None  # type: ignore[assignment]
    result = {
        "waiting": waiting,
        "median_ms": round(statistics.median(seconds) * 1000, 2),
        "max_ms": round(max(seconds) * 1000, 2),
        "requests_per_handoff": statistics.median(requests),
    }
    if calls:
        result["calls_per_handoff"] = statistics.median(calls)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waiting", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--handoffs", type=int, default=20)
    parser.add_argument(
        "--bare-moto", action="store_true", help="without the embedded stack's moto speedups"
    )
    parser.add_argument(
        "--calls", action="store_true", help="also count Python calls per hand-off (cProfile)"
    )
    args = parser.parse_args()
    if not args.bare_moto:
        moto_speedups.install()
    moto_serial.serialize_requests("dynamodb")
    results = [measure(n, args.handoffs, args.calls) for n in args.waiting]
    print(f"{'waiting':>8} {'median ms':>10} {'max ms':>8} {'requests':>9} {'calls':>8}")
    for row in results:
        print(
            f"{row['waiting']:>8} {row['median_ms']:>10} {row['max_ms']:>8} "
            f"{row['requests_per_handoff']:>9} {row.get('calls_per_handoff', '-'):>8}"
        )
    print(json.dumps({"handoffs": results}))


if __name__ == "__main__":
    main()
