"""What one run costs in AWS, all of it, from counts measured on the embedded stack.

    python -m benchmarks.run_cost [--resources 1] [--runs 2]

Runs plan-and-apply runs of a generated configuration of ``--resources`` resources of
the test provider on the embedded stack (the first, unmeasured, warms it up), and
counts per run every AWS request the control plane and the sandbox make (DynamoDB,
S3, KMS, Step Functions) by operation, the bytes the run left in S3 and the seconds
the engine and the sandbox ran. Then prices them at us-east-1 list prices
(``PRICES``; docs/cost.md names the pages and their date) with the task size of
``infra/config.py``'s defaults. Counts are measured; what the embedded stack cannot
show (NAT bytes of provider downloads, Lambda log lines, Fargate's minimum) is an
assumption named in ``ASSUMED``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import botocore.client

from benchmarks.run_overhead import STATUS, TIMELINE, workflow_steps
from runplane.client import Client, Connection
from runplane.local.stack import EmbeddedStack
from runplane.store import run_parts

REPO = Path(__file__).resolve().parents[1]

# us-east-1 list prices, USD (docs/cost.md: pages and date).
PRICES = {
    "fargate_vcpu_hour_x86": 0.04048,
    "fargate_gb_hour_x86": 0.004445,
    "fargate_vcpu_hour_arm": 0.03238,
    "fargate_gb_hour_arm": 0.00356,
    "nat_gb": 0.045,
    "nat_hour": 0.045,
    "kms_request": 0.03 / 10_000,
    "kms_key_month": 1.0,
    "s3_put": 0.005 / 1_000,
    "s3_get": 0.0004 / 1_000,
    "s3_gb_month": 0.023,
    "logs_ingest_gb": 0.50,
    "logs_store_gb_month": 0.03,
    "api_gateway_request": 3.50 / 1_000_000,
    "lambda_request": 0.20 / 1_000_000,
    "lambda_gb_s_arm": 0.0000133334,
    "sfn_transition": 0.025 / 1_000,
    "ddb_write_unit": 1.25 / 1_000_000,
    "ddb_read_unit": 0.25 / 1_000_000,
    "ddb_gb_month": 0.25,
}
# What the embedded stack cannot measure, assumed (docs/cost.md says why each).
ASSUMED = {
    "sandbox_vcpu": 1.0,  # infra/config.py sandbox_cpu=1024
    "sandbox_gb": 4.0,  # infra/config.py sandbox_memory_mib=4096
    "fargate_start_s": 15.0,  # billed from image pull to stop (docs/latency.md)
    "fargate_minimum_s": 60.0,
    "provider_download_mb": 30.0,  # one provider zip through NAT per phase (AWS ~ 30 MB+)
    "lambda_gb": 0.5,
    "lambda_s": 0.3,
    "lambda_log_bytes": 1_000,  # START/END/REPORT lines and our one structured line
    "api_requests": 4,  # create, upload, approve, a review read
}
COUNTED = {"dynamodb", "s3", "kms", "stepfunctions"}
CALLS: Counter[str] = Counter()
_LOCK = threading.Lock()


def _count_requests() -> None:
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009

    def counted(self: Any, operation: str, params: Any) -> Any:
        service = self.meta.service_model.service_name
        if service in COUNTED:
            with _LOCK:
                CALLS[f"{service}:{operation}"] += 1
        return original(self, operation, params)

    setattr(botocore.client.BaseClient, "_make_api_call", counted)  # noqa: B010


def _configuration(directory: Path, resources: int) -> Path:
    text = (REPO / "examples" / "hello" / "main.tf").read_text(encoding="utf-8")
    if resources > 1:
        text += (
            f'\nresource "test_thing" "many" {{\n  count   = {resources - 1}\n'
            '  name    = "thing-${count.index}"\n  content = local.message\n}\n'
        )
    (directory / "main.tf").write_text(text, encoding="utf-8")
    return directory


def _stored_bytes(s3: Any) -> Counter[str]:
    """Bytes in every bucket, and in the objects that hold run logs."""
    total: Counter[str] = Counter()
    for bucket in s3.list_buckets()["Buckets"]:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            for item in page.get("Contents", []):
                total["all"] += item["Size"]
                if "log" in item["Key"].lower():
                    total["logs"] += item["Size"]
    return total


def _one_run(
    client: Client, workspace: str, config: Path, value: str, s3: Any, stack: EmbeddedStack
) -> dict[str, Any]:
    with _LOCK:
        before = Counter(CALLS)
    calls_before = sum(TIMELINE.calls.values())
    stored = _stored_bytes(s3)
    started = time.perf_counter()
    run = client.create_run(workspace, config, variables={"greeting": value})
    ended = {"succeeded", "plan_failed", "apply_failed", "needs_recovery", "canceled"}
    STATUS.wait_for(run["id"], {"awaiting_approval", *ended})
    client.decide(run["id"], "approve")
    status = STATUS.wait_for(run["id"], ended)
    wall = time.perf_counter() - started
    if status != "succeeded":
        raise SystemExit(f"run {run['id']} ended {status}")
    transitions, lambdas = workflow_steps(stack, run["id"])
    time.sleep(1)  # the sandboxes' last uploads
    with _LOCK:
        delta = Counter(CALLS) - before
    sandbox_calls = sum(TIMELINE.calls.values()) - calls_before
    engine = sum(
        float(run_parts.require(run["id"], f"attempt#{phase}").body.get("engine_seconds") or 0)
        for phase in ("plan", "apply")
    )
    # The benchmark's own listing and its reads of the workflow's history are not the run's.
    own = ("s3:List", "stepfunctions:DescribeExecution", "stepfunctions:GetExecutionHistory")
    delta = Counter({k: v for k, v in delta.items() if not k.startswith(own)})
    return {
        "wall_s": wall,
        "engine_s": engine,
        "requests": dict(delta),
        "stored": _stored_bytes(s3) - stored,
        "transitions": transitions,
        "lambda_invocations": lambdas,
        "sandbox_calls": sandbox_calls,
    }


def price(per_run: dict[str, Any], arm: bool = True) -> dict[str, float]:
    """The whole run's cost, USD, item by item."""
    p, a, calls = PRICES, ASSUMED, Counter(per_run["requests"])
    arch = "arm" if arm else "x86"
    # Two sandboxes (plan, apply), each billed from its start at a one-minute minimum.
    sandbox_s = [
        max(a["fargate_start_s"] + s, a["fargate_minimum_s"]) for s in per_run["sandbox_s"]
    ]
    fargate = (
        sum(sandbox_s)
        / 3600
        * (
            a["sandbox_vcpu"] * p[f"fargate_vcpu_hour_{arch}"]
            + a["sandbox_gb"] * p[f"fargate_gb_hour_{arch}"]
        )
    )
    ddb_writes = sum(
        v
        for k, v in calls.items()
        if k.startswith("dynamodb:")
        and ("Write" in k or k.endswith(("PutItem", "UpdateItem", "DeleteItem")))
    )
    ddb_transact = calls["dynamodb:TransactWriteItems"]
    ddb_reads = sum(v for k, v in calls.items() if k.startswith("dynamodb:")) - ddb_writes
    # A transaction writes ~4 items at 2 units each; a batch read ~2 items.
    dynamodb = ((ddb_writes - ddb_transact) + ddb_transact * 8) * p[
        "ddb_write_unit"
    ] + ddb_reads * 2 * p["ddb_read_unit"]
    s3_puts = sum(
        v
        for k, v in calls.items()
        if k.split(":")[1]
        in {
            "PutObject",
            "CreateMultipartUpload",
            "UploadPart",
            "CompleteMultipartUpload",
            "CopyObject",
        }
    )
    s3_gets = sum(v for k, v in calls.items() if k.startswith("s3:")) - s3_puts
    stored_gb = per_run["stored_bytes"] / 1e9
    kms = sum(v for k, v in calls.items() if k.startswith("kms:"))
    transitions = per_run["transitions"]
    lambdas = per_run["lambda_invocations"] + a["api_requests"] + per_run["sandbox_calls"]
    log_gb = (lambdas * a["lambda_log_bytes"] + per_run["log_bytes"]) / 1e9
    nat_gb = 2 * a["provider_download_mb"] / 1000
    items = {
        "fargate": fargate,
        "nat_data": nat_gb * p["nat_gb"],
        "kms": kms * p["kms_request"],
        "s3_requests": s3_puts * p["s3_put"] + s3_gets * p["s3_get"],
        "s3_storage_month": stored_gb * p["s3_gb_month"],
        "logs": log_gb * p["logs_ingest_gb"] + log_gb * p["logs_store_gb_month"] * 3,
        "api_gateway": (a["api_requests"] + per_run["sandbox_calls"]) * p["api_gateway_request"],
        "lambda": lambdas
        * (p["lambda_request"] + a["lambda_gb"] * a["lambda_s"] * p["lambda_gb_s_arm"]),
        "step_functions": transitions * p["sfn_transition"],
        "dynamodb": dynamodb,
    }
    items["total"] = sum(items.values())
    return {k: round(v, 6) for k, v in items.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resources", type=int, default=1)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    _count_requests()
    TIMELINE.install()
    engine = REPO / ".venv" / "engine" / "terraform"
    with tempfile.TemporaryDirectory(prefix="runplane-cost-") as data:
        (Path(data) / "config").mkdir()
        config = _configuration(Path(data) / "config", args.resources)
        stack = EmbeddedStack(Path(data) / "stack", port=0, engine=str(engine))
        credentials = stack.start()
        assert stack.services is not None
        settings = stack.services.settings
        STATUS.install(settings.table_name, settings.region)
        s3 = boto3.client("s3", region_name=settings.region, endpoint_url=settings.aws_endpoint_url)
        try:
            client = Client(Connection(credentials.url, credentials.token))
            workspace = client.create_workspace("cost")["id"]
            _one_run(client, workspace, config, "warmup", s3, stack)
            rows = [
                _one_run(client, workspace, config, f"v{i}", s3, stack) for i in range(args.runs)
            ]
        finally:
            stack.stop()
    requests: Counter[str] = Counter()
    for row in rows:
        requests.update(row["requests"])
    per_run: dict[str, Any] = {
        "resources": args.resources,
        "runs": len(rows),
        "median_wall_s": round(statistics.median(r["wall_s"] for r in rows), 2),
        "median_engine_s": round(statistics.median(r["engine_s"] for r in rows), 2),
        "requests": {k: round(v / len(rows), 1) for k, v in sorted(requests.items())},
        "stored_bytes": int(statistics.median(r["stored"]["all"] for r in rows)),
        # The run's log as shipped to S3; CloudWatch gets the runner's stdout, the same lines.
        "log_bytes": int(statistics.median(r["stored"]["logs"] for r in rows)),
        # Measured: the workflow's history, the gateway's sandbox calls.
        "transitions": statistics.mean(r["transitions"] for r in rows),
        "lambda_invocations": statistics.mean(r["lambda_invocations"] for r in rows),
        "sandbox_calls": statistics.mean(r["sandbox_calls"] for r in rows),
    }
    # Each sandbox's seconds: its share of the engine's, plus the runner's own ~0.2 s.
    engine_s = per_run["median_engine_s"]
    per_run["sandbox_s"] = [engine_s / 2 + 0.2, engine_s / 2 + 0.2]
    print(json.dumps(per_run, indent=1))
    for arm in (True, False):
        print(f"cost per run ({'ARM' if arm else 'x86'}): {json.dumps(price(per_run, arm))}")


if __name__ == "__main__":
    main()
