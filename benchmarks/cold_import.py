"""Cold import time of Runplane modules, each in a fresh interpreter.

    python -m benchmarks.cold_import [--runs N]

Reports the median wall time of ``python -c "import X"`` minus that of a bare
``python -c pass`` measured in the same run, and which SDKs each import loads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

MODULES = {
    "domain": "runplane.domain.transitions, runplane.domain.entities, runplane.domain.errors",
    "store": "runplane.store.runs, runplane.store.workspaces",
    "services": "runplane.services.lifecycle",
}
# What a Lambda handler imports, against the bare import of the libraries it is built
# on: the difference is our own code's import cost at a cold start.
DEPENDENCIES = (
    "boto3, pynamodb.models, pydantic, aws_lambda_powertools.event_handler, "
    "cryptography.hazmat.primitives.ciphers.aead"
)
HANDLERS = {
    "authorizer": "functions.authorizer.handler",
    "run API": "functions.api.app",
    "Cloud API": "functions.cloud_api.handler",
    "tasks": "functions.tasks.handlers",
    "dashboard": "functions.dashboard.app",
}
# What a handler's first request loads on top of its import (routes, request models,
# the services it names), short of any I/O: import + this is the code a cold start
# pays for before its first reply.
FIRST_REQUEST = {
    "authorizer": "import runplane.services.identity, runplane.wiring",
    "run API": "functions.api.app.build_app()",
    "Cloud API": "import functions.cloud_api.app as a; a.build_app()",
    "tasks": "import runplane.wiring, runplane.services.orchestration",
    "dashboard": "import runplane.wiring, runplane.services.web_sessions",
}
SDKS = ("boto3", "botocore", "pynamodb", "pydantic")


def _median_seconds(code: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _sdks_loaded(modules: str) -> list[str]:
    loaded = f"{{m.split('.')[0] for m in sys.modules}} & set({SDKS!r})"
    code = f"import sys, {modules}; print(','.join(sorted({loaded})))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return [name for name in out.stdout.strip().split(",") if name]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    baseline = _median_seconds("pass", args.runs)
    results = {"baseline_interpreter_ms": round(baseline * 1000, 1), "runs": args.runs}
    print(f"{'import':<10} {'ms over bare python':>20}  SDKs loaded")
    for name, modules in MODULES.items():
        extra = _median_seconds(f"import {modules}", args.runs) - baseline
        sdks = _sdks_loaded(modules)
        results[f"{name}_ms"] = round(extra * 1000, 1)
        results[f"{name}_sdks"] = sdks
        print(f"{name:<10} {extra * 1000:>20.1f}  {', '.join(sdks) or '-'}")
    dependencies = _median_seconds(f"import {DEPENDENCIES}", args.runs) - baseline
    results["dependencies_ms"] = round(dependencies * 1000, 1)
    print(
        f"\n{'handler':<11} {'import ms':>10} {'x deps':>7} {'+ 1st request ms':>17} {'x deps':>7}"
    )
    print(f"{'(deps)':<11} {dependencies * 1000:>10.1f} {1.0:>7.2f}")
    for name, module in HANDLERS.items():
        extra = _median_seconds(f"import {module}", args.runs) - baseline
        first = _median_seconds(f"import {module}; {FIRST_REQUEST[name]}", args.runs) - baseline
        key = f"handler_{name.replace(' ', '_').lower()}"
        results[f"{key}_ms"] = round(extra * 1000, 1)
        results[f"{key}_first_request_ms"] = round(first * 1000, 1)
        print(
            f"{name:<11} {extra * 1000:>10.1f} {extra / dependencies:>7.2f}"
            f" {first * 1000:>17.1f} {first / dependencies:>7.2f}"
        )
    print(f"bare interpreter: {baseline * 1000:.1f} ms")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
