"""Rego engines side by side: the production evaluator and any ``regorus`` build.

    python -m benchmarks.policy_engines [--sizes 1000,5000] [--repeat 3]

``regorus`` (Microsoft's Rust Rego engine) is not on the package index under its own
name; republished builds are (``gordon-to-regorus``, ``celine-regorus``). To measure
one without adding it to the project, install it into a directory of its own and put
that on ``PYTHONPATH``::

    pip install --no-deps --target /tmp/regorus-candidate gordon-to-regorus
    PYTHONPATH=/tmp/regorus-candidate python -m benchmarks.policy_engines

Both engines evaluate the same sanitized inputs and the same suites as
``benchmarks.policy`` (the baseline set, the many-violation policy and the 25-policy
library), in this process, each evaluation from scratch: load the input, compile the
modules, run every query. Then a few compatibility probes with known rego-cpp 1.5.2
problems. Results must agree (the same violation messages) or the run stops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.policy import BASELINE, library_set, many_violations_set, synthetic_plan
from runplane.adapters import rego
from runplane.domain.policy import (
    PolicyDefinition,
    PolicyModule,
    PolicySetContent,
    load_policy_set_dir,
    sanitize_plan,
)

Engine = Callable[[PolicySetContent, dict[str, Any]], dict[str, list[str]]]


def _regopy(content: PolicySetContent, policy_input: dict[str, Any]) -> dict[str, list[str]]:
    evaluator = rego.RegoEvaluator(isolation="thread", max_messages=100_000)
    results = evaluator.evaluate([content], policy_input, timeout_seconds=600.0)
    return {r.policy: sorted(r.messages) for r in results}


def _regorus_engine() -> Engine | None:
    try:
        import regorus  # type: ignore[import-not-found]
    except ImportError:
        return None

    def evaluate(content: PolicySetContent, policy_input: dict[str, Any]) -> dict[str, list[str]]:
        engine = regorus.Engine()
        for module in content.modules:
            engine.add_policy(module.name, module.source)
        engine.set_input_json(json.dumps(policy_input))
        out = {}
        for policy in content.policies:
            value = engine.eval_rule(policy.query)
            out[policy.name] = sorted(
                v if isinstance(v, str) else json.dumps(v, sort_keys=True) for v in value or []
            )
        return out

    return evaluate


PROBES = {
    "sprintf %q": ('x := sprintf("%q", ["a"])', '"\\"a\\""'),
    "f(x[_])": ("f(v) := v\nx := [y | y := f([1, 2][_])]", "[1, 2]"),
    "contains as a name": ("x := [contains | contains := 1]", "[1]"),
    "x[_] in {...}": ('x := [v | v := ["a", "b"][_]; v in {"a"}]', '["a"]'),
}


def _probe(source: str, engine_name: str) -> str:
    module = f"package probe\n\nimport rego.v1\n\n{source}\n"
    if engine_name == "regopy":
        content = PolicySetContent(
            "probe",
            (PolicyModule("probe.rego", module),),
            (PolicyDefinition("x", "advisory", "data.probe.x"),),  # type: ignore[arg-type]
        )
        records, failure = rego._run(
            lambda stop, emit: emit(
                {"i": 0, "v": rego._query(rego._load(content), "data.probe.x")}
            ),
            10.0,
            "process",
        )
        if failure is not None:
            return failure.reason
        return json.dumps(records[0]["v"]) if 0 in records else "no result"
    import regorus

    engine = regorus.Engine()
    try:
        engine.add_policy("probe.rego", module)
        return json.dumps(engine.eval_rule("data.probe.x"))
    except Exception as error:  # a refusal is the finding
        return f"error: {str(error).splitlines()[0][:80]}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engines: dict[str, Engine] = {"regopy": _regopy}
    candidate = _regorus_engine()
    if candidate is not None:
        engines["regorus"] = candidate
    baseline = load_policy_set_dir(BASELINE)
    suites = [baseline, many_violations_set(), library_set(baseline)]
    print(f"{'suite':<16} {'changes':>8} " + " ".join(f"{name:>10}" for name in engines))
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        policy_input = sanitize_plan(
            synthetic_plan(size), workspace="ws-bench", run_kind="plan_and_apply", engine_version=""
        )
        for content in suites:
            timings: dict[str, float] = {}
            answers = {}
            for name, engine in engines.items():
                samples = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    answers[name] = engine(content, policy_input)
                    samples.append(time.perf_counter() - start)
                timings[name] = round(statistics.median(samples) * 1000, 1)
            if len({json.dumps(a, sort_keys=True) for a in answers.values()}) > 1:
                raise SystemExit(f"the engines disagree on {content.name} at {size} changes")
            rows.append({"suite": content.name, "changes": size, "ms": timings})
            print(
                f"{content.name:<16} {size:>8} "
                + " ".join(f"{timings[name]:>10}" for name in engines)
            )
    probes = {
        label: {name: _probe(source, name) for name in engines}
        for label, (source, _) in PROBES.items()
    }
    for label, (_, expected) in PROBES.items():
        print(
            f"probe {label:<20} expected {expected:<10} "
            + "  ".join(f"{name}: {answer}" for name, answer in probes[label].items())
        )
    print(json.dumps({"engines": list(engines), "rows": rows, "probes": probes}))


if __name__ == "__main__":
    main()
