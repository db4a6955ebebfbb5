"""Orchestration overhead and request counts per run on the embedded stack.

    python -m benchmarks.run_overhead [--runs 5]

Each run is a plan_and_apply of examples/hello with a fresh variable value (so
it always has changes), approved the moment it awaits approval. Per run it
reports:

- wall time from creation to ``succeeded``, the time the engine itself ran
  (reported by the runner for its plan and apply phases), and their
  difference: the control plane's overhead (workflow, Lambdas, DynamoDB, S3,
  KMS, the runner's own transfers; the approval is given on the write that
  makes the run await it);
- DynamoDB requests by operation (and how many of them write) and Step
  Functions state transitions;
- the HTTP calls the sandboxes made, by route;
- where the overhead went: sandbox start-up, the runners' other work, the
  control plane between sandboxes, and a sampled split of this process's busy
  threads between moto, the AWS SDK and our code (``benchmarks.overhead_split``);
- what those counts would cost in AWS (list prices, us-east-1).

The embedded stack runs everything on this machine, so absolute seconds are
this machine's; the counts are what a deployment would pay for.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import boto3
import botocore.client

from benchmarks.overhead_split import Sampler, Timeline
from runplane.client import Client, Connection
from runplane.local import moto_serial
from runplane.local.stack import EmbeddedStack
from runplane.store import run_parts
from runplane.store.models import RunItem, run_key

REPO = Path(__file__).resolve().parents[1]

# List prices, us-east-1, on-demand (USD).
DYNAMODB_WRITE_UNIT = 1.25 / 1_000_000
DYNAMODB_READ_UNIT = 0.25 / 1_000_000
STEP_FUNCTIONS_TRANSITION = 0.025 / 1_000
LAMBDA_REQUEST = 0.20 / 1_000_000
LAMBDA_GB_SECOND = 0.0000166667
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"}
READS = {"GetItem", "Query", "Scan", "BatchGetItem"}
WRITE_REQUESTS = WRITES | {"TransactWriteItems"}
TIMELINE = Timeline()


def _cost(counts: Counter[str], transitions: float, lambdas: float) -> dict[str, float]:
    """A lower bound: items under 1 KB; a transactional item costs two units."""
    writes = sum(counts[a] for a in WRITES)
    reads = sum(counts[a] for a in READS)
    # A TransactWriteItems writes several items; count 2 units per item, ~4 items each.
    transact_units = counts["TransactWriteItems"] * 4 * 2
    dynamodb = (writes + transact_units) * DYNAMODB_WRITE_UNIT + reads * DYNAMODB_READ_UNIT
    step_functions = transitions * STEP_FUNCTIONS_TRANSITION
    # Task Lambdas: 512 MB for ~0.3 s each.
    lambda_cost = lambdas * (LAMBDA_REQUEST + 0.5 * 0.3 * LAMBDA_GB_SECOND)
    return {
        "dynamodb_usd": dynamodb,
        "step_functions_usd": step_functions,
        "lambda_usd": lambda_cost,
        "total_usd": dynamodb + step_functions + lambda_cost,
    }


# DynamoDB requests by call site: "store function <- first caller outside store/".
CALL_SITES: Counter[str] = Counter()
# Seconds spent in those requests (client side: the SDK, moto and the wait for its lock).
SITE_SECONDS: defaultdict[str, float] = defaultdict(float)
# The run's own DynamoDB requests by operation: every request but the client's
# (its reviews and the benchmark's status reads), told apart by the caller's stack.
RUN_REQUESTS: Counter[str] = Counter()
_SITES_LOCK = threading.Lock()
_CLIENT_FRAMES = {("services/runs", "build_review")}


def _client_read() -> bool:
    """Whether the request on this thread is the client's: a review or the benchmark's."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        # Its status waits, and its own reads of a finished run (the engine's seconds).
        if name.endswith("/benchmarks/run_overhead.py") and frame.f_code.co_name in {
            "wait_for",
            "_one_run",
        }:
            return True
        if "/runplane/" in name:
            where = name.split("/runplane/", 1)[1].removesuffix(".py")
            if (where, frame.f_code.co_name) in _CLIENT_FRAMES:
                return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _site() -> str:
    """The innermost runplane frame, and the first frame above it outside store/."""
    frame = sys._getframe(2)
    inner = outer = ""
    while frame is not None:
        name = frame.f_code.co_filename
        if "/runplane/" in name and "/runplane/local/" not in name:
            where = name.split("/runplane/", 1)[1].removesuffix(".py")
            label = f"{where}:{frame.f_code.co_name}"
            if not inner:
                inner = label
            elif not where.startswith("store/") and not outer:
                outer = label
                break
        elif "/functions/" in name and inner and not outer:
            where = name.split("/functions/", 1)[1].removesuffix(".py")
            outer = f"functions/{where}:{frame.f_code.co_name}"
            break
        frame = frame.f_back  # type: ignore[assignment]
    return f"{inner or '?'} <- {outer or '?'}"


# Every counted request of the runs: (start, seconds, "operation site", keys).
TRACE: list[tuple[float, float, str, str]] = []


def _keys(params: Any) -> str:
    """The item keys a request names (for --trace): partition and sort key values."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "PK" in value and isinstance(value["PK"], dict):
                sk = value.get("SK", {})
                found.append(f"{value['PK'].get('S', '')}|{sk.get('S', '') if sk else ''}")
                return
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(params)
    if not found and "ExpressionAttributeValues" in params:
        found = [str(v.get("S", "")) for v in params["ExpressionAttributeValues"].values()][:2]
    return " ".join(found)


def _count_call_sites() -> None:
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009

    def counted(self: Any, operation: str, params: Any) -> Any:
        if self.meta.service_model.service_name != "dynamodb" or _client_read():
            return original(self, operation, params)
        site = f"{operation} {_site()}"
        started = time.perf_counter()
        try:
            return original(self, operation, params)
        finally:
            spent = time.perf_counter() - started
            with _SITES_LOCK:
                CALL_SITES[site] += 1
                SITE_SECONDS[site] += spent
                RUN_REQUESTS[operation] += 1
                TRACE.append((started, spent, site, _keys(params)))

    setattr(botocore.client.BaseClient, "_make_api_call", counted)  # noqa: B010


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sites", type=int, default=40, help="call sites to list (0: none)")
    parser.add_argument(
        "--trace", action="store_true", help="list the last run's requests in order, with keys"
    )
    args = parser.parse_args()
    _count_call_sites()
    TIMELINE.install()
    from functions.tasks.handlers import HANDLERS

    TIMELINE.time_tasks(HANDLERS)
    engine = REPO / ".venv" / "engine" / "terraform"
    if not engine.exists():
        raise SystemExit("run `make engine` first")

    with tempfile.TemporaryDirectory(prefix="runplane-bench-") as data:
        stack = EmbeddedStack(Path(data), port=0, engine=str(engine))
        credentials = stack.start()
        assert stack.services is not None
        STATUS.install(stack.services.settings.table_name, stack.services.settings.region)
        try:
            client = Client(Connection(credentials.url, credentials.token))
            workspace = client.create_workspace("bench")["id"]
            # One warm-up run, not measured: first executions parse the ASL.
            _one_run(client, workspace, "warmup", stack)
            CALL_SITES.clear()
            SITE_SECONDS.clear()
            TIMELINE.calls.clear()
            TIMELINE.route_seconds.clear()
            TIMELINE.task_seconds.clear()
            sampler = Sampler()
            sampler.start()
            try:
                rows = []
                for i in range(args.runs):
                    TRACE.clear()
                    rows.append(_one_run(client, workspace, f"v{i}", stack))
            finally:
                sampler.stop()
        finally:
            stack.stop()

    overheads = [r["overhead_s"] for r in rows]
    print(
        f"{'run':<4} {'total s':>8} {'engine s':>9} {'overhead s':>11} {'start-up s':>11} "
        f"{'runner s':>9} {'control s':>10} {'ddb req':>8} {'writes':>7} {'sfn tr':>7}"
    )
    for i, row in enumerate(rows):
        split = row["split"]
        print(
            f"{i:<4} {row['total_s']:>8.2f} {row['engine_s']:>9.2f} {row['overhead_s']:>11.2f} "
            f"{split['sandbox_start_up_s']:>11.2f} {split['runner_other_s']:>9.2f} "
            f"{split['control_plane_s']:>10.2f} {row['dynamodb_requests']:>8} "
            f"{row['dynamodb_writes']:>7} {row['transitions']:>7}"
        )
    counts: Counter[str] = Counter()
    for row in rows:
        counts.update(row["dynamodb_by_operation"])
    per_run = Counter({k: v / len(rows) for k, v in counts.items()})
    transitions = statistics.mean(r["transitions"] for r in rows)
    lambdas = statistics.mean(r["lambda_invocations"] for r in rows)
    cost = _cost(per_run, transitions, lambdas)
    summary = {
        "runs": len(rows),
        "median_total_s": round(statistics.median(r["total_s"] for r in rows), 2),
        "median_engine_s": round(statistics.median(r["engine_s"] for r in rows), 2),
        "median_overhead_s": round(statistics.median(overheads), 2),
        "dynamodb_requests_per_run": round(sum(per_run.values()), 1),
        "dynamodb_writes_per_run": round(sum(per_run[op] for op in WRITE_REQUESTS), 1),
        "dynamodb_by_operation_per_run": {k: round(v, 1) for k, v in sorted(per_run.items())},
        "state_transitions_per_run": round(transitions, 1),
        "lambda_invocations_per_run": round(lambdas, 1),
        "cost_per_run_usd": {k: round(v, 7) for k, v in cost.items()},
        "median_overhead_split_s": {
            key: round(statistics.median(r["split"][key] for r in rows), 2)
            for key in rows[0]["split"]
        },
        "stack_cpu_s_per_run": {k: round(v / len(rows), 2) for k, v in sampler.seconds().items()},
        "sandbox_calls_per_run": round(sum(TIMELINE.calls.values()) / len(rows), 1),
    }
    print(
        f"median overhead per run: {summary['median_overhead_s']} s "
        f"(engine {summary['median_engine_s']} s of {summary['median_total_s']} s)"
    )
    print(
        f"per run: {summary['dynamodb_requests_per_run']} DynamoDB requests "
        f"({summary['dynamodb_writes_per_run']} writes), "
        f"{summary['state_transitions_per_run']} state transitions, "
        f"~${cost['total_usd']:.6f} in DynamoDB + Step Functions + Lambda"
    )
    print(f"overhead split (median s): {summary['median_overhead_split_s']}")
    print(f"stack process CPU per run (s, sampled): {summary['stack_cpu_s_per_run']}")
    other = {k: round(v / len(rows), 2) for k, v in sampler.other.most_common(8)}
    print(f"  of which other: {other}")
    print(f"sandbox HTTP calls per run by route ({summary['sandbox_calls_per_run']}):")
    for route, n in TIMELINE.calls.most_common():
        print(f"{n / len(rows):>7.1f}  {route}")
    if args.sites:
        print("time per run in each workflow task's handler (ms):")
        for name, seconds in sorted(TIMELINE.task_seconds.items(), key=lambda kv: -kv[1]):
            print(f"{1000 * seconds / len(rows):>9.1f}  {name}")
        print("time per run serving each route, as the gateway saw it (ms):")
        for route, seconds in sorted(TIMELINE.route_seconds.items(), key=lambda kv: -kv[1]):
            print(f"{1000 * seconds / len(rows):>9.1f}  {route}")
        print(f"DynamoDB requests per run by call site, with their time (top {args.sites}):")
        for site, n in CALL_SITES.most_common(args.sites):
            ms = 1000 * SITE_SECONDS[site] / len(rows)
            print(f"{n / len(rows):>7.1f} {ms:>7.1f} ms  {site}")
    if args.trace and TRACE:
        print("the last run's DynamoDB requests in order (ms from the first, ms spent):")
        first = TRACE[0][0]
        for started, spent, site, keys in sorted(TRACE):
            print(f"{1000 * (started - first):>8.1f} {1000 * spent:>6.1f}  {site}  [{keys}]")
    print(json.dumps(summary))


def _run_requests() -> Counter[str]:
    with _SITES_LOCK:
        return Counter(RUN_REQUESTS)


class _StatusWaits:
    """Sees a run's status change the moment the write that changes it is served.

    Polling the run's review every 50 ms kept a quarter of a core busy in the stack
    process. Reading the run after every DynamoDB write (one ``GetItem`` each) still
    cost the measured process about 100 ms of CPU per run, some 25 requests through
    the SDK and moto. So the status is read from moto's table in memory, by the
    listener moto calls after each write while it still holds DynamoDB's lock: no
    request, and never a transaction's half-applied state."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._watched: tuple[Any, Any] | None = None  # the run's key, as moto stores it
        self._status: str | None = None
        self._table: Any = None
        self._dynamo_type: Any = None

    def install(self, table_name: str, region: str) -> None:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        self._dynamo_type = DynamoType
        self._table = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].get_table(table_name)
        moto_serial.WRITE_LISTENERS.append(self._on_write)

    def _on_write(self) -> None:
        watched = self._watched
        if watched is None:
            return
        item = self._table.get_item(*watched)
        status = None if item is None else item.attrs["status"].value
        if status != self._status:
            with self._changed:
                self._status = status
                self._changed.notify_all()

    def wait_for(self, run_id: str, until: set[str]) -> str:
        with self._changed:
            pk, sk = run_key(run_id)
            self._watched = (self._dynamo_type({"S": pk}), self._dynamo_type({"S": sk}))
            self._status = None
        # Read outside the condition: the listener takes it while moto's lock is held.
        read = str(RunItem.get(*run_key(run_id), consistent_read=True).status)
        with self._changed:
            if self._status is None:  # no write since: the read is the latest
                self._status = read
            self._changed.wait_for(lambda: self._status in until, timeout=600)
            status = self._status
        if status not in until:
            raise SystemExit(f"run {run_id} is still {status} after 600 s")
        return status


STATUS = _StatusWaits()


def _one_run(client: Client, workspace: str, value: str, stack: EmbeddedStack) -> dict[str, Any]:
    before = _run_requests()
    TIMELINE.reset()
    started = time.perf_counter()
    run = client.create_run(workspace, REPO / "examples" / "hello", variables={"greeting": value})
    ended = {"succeeded", "plan_failed", "apply_failed", "needs_recovery", "canceled"}
    STATUS.wait_for(run["id"], {"awaiting_approval", *ended})
    client.decide(run["id"], "approve")
    status = STATUS.wait_for(run["id"], ended)
    finished = time.perf_counter()
    total = finished - started
    after = _run_requests()
    if status != "succeeded":
        raise SystemExit(f"run {run['id']} ended {status}")
    engine = sum(
        float(run_parts.require(run["id"], f"attempt#{phase}").body.get("engine_seconds") or 0)
        for phase in ("plan", "apply")
    )
    transitions, lambdas = workflow_steps(stack, run["id"])
    delta = after - before
    return {
        "total_s": total,
        "engine_s": engine,
        "overhead_s": total - engine,
        "dynamodb_requests": sum(delta.values()),
        "dynamodb_writes": sum(delta[op] for op in WRITE_REQUESTS),
        "dynamodb_by_operation": dict(delta),
        "split": TIMELINE.split(started, finished, engine),
        "transitions": transitions,
        "lambda_invocations": lambdas,
    }


def workflow_steps(stack: EmbeddedStack, run_id: str) -> tuple[int, int]:
    """The state transitions and task Lambda invocations of the run's workflow, from its
    execution's history, once the execution ended."""
    assert stack.services is not None
    settings = stack.services.settings
    sfn = boto3.client(
        "stepfunctions", region_name=settings.region, endpoint_url=settings.aws_endpoint_url
    )
    arn = settings.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{run_id}"
    # The run is succeeded before its workflow takes its last step: count that step too.
    deadline = time.monotonic() + 30
    while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
        if time.monotonic() > deadline:
            raise SystemExit(f"the workflow of run {run_id} did not end")
        time.sleep(0.05)
    history = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    transitions = sum(1 for e in history if e["type"].endswith("StateEntered"))
    lambdas = sum(1 for e in history if e["type"] == "TaskScheduled")
    return transitions, lambdas


if __name__ == "__main__":
    main()
