"""Cold import time of Runplane modules, each in a fresh interpreter.

    python -m benchmarks.cold_import [--runs N] [--bytecode] [--handlers-only]
                                     [--compare-with TREE]

Reports the median wall time of ``python -c "import X"`` minus that of a bare
``python -c pass`` measured in the same run, and which SDKs each import loads.

Without ``--bytecode`` each module loads as the environment has it: where no
``__pycache__`` is written (``PYTHONDONTWRITEBYTECODE``), our modules compile from
source at every start, as in a Lambda (its code is read-only and ships no bytecode),
while installed dependencies use the bytecode pip compiled. ``--bytecode`` gives
every module bytecode (a cache directory of its own, filled by one unmeasured run
of each measurement), so ours and the dependencies' compare like for like.
``--compare-with TREE`` also measures each handler from another checkout of this
repository (e.g. ``git archive`` of an earlier commit), in the same interleaved
rounds, so before and after share the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


# What a handler's first request loads on top of its import, short of any I/O: the
# APIs resolve a real request (its Router and service built, then refused for want of a
# caller), the authorizer refuses a request without credentials, the task and dashboard
# handlers import the services they call. Import + this is the code a cold start pays
# for before its first reply.
def _api_request(method: str, path: str) -> str:
    event = {"httpMethod": method, "path": path, "headers": {}, "requestContext": {}}
    return f"handler({event!r}, None)"


FIRST_REQUEST = {
    "authorizer": "from functions.authorizer.handler import handler\n"
    "try: handler({'headers': {}, 'methodArn': 'arn'}, None)\nexcept Exception: pass",
    "run API": "from functions.api.app import handler; "
    + _api_request("GET", "/api/v1/workspaces/ws-1"),
    "Cloud API": "from functions.cloud_api.handler import handler; "
    + _api_request("GET", "/api/v2/state-versions/sv-1"),
    # The start step's service built, as start_runner builds it before its first read.
    "tasks": "from runplane.wiring import services; services().orchestration.start",
    "dashboard": "import runplane.wiring, runplane.services.web_sessions",
}
# What the first requests need configured to build their services (clients, no connection),
# and the deployed functions' environment where it changes what a cold start does.
CONFIGURED = {
    "RUNPLANE_TABLE_NAME": "cold-import",
    "RUNPLANE_ARTIFACT_BUCKET": "cold-import",
    "RUNPLANE_KMS_KEY_ID": "alias/cold-import",
    "RUNPLANE_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:000000000000:stateMachine:cold-import",
    "AWS_DEFAULT_REGION": "us-east-1",
    # As every deployed function has it (infra/constructs/functions.py).
    "PYDANTIC_DISABLE_PLUGINS": "__all__",
}
SDKS = ("boto3", "botocore", "pynamodb", "pydantic")


_ENV: dict[str, str] = {**os.environ, **CONFIGURED}


def _use_bytecode(cache: str) -> None:
    _ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    _ENV["PYTHONPYCACHEPREFIX"] = cache


def _median_seconds(code: str, runs: int) -> float:
    samples = []
    env = _ENV
    if "PYTHONPYCACHEPREFIX" in env:
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _in_tree(tree: str | None) -> tuple[dict[str, str], str | None]:
    """The environment and working directory that import our code from ``tree``."""
    if tree is None:
        return _ENV, None
    return {**_ENV, "PYTHONPATH": f"{tree}{os.pathsep}{tree}/layers"}, tree


def _interleaved_medians(
    codes: dict[str, str], runs: int, trees: dict[str, str | None] | None = None
) -> dict[str, float]:
    """Median seconds of each code, run in rounds of one of each: a shared machine's
    load drifts, and a drift then weighs on every figure of a round alike. ``trees``
    gives a code another checkout to import our code from."""
    trees = trees or {}
    samples: dict[str, list[float]] = {name: [] for name in codes}

    def run(name: str) -> None:
        env, cwd = _in_tree(trees.get(name))
        subprocess.run([sys.executable, "-c", codes[name]], check=True, env=env, cwd=cwd)

    if "PYTHONPYCACHEPREFIX" in _ENV:
        for name in codes:
            run(name)
    for _ in range(runs):
        for name in codes:
            start = time.perf_counter()
            run(name)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(taken) for name, taken in samples.items()}


# Prints the installed (third-party) modules a handler's first request loaded, in the
# order they finished loading.
_LOADED = (
    "import sys\n{code}\n"
    "site = [n for n, m in list(sys.modules.items())"
    " if 'site-packages' in (getattr(m, '__file__', None) or '')]\n"
    "print(','.join(site))"
)


def _loaded_dependencies(code: str) -> str:
    """Code importing exactly the installed modules ``code`` loads, and none of ours:
    what the handler's own dependencies cost, with no part of ours. A module that will
    not import alone (loaded by its package in a way of its own) is skipped."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED.format(code=code)],
        check=True,
        capture_output=True,
        text=True,
        env=_ENV,
    )
    modules = [name for name in out.stdout.strip().splitlines()[-1].split(",") if name]
    return (
        "import importlib\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        pass"
    )


def _sdks_loaded(modules: str) -> list[str]:
    loaded = f"{{m.split('.')[0] for m in sys.modules}} & set({SDKS!r})"
    code = f"import sys, {modules}; print(','.join(sorted({loaded})))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return [name for name in out.stdout.strip().split(",") if name]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--bytecode", action="store_true", help="every module from bytecode")
    parser.add_argument("--handlers-only", action="store_true", help="skip the module table")
    parser.add_argument("--compare-with", metavar="TREE", help="another checkout to measure too")
    parser.add_argument(
        "--loaded-dependencies",
        action="store_true",
        help="also compare each handler with the installed modules its first request loads",
    )
    args = parser.parse_args()
    if args.bytecode:
        _use_bytecode(tempfile.mkdtemp(prefix="cold-import-pyc-"))
    baseline = _median_seconds("pass", args.runs)
    results = {
        "baseline_interpreter_ms": round(baseline * 1000, 1),
        "runs": args.runs,
        "bytecode": args.bytecode,
    }
    print(f"{'import':<10} {'ms over bare python':>20}  SDKs loaded")
    for name, modules in {} if args.handlers_only else MODULES.items():
        extra = _median_seconds(f"import {modules}", args.runs) - baseline
        sdks = _sdks_loaded(modules)
        results[f"{name}_ms"] = round(extra * 1000, 1)
        results[f"{name}_sdks"] = sdks
        print(f"{name:<10} {extra * 1000:>20.1f}  {', '.join(sdks) or '-'}")
    codes = {"bare": "pass", "deps": f"import {DEPENDENCIES}"}
    trees: dict[str, str | None] = {}
    for name, module in HANDLERS.items():
        codes[f"{name}/import"] = f"import {module}"
        codes[f"{name}/first"] = f"import {module}\n{FIRST_REQUEST[name]}"
        if args.loaded_dependencies:
            codes[f"{name}/loaded"] = _loaded_dependencies(codes[f"{name}/first"])
        if args.compare_with:
            codes[f"{name}/other"] = codes[f"{name}/first"]
            trees[f"{name}/other"] = os.path.abspath(args.compare_with)
    medians = _interleaved_medians(codes, args.runs, trees)
    bare = medians["bare"]
    dependencies = medians["deps"] - bare
    results["dependencies_ms"] = round(dependencies * 1000, 1)
    print(
        f"\n{'handler':<11} {'import ms':>10} {'x deps':>7} {'+ 1st request ms':>17} {'x deps':>7}"
    )
    print(f"{'(deps)':<11} {dependencies * 1000:>10.1f} {1.0:>7.2f}")
    for name in HANDLERS:
        extra = medians[f"{name}/import"] - bare
        first = medians[f"{name}/first"] - bare
        key = f"handler_{name.replace(' ', '_').lower()}"
        results[f"{key}_ms"] = round(extra * 1000, 1)
        results[f"{key}_first_request_ms"] = round(first * 1000, 1)
        results[f"{key}_first_request_x"] = round(first / dependencies, 2)
        print(
            f"{name:<11} {extra * 1000:>10.1f} {extra / dependencies:>7.2f}"
            f" {first * 1000:>17.1f} {first / dependencies:>7.2f}"
        )
        if args.loaded_dependencies:
            loaded = medians[f"{name}/loaded"] - bare
            results[f"{key}_loaded_dependencies_ms"] = round(loaded * 1000, 1)
            results[f"{key}_first_request_x_loaded"] = round(first / loaded, 2)
            print(f"{'  loaded deps':<11} {loaded * 1000:>10.1f} {first / loaded:>7.2f} x")
        if args.compare_with:
            other = medians[f"{name}/other"] - bare
            results[f"{key}_other_first_request_ms"] = round(other * 1000, 1)
            results[f"{key}_other_first_request_x"] = round(other / dependencies, 2)
            ratio = other / dependencies
            print(f"{'  other tree':<11} {'':>18} {other * 1000:>17.1f} {ratio:>7.2f}")
    print(f"bare interpreter: {baseline * 1000:.1f} ms")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
