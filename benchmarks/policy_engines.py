"""Rego engines side by side: regorus and regopy, the two the evaluator can run on.

    python -m benchmarks.policy_engines [--sizes 1000,5000] [--repeat 3]

Both engines evaluate the same sanitized inputs and the same suites as
``benchmarks.policy`` (the baseline set, the many-violation policy and the 25-policy
library) through ``RegoEvaluator`` in a thread of this process (no fork), each
evaluation from scratch: load the input, compile the modules, run every query. Then a
few compatibility probes with known rego-cpp 1.5.2 problems. Results must agree (the
same violation messages) or the run stops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from benchmarks.policy import BASELINE, library_set, many_violations_set, synthetic_plan
from runplane.adapters.rego import RegoEvaluator
from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicySetContent,
    load_policy_set_dir,
)
from runplane.domain.policy_sanitize import sanitize_plan

ENGINES = ("regopy", "regorus")


def _evaluate(engine: str, content: PolicySetContent, policy_input: Any) -> dict[str, list[str]]:
    evaluator = RegoEvaluator(isolation="thread", max_messages=100_000, engine=engine)
    results = evaluator.evaluate([content], policy_input, timeout_seconds=600.0)
    return {r.policy: sorted(r.messages) for r in results}


PROBES = {
    "sprintf %q": ('x := [sprintf("%q", ["a"])]', '["\\"a\\""]'),
    "f(x[_])": ("f(v) := v\nx := [y | y := f([1, 2][_])]", '["1", "2"]'),
    "contains as a name": ("x := [contains | contains := 1]", '["1"]'),
    "x[_] in {...}": ('x := [v | v := ["a", "b"][_]; v in {"a"}]', '["a"]'),
}


def _probe(source: str, engine: str) -> str:
    """The probe's messages as JSON, or why it did not evaluate, through the evaluator
    (with the rego-cpp workarounds it applies for regopy)."""
    module = f"package probe\n\nimport rego.v1\n\n{source}\n"
    content = PolicySetContent(
        "probe",
        (PolicyModule("probe.rego", module),),
        (PolicyDefinition("x", Enforcement.ADVISORY, "data.probe.x"),),
    )
    [result] = RegoEvaluator(isolation="process", engine=engine).evaluate([content], {})
    if str(result.outcome) == "errored":
        return f"error: {result.messages[0][:80]}"
    return json.dumps(sorted(result.messages))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engines = ENGINES
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
            for name in engines:
                samples = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    answers[name] = _evaluate(name, content, policy_input)
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
