"""Reads and writes that must not grow with the number of runs stored.

    python -m benchmarks.scale [--runs 100000] [--workspaces 1000] [--queued 1000]
                               [--repeat 7] [--first 1000]

On the embedded stack (its moto DynamoDB in this process, the stack's own table):
``--workspaces`` workspaces over two organizations, runs spread over them (one
workspace holds 20% of them, four more 5% each), and ``--queued`` runs waiting for
the writer of one more workspace. The table is measured with ``--first`` runs, then
filled up to ``--runs`` (the same workspaces) and measured again. For each operation:
the median latency of ``--repeat`` calls, the DynamoDB requests per call, the items
they examined (a query's ``ScannedCount``, a read's items, a write's items) and the
most items one request examined. Any ``Scan`` is reported.

The queued runs are made through the real store and writer service. The bulk of the
runs (their run item, stages, creation and final audit events, input snapshot, plan
attempt, and the attention notices of the few that await someone) is built by the
store's own writers (``RunRepository.creation``, ``run_parts.put``,
``attention_writes``) and put straight into moto's table, bypassing the request
path: the items are the store's, only the requests are skipped.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.cookiejar
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import botocore.client

from runplane.client import Client, Connection
from runplane.domain.entities import Run
from runplane.domain.ids import IdKind
from runplane.domain.run import RunKind, RunStatus
from runplane.local import gateway as gateway_module
from runplane.local import moto_index_window, moto_serial
from runplane.local.stack import EmbeddedStack
from runplane.store import audit, run_parts
from runplane.store.attention import attention_writes
from runplane.store.models import run_audit_key
from runplane.store.runs import RunRepository
from runplane.store.transaction import Transaction

REPO = Path(__file__).resolve().parents[1]

# Terminal statuses of history, with their share (a run's final move).
HISTORY = (
    (RunStatus.SUCCEEDED, 0.74),
    (RunStatus.PLAN_FAILED, 0.08),
    (RunStatus.CANCELED, 0.05),
    (RunStatus.REJECTED, 0.03),
    (RunStatus.EXPIRED, 0.03),
    (RunStatus.POLICY_FAILED, 0.03),
    (RunStatus.APPLY_FAILED, 0.02),
    (RunStatus.PLAN_COMPLETE, 0.02),
)
# The latest run of a fixed number of workspaces is still with someone: these do not
# grow with history, as in a deployment (one writer per workspace).
LATEST = (
    (RunStatus.AWAITING_APPROVAL, 20),
    (RunStatus.NEEDS_RECOVERY, 5),
    (RunStatus.PLANNING, 10),
    (RunStatus.APPLY_FAILED, 15),
)
HOT_SHARES = (0.20, 0.05, 0.05, 0.05, 0.05)


# -- counting what each operation asks of DynamoDB ----------------------------------------


@dataclass
class Tally:
    requests: Counter[str] = field(default_factory=Counter)
    items: int = 0
    most_items: int = 0
    scans: int = 0

    def add(self, operation: str, params: dict[str, Any], reply: dict[str, Any]) -> None:
        self.requests[operation] += 1
        examined = _examined(operation, params, reply)
        self.items += examined
        self.most_items = max(self.most_items, examined)
        if operation == "Scan":
            self.scans += 1


def _examined(operation: str, params: dict[str, Any], reply: dict[str, Any]) -> int:
    """Items a request read or wrote: DynamoDB's ``ScannedCount`` for a query (the
    items it read before any filter, which is what it charges for)."""
    if operation in {"Query", "Scan"}:
        return int(reply.get("ScannedCount", 0))
    if operation == "BatchGetItem":
        return sum(len(items) for items in reply.get("Responses", {}).values())
    if operation in {"TransactWriteItems", "TransactGetItems"}:
        return len(params.get("TransactItems", ()))
    if operation == "BatchWriteItem":
        return sum(len(v) for v in params.get("RequestItems", {}).values())
    return 1


_COUNTING = threading.local()
_TALLY_LOCK = threading.Lock()


def _install_counting() -> None:
    """Count the DynamoDB requests of the measured call: those made on the measuring
    thread and on the gateway threads serving its HTTP requests (not the workflow's)."""
    original = botocore.client.BaseClient._make_api_call

    def counted(self: Any, operation: str, params: Any) -> Any:
        reply = original(self, operation, params)
        tally: Tally | None = getattr(_COUNTING, "tally", None)
        if tally is not None and self.meta.service_model.service_name == "dynamodb":
            with _TALLY_LOCK:
                tally.add(operation, params, reply)
        return reply

    botocore.client.BaseClient._make_api_call = counted  # type: ignore[method-assign]
    handle = gateway_module.Gateway.handle

    def handled(self: Any, *args: Any, **kwargs: Any) -> Any:
        _COUNTING.tally = MEASURING.tally
        try:
            return handle(self, *args, **kwargs)
        finally:
            _COUNTING.tally = None

    gateway_module.Gateway.handle = handled  # type: ignore[method-assign]


class _Measuring:
    tally: Tally | None = None


MEASURING = _Measuring()


@contextmanager
def counted(tally: Tally) -> Iterator[None]:
    MEASURING.tally = _COUNTING.tally = tally
    try:
        yield
    finally:
        MEASURING.tally = _COUNTING.tally = None


# -- filling the table --------------------------------------------------------------------


@dataclass
class Layout:
    """The workspaces and where the runs go."""

    organizations: list[str]
    workspaces: list[tuple[str, str]]  # (organization ID, workspace ID)
    queue_workspace: str
    queue_holder: str
    hot: list[str]
    normal: str
    measured_run: str = ""
    latest: set[str] = field(default_factory=set)


def _moto_table(settings: Any) -> Any:
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[DEFAULT_ACCOUNT_ID][settings.region].get_table(settings.table_name)


def _pick_workspace(layout: Layout, rng: random.Random) -> tuple[str, str]:
    draw = rng.random()
    for index, share in enumerate(HOT_SHARES):
        if draw < share:
            return layout.workspaces[index]
        draw -= share
    return layout.workspaces[rng.randrange(len(HOT_SHARES), len(layout.workspaces))]


def _pick_status(rng: random.Random) -> RunStatus:
    draw = rng.random()
    for status, share in HISTORY:
        if draw < share:
            return status
        draw -= share
    return RunStatus.SUCCEEDED


def _run_writes(
    runs: RunRepository,
    ids: Any,
    org_id: str,
    ws_id: str,
    status: RunStatus,
    created: datetime,
    *,
    notices: bool,
) -> tuple[Run, Transaction]:
    """Every item the real code has written for a run that reached ``status``."""
    kind = RunKind.PLAN_ONLY if status is RunStatus.PLAN_COMPLETE else RunKind.PLAN_AND_APPLY
    new = Run(
        id=ids.new(IdKind.RUN),
        organization_id=org_id,
        workspace_id=ws_id,
        kind=kind,
        status=RunStatus.DISPATCH_PENDING,
        version=1,
        created_at=created,
        updated_at=created,
        created_by="user:bench",
        definition_version="run.asl.json#bench",
    )
    tx = runs.creation(new, actor="user:bench")
    tx.extend(
        [
            run_parts.put(new.id, "input", state="recorded", body={"variables": {}}, now=created),
            run_parts.put(
                new.id,
                "attempt#plan",
                state="closed",
                body={
                    "attempt_id": ids.new(IdKind.ATTEMPT),
                    "sandbox_id": "sbx-bench",
                    "phase": "plan",
                    "launched_at": created.isoformat(),
                    "finished_at": (created + timedelta(minutes=1)).isoformat(),
                    "engine_seconds": 2.5,
                },
                now=created,
            ),
        ]
    )
    ended = created + timedelta(minutes=3)
    final_version = 6
    tx.put_new(
        audit.audit_item(
            key=run_audit_key(new.id, final_version),
            event_id=ids.new(IdKind.AUDIT_EVENT),
            org_id=org_id,
            subject_id=new.id,
            type="run.transitioned",
            actor="system",
            at=ended,
            details={"from": "planning", "to": status.value},
        )
    )
    if notices:
        deadline = ended + timedelta(days=7) if status is RunStatus.AWAITING_APPROVAL else None
        tx.extend([attention_writes(new, status, ended, deadline)])
    # The run item as its last move left it.
    for write in tx._writes:
        item = write.request.get("Item")
        if item is not None and item["SK"]["S"] == "RUN":
            item["status"] = {"S": status.value}
            item["version"] = {"N": str(final_version)}
            item["updated_at"] = write.request["Item"]["created_at"]
    return new, tx


def fill(stack: EmbeddedStack, layout: Layout, count: int, seed: int, newest: bool) -> float:
    """Put ``count`` runs' items into the stack's table; returns the seconds it took.
    ``newest``: this batch includes each workspace's latest run (the first batch)."""
    assert stack.services is not None
    services = stack.services
    table = _moto_table(services.settings)
    runs = RunRepository(services.clock, services.ids)
    rng = random.Random(seed)  # noqa: S311 (a reproducible spread, not a secret)
    now = datetime.now(UTC)
    lock = moto_serial.serialize_requests("dynamodb")
    started = time.perf_counter()
    batches: list[list[dict[str, Any]]] = []
    special: list[tuple[RunStatus, tuple[str, str]]] = []
    if newest:
        chosen = iter(layout.workspaces[len(HOT_SHARES) + 1 :])
        for status, how_many in LATEST:
            special.extend((status, next(chosen)) for _ in range(how_many))
    for index in range(count):
        if index < len(special):
            status, (org_id, ws_id) = special[index]
            created = now - timedelta(minutes=5)
            notices = True
            layout.latest.add(ws_id)
        else:
            org_id, ws_id = _pick_workspace(layout, rng)
            if newest and index == len(special):
                # The measured run: the normal workspace has one whatever the spread.
                org_id, ws_id = next(pair for pair in layout.workspaces if pair[1] == layout.normal)
            status = _pick_status(rng)
            # History: the second batch is older than the first.
            days = rng.uniform(1, 30) if newest else rng.uniform(30, 365)
            created = now - timedelta(days=days, seconds=rng.random())
            notices = False
        run, tx = _run_writes(runs, services.ids, org_id, ws_id, status, created, notices=notices)
        if ws_id == layout.normal and not layout.measured_run:
            layout.measured_run = run.id
        batches.append([w.request["Item"] for w in tx._writes if "Item" in w.request])
        if len(batches) >= 500:
            _put(table, lock, batches)
            batches = []
    _put(table, lock, batches)
    return time.perf_counter() - started


def _put(table: Any, lock: Any, batches: list[list[dict[str, Any]]]) -> None:
    # No stream records: the relay would read a million INSERTs of items it ignores.
    # The index partitions are built again, in one walk, by the next index query.
    with lock:
        moto_index_window.forget(table)
        shard, table.stream_shard = table.stream_shard, None
        try:
            for items in batches:
                for item in items:
                    table.put_item(item)
        finally:
            table.stream_shard = shard
            moto_serial.forget_tracked_instances()


def lay_out(stack: EmbeddedStack, client: Client, workspaces: int, queued: int) -> Layout:
    assert stack.services is not None
    services = stack.services
    tenancy = services.tenancy
    default = services.workspaces.organization_id_of(client.connection.organization)
    other = tenancy.create_organization("scale-other").id
    pairs = []
    for index in range(workspaces):
        org_id = default if index % 2 == 0 else other
        pairs.append((org_id, tenancy.create_workspace(org_id, f"bench-{index:05d}").id))
    queue_ws = tenancy.create_workspace(default, "queue").id
    runs = RunRepository(services.clock, services.ids)
    from tests.builders import bare_run

    waiting = [
        bare_run(
            services.clock,
            services.ids,
            runs,
            default,
            queue_ws,
            RunKind.PLAN_AND_APPLY,
            actor="user:bench",
        )
        for _ in range(queued + 1)
    ]
    writer = services.lifecycle.writer
    for run in waiting:
        writer.reserve(run, f"token-{run.id}")
    return Layout(
        organizations=[default, other],
        workspaces=pairs,
        queue_workspace=queue_ws,
        queue_holder=waiting[0].id,
        hot=[pairs[0][1]],
        normal=pairs[len(HOT_SHARES) + 61][1],  # in the default organization
    )


# -- the operations measured --------------------------------------------------------------


class Browser:
    """The dashboard's pages with a signed-in session cookie."""

    def __init__(self, login_link: str) -> None:
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        self._base = login_link.split("/ui/", 1)[0]
        self._opener.open(login_link).read()

    def get(self, path: str) -> None:
        with self._opener.open(self._base + path) as reply:
            reply.read()
            if reply.status != 200:
                raise SystemExit(f"{path}: {reply.status}")


def publish_state(client: Client, workspace_id: str) -> None:
    """A current state version on the measured workspace, as the CLI publishes one."""
    state = json.dumps(
        {"version": 4, "serial": 1, "lineage": "bench", "outputs": {}, "resources": []}
    ).encode()
    base = f"/api/v2/workspaces/{workspace_id}"
    lock = {"data": {"type": "", "attributes": {"reason": "bench"}}}
    client._call("POST", f"{base}/actions/lock", lock)
    client._call(
        "POST",
        f"{base}/state-versions",
        {
            "data": {
                "type": "state-versions",
                "attributes": {
                    "serial": 1,
                    "lineage": "bench",
                    "md5": hashlib.md5(state, usedforsecurity=False).hexdigest(),
                    "state": base64.b64encode(state).decode(),
                },
            }
        },
    )
    client._call("POST", f"{base}/actions/unlock")


def operations(
    stack: EmbeddedStack, client: Client, browser: Browser, layout: Layout, configuration: str
) -> dict[str, Callable[[], Any]]:
    assert stack.services is not None
    writer = stack.services.lifecycle.writer
    org = client.connection.organization
    normal_name = next(
        f"bench-{i:05d}" for i, (_, w) in enumerate(layout.workspaces) if w == layout.normal
    )
    holder = {"run": layout.queue_holder}

    def create_run() -> Any:
        return client._call(
            "POST",
            f"/api/v1/workspaces/{layout.queue_workspace}/runs",
            {"kind": "plan_and_apply", "configuration_version_id": configuration},
        )

    def hand_off() -> None:
        handoff = writer.release(layout.queue_workspace, holder["run"])
        assert handoff is not None
        holder["run"] = handoff.run_id

    hot = layout.hot[0]
    return {
        "run creation (API)": create_run,
        "writer hand-off (1,000 waiting)": hand_off,
        "run list, hot workspace (API)": lambda: client.list_runs(hot),
        "run list, normal workspace (API)": lambda: client.list_runs(layout.normal),
        "run list, by name (CLI path)": lambda: client.list_runs(
            client.workspace_id("bench-00000")
        ),
        "run review (API)": lambda: client._call("GET", f"/api/v1/runs/{layout.measured_run}"),
        "dashboard: workspace list": lambda: browser.get("/ui"),
        "dashboard: hot workspace page": lambda: browser.get(f"/ui/workspaces/{hot}"),
        "dashboard: workspace page": lambda: browser.get(f"/ui/workspaces/{layout.normal}"),
        "dashboard: run page": lambda: browser.get(f"/ui/runs/{layout.measured_run}"),
        "dashboard: attention inbox": lambda: browser.get("/ui/attention"),
        "dashboard: teams": lambda: browser.get("/ui/teams"),
        "Cloud API: workspace by name": lambda: client._call(
            "GET", f"/api/v2/organizations/{org}/workspaces/{normal_name}"
        ),
        "Cloud API: workspace by ID": lambda: client._call(
            "GET", f"/api/v2/workspaces/{layout.normal}"
        ),
        "Cloud API: current state version": lambda: client._call(
            "GET", f"/api/v2/workspaces/{layout.normal}/current-state-version"
        ),
        "Cloud API: hot workspace's runs": lambda: client._call(
            "GET", f"/api/v2/workspaces/{hot}/runs"
        ),
    }


def measure(ops: dict[str, Callable[[], Any]], repeat: int) -> dict[str, dict[str, Any]]:
    results = {}
    for name, operation in ops.items():
        operation()  # warm: first calls load templates and models
        seconds, tallies = [], []
        for _ in range(repeat):
            tally = Tally()
            with counted(tally):
                started = time.perf_counter()
                operation()
                seconds.append(time.perf_counter() - started)
            tallies.append(tally)
        results[name] = {
            "median_ms": round(statistics.median(seconds) * 1000, 1),
            "requests": statistics.median(sum(t.requests.values()) for t in tallies),
            "items": statistics.median(t.items for t in tallies),
            "most_items_one_request": max(t.most_items for t in tallies),
            "scans": sum(t.scans for t in tallies),
            "by_operation": dict(sum((t.requests for t in tallies), Counter())),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--first", type=int, default=1_000)
    parser.add_argument("--workspaces", type=int, default=1_000)
    parser.add_argument("--queued", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    _install_counting()
    engine = REPO / ".venv" / "engine" / "terraform"
    with tempfile.TemporaryDirectory(prefix="runplane-scale-") as data:
        stack = EmbeddedStack(Path(data), port=0, engine=str(engine) if engine.exists() else None)
        credentials = stack.start()
        assert stack.services is not None
        try:
            client = Client(Connection(credentials.url, credentials.token))
            started = time.perf_counter()
            layout = lay_out(stack, client, args.workspaces, args.queued)
            print(
                f"{args.workspaces} workspaces and {args.queued} queued runs through the API "
                f"and store: {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
            publish_state(client, layout.normal)
            configuration = client.upload_configuration(
                layout.queue_workspace, REPO / "examples" / "hello"
            )["id"]
            browser = Browser(stack.login_link())
            ops = operations(stack, client, browser, layout, configuration)
            figures: dict[str, Any] = {}
            filled = 0
            for target, seed, newest in ((args.first, 1, True), (args.runs, 2, False)):
                took = fill(stack, layout, target - filled, seed, newest)
                print(f"filled {target - filled} runs in {took:.1f} s", file=sys.stderr)
                filled = target
                figures[str(target)] = measure(ops, args.repeat)
                _print(target, figures[str(target)])
        finally:
            stack.stop()
    first, last = figures[str(args.first)], figures[str(args.runs)]
    print(f"\n{'operation':<36} {'ms ratio':>9} {'items ratio':>12}")
    for name in first:
        ms = last[name]["median_ms"] / max(first[name]["median_ms"], 0.1)
        items = last[name]["items"] / max(first[name]["items"], 1)
        print(f"{name:<36} {ms:>9.2f} {items:>12.2f}")
    print(json.dumps({"scale": figures, "args": vars(args)}))


def _print(runs: int, rows: dict[str, dict[str, Any]]) -> None:
    print(f"\n{runs} runs")
    print(
        f"{'operation':<36} {'median ms':>10} {'requests':>9} {'items':>7} "
        f"{'most/req':>9} {'scans':>6}"
    )
    for name, row in rows.items():
        print(
            f"{name:<36} {row['median_ms']:>10} {row['requests']:>9} {row['items']:>7} "
            f"{row['most_items_one_request']:>9} {row['scans']:>6}"
        )


if __name__ == "__main__":
    main()
