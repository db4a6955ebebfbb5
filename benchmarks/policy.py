"""Policy evaluation: sanitizing a plan, digesting it and evaluating the baseline set.

    python -m benchmarks.policy [--sizes 10,100,1000,10000] [--repeat 5]

Builds synthetic ``show -json`` plans (format 0.2) of realistic AWS resources
(buckets, instances, IAM policies, databases, security groups, access blocks and
random passwords, with tags, sensitive attributes and values known after apply;
mostly creates, some updates, no-ops, deletes and replacements), sanitizes them,
and evaluates ``examples/policies/baseline`` (10 policies) with ``RegoEvaluator`` on
the default engine (``--engine regopy`` for rego-cpp). As in a run's policy stage, the
evaluator is given the run's ``PolicyInputs`` after the input digest was taken, so the
canonical JSON the digest covers is the text regorus loads (counted under "digest").

Per size: the sanitized input's size, sanitize and digest times (median), the first
evaluation in this process (cold) and the median of the following ones, in a forked
child (the default isolation), the CPU time that costs (this process and the child:
a figure the machine's other load barely changes), and in a thread; then where the
time goes inside one evaluation, in CPU time: loading the input into the engine,
compiling the modules, the queries.

Then two suites written the way third-party policies usually are (partial set rules,
``deny contains msg if {...}``), at ``--suite-sizes``: ``many-violations``, one
tagging policy reporting about two violations per resource change, and ``library-25``,
the baseline's ten policies plus fifteen such rules over common resource types.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from runplane.adapters import rego
from runplane.domain.policy import (
    PolicyDefinition,
    PolicyModule,
    PolicyOutcome,
    PolicySetContent,
    load_policy_set_dir,
)
from runplane.domain.policy_input import PolicyInputs, RunMetadata
from runplane.domain.policy_sanitize import canonical_json, input_digest, sanitize_plan

BASELINE = Path(__file__).resolve().parent.parent / "examples" / "policies" / "baseline"
AWS = "registry.terraform.io/hashicorp/aws"
TARGET_MS_AT_1000 = 50.0


def _tags(i: int) -> dict[str, str]:
    tags = {"owner": f"team-{i % 7}", "environment": ("prod", "staging", "dev")[i % 3]}
    if i % 13 == 0:
        del tags["environment"]  # a few resources miss a required tag
    tags["cost-center"] = f"cc-{i % 11:03d}"
    return tags


def _bucket(i: int) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    after = {
        "bucket": f"acme-data-{i:05d}",
        "acl": "public-read" if i % 97 == 0 else "private",
        "force_destroy": False,
        "tags": _tags(i),
        "versioning": [{"enabled": True, "mfa_delete": False}],
        "server_side_encryption_configuration": [
            {"rule": [{"apply_server_side_encryption_by_default": [{"sse_algorithm": "aws:kms"}]}]}
        ],
        "lifecycle_rule": [],
        "object_lock_enabled": False,
    }
    unknown = {
        "arn": True,
        "id": True,
        "bucket_domain_name": True,
        "bucket_regional_domain_name": True,
        "hosted_zone_id": True,
        "region": True,
        "tags_all": True,
        "versioning": [{}],
    }
    return "aws_s3_bucket", after, unknown, {}


def _instance(i: int) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    after = {
        "ami": "ami-0c55b159cbfafe1f0",
        "instance_type": "c5.24xlarge" if i % 89 == 0 else "t3.small",
        "monitoring": True,
        "ebs_optimized": True,
        "user_data": f"#!/bin/sh\necho node-{i}\n",
        "tags": _tags(i),
        "root_block_device": [{"volume_size": 20, "volume_type": "gp3", "encrypted": True}],
        "metadata_options": [{"http_tokens": "required", "http_endpoint": "enabled"}],
        "credit_specification": [],
    }
    unknown = {
        "arn": True,
        "id": True,
        "subnet_id": True,
        "private_ip": True,
        "public_ip": True,
        "vpc_security_group_ids": True,
        "availability_zone": True,
        "tags_all": True,
        "root_block_device": [{"device_name": True, "iops": True, "volume_id": True}],
    }
    return "aws_instance", after, unknown, {}


def _iam_policy(i: int) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    action: Any = "*" if i % 101 == 0 else ["s3:GetObject", "s3:PutObject"]
    document = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": action,
                "Resource": [f"arn:aws:s3:::acme-data-{i:05d}/*"],
            }
        ],
    }
    after = {
        "name": f"acme-access-{i:05d}",
        "path": "/",
        "description": "Read and write one data bucket",
        "policy": json.dumps(document),
        "tags": _tags(i),
    }
    return "aws_iam_policy", after, {"arn": True, "id": True, "policy_id": True}, {}


def _database(i: int) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    after = {
        "identifier": f"acme-db-{i:05d}",
        "engine": "postgres",
        "engine_version": "16.3",
        "instance_class": "db.t4g.medium",
        "allocated_storage": 100,
        "storage_encrypted": i % 83 != 0,
        "username": "app",
        "password": f"db-password-{i}",
        "backup_retention_period": 7,
        "multi_az": True,
        "tags": _tags(i),
    }
    unknown = {"arn": True, "id": True, "address": True, "endpoint": True, "port": True}
    return "aws_db_instance", after, unknown, {"password": True}


def _security_group(i: int) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    rule = {
        "from_port": 443,
        "to_port": 443,
        "protocol": "tcp",
        "cidr_blocks": ["10.0.0.0/8"],
        "ipv6_cidr_blocks": [],
        "description": "https from the VPC",
        "self": False,
        "security_groups": [],
        "prefix_list_ids": [],
    }
    after = {
        "name": f"acme-web-{i:05d}",
        "description": "web tier",
        "ingress": [rule],
        "egress": [dict(rule, from_port=0, to_port=0, protocol="-1", cidr_blocks=["0.0.0.0/0"])],
        "revoke_rules_on_delete": False,
        "tags": _tags(i),
    }
    return "aws_security_group", after, {"arn": True, "id": True, "vpc_id": True}, {}


def _access_block(i: int) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    after = {
        "block_public_acls": True,
        "block_public_policy": True,
        "ignore_public_acls": True,
        "restrict_public_buckets": i % 79 != 0,
    }
    return "aws_s3_bucket_public_access_block", after, {"id": True, "bucket": True}, {}


def _password(i: int) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    after = {"length": 32, "special": True, "upper": True, "lower": True, "numeric": True}
    return "random_password", after, {"id": True, "result": True, "bcrypt_hash": True}, {}


KINDS = [_bucket, _instance, _iam_policy, _database, _security_group, _access_block, _password]


def synthetic_plan(size: int) -> dict[str, Any]:
    """A ``show -json`` plan with ``size`` resource changes."""
    changes = []
    for i in range(size):
        resource_type, after, unknown, sensitive = KINDS[i % len(KINDS)](i)
        name = f"r{i:05d}"
        provider = (
            "registry.terraform.io/hashicorp/random" if resource_type == "random_password" else AWS
        )
        if i % 211 == 0:
            actions, before = ["delete"], dict(after)
            after, unknown, after_sensitive = None, False, False
        elif i % 149 == 0:
            actions, before = ["delete", "create"], dict(after)
            after_sensitive = sensitive
        elif i % 5 == 0:
            actions, before = ["update"], dict(after, description="previous")
            unknown = {k: v for k, v in unknown.items() if k in ("tags_all",)}
            after_sensitive = sensitive
        elif i % 7 == 0:
            actions, before, unknown = ["no-op"], dict(after), {}
            after_sensitive = sensitive
        else:
            actions, before = ["create"], None
            after_sensitive = sensitive
        changes.append(
            {
                "address": f"{resource_type}.{name}",
                "mode": "managed",
                "type": resource_type,
                "name": name,
                "provider_name": provider,
                "change": {
                    "actions": actions,
                    "before": before,
                    "after": after,
                    "after_unknown": unknown,
                    "before_sensitive": False if before is None else sensitive,
                    "after_sensitive": after_sensitive,
                },
            }
        )
    return {
        "format_version": "0.2",
        "terraform_version": "1.0.3",
        "variables": {"db_password": {"value": "from-a-variable"}},
        "planned_values": {"root_module": {}},
        "resource_changes": changes,
        "output_changes": {
            "bucket_names": {
                "actions": ["create"],
                "before": None,
                "after": [f"acme-data-{i:05d}" for i in range(0, min(size, 50), 7)],
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": False,
            },
            "db_password": {
                "actions": ["create"],
                "before": None,
                "after": "hunter2",
                "after_unknown": False,
                "before_sensitive": True,
                "after_sensitive": True,
            },
        },
        "prior_state": {"values": {"root_module": {}}},
        "configuration": {"root_module": {}},
    }


MANY_VIOLATIONS = """# Every taggable change carries four tags; one violation per missing tag.
package bench.tagging

import rego.v1

required := ["owner", "environment", "cost-center", "project"]

deny contains msg if {
\tsome rc in input.resource_changes
\tsome action in rc.actions
\taction in {"create", "update"}
\tsome tag in required
\tnot rc.after.tags[tag]
\tmsg := sprintf("%s is missing the %s tag", [rc.address, tag])
}
"""

# (resource type, condition on rc.after, what the message says) for the library's
# fifteen extra rules; each reads like a typical third-party check.
_LIBRARY_CHECKS = [
    ("aws_s3_bucket", "rc.after.force_destroy == true", "may be force-destroyed"),
    ("aws_s3_bucket", "not rc.after.tags.owner", "has no owner tag"),
    ("aws_s3_bucket", 'not startswith(rc.after.bucket, "acme-")', "is not named acme-*"),
    ("aws_instance", "rc.after.monitoring == false", "has monitoring off"),
    ("aws_instance", "rc.after.ebs_optimized == false", "is not EBS-optimized"),
    ("aws_instance", 'not rc.after.tags["cost-center"]', "has no cost-center tag"),
    ("aws_db_instance", "rc.after.backup_retention_period < 7", "keeps backups < 7 days"),
    ("aws_db_instance", "rc.after.multi_az == false", "is single-AZ"),
    ("aws_db_instance", 'rc.after.engine != "postgres"', "is not PostgreSQL"),
    ("aws_security_group", 'contains(rc.after.description, "temp")', "looks temporary"),
    ("aws_security_group", "count(rc.after.ingress) > 10", "has too many ingress rules"),
    ("aws_iam_policy", 'rc.after.path != "/"', "is not at the root path"),
    ("aws_iam_policy", "not rc.after.description", "has no description"),
    ("random_password", "rc.after.length < 16", "is shorter than 16"),
    ("aws_s3_bucket", "not rc.after.tags.project", "has no project tag"),
]


def many_violations_set() -> PolicySetContent:
    return PolicySetContent(
        name="many-violations",
        modules=(PolicyModule("tagging.rego", MANY_VIOLATIONS),),
        policies=(
            PolicyDefinition("tagging", "advisory", "data.bench.tagging.deny"),  # type: ignore[arg-type]
        ),
    )


def library_set(baseline: PolicySetContent) -> PolicySetContent:
    """The baseline's ten policies and fifteen partial set rules: 25 policies."""
    modules = list(baseline.modules)
    policies = list(baseline.policies)
    for k, (resource_type, condition, says) in enumerate(_LIBRARY_CHECKS):
        source = (
            f"package bench.library_{k}\n\nimport rego.v1\n\n"
            "deny contains msg if {\n"
            "\tsome rc in input.resource_changes\n"
            f'\trc.type == "{resource_type}"\n'
            '\tsome action in rc.actions\n\taction in {"create", "update"}\n'
            f"\t{condition}\n"
            f'\tmsg := sprintf("%s {says}", [rc.address])\n'
            "}\n"
        )
        modules.append(PolicyModule(f"library_{k}.rego", source))
        policies.append(
            PolicyDefinition(f"library_{k}", "advisory", f"data.bench.library_{k}.deny")  # type: ignore[arg-type]
        )
    return PolicySetContent("library-25", tuple(modules), tuple(policies))


def _suites(
    sizes: list[int], repeat: int, baseline: PolicySetContent, engine: str
) -> list[dict[str, Any]]:
    """Evaluate the many-violation and 25-policy suites; one row per suite and size."""
    evaluators = {
        "process": rego.RegoEvaluator(isolation="process", engine=engine),
        "thread": rego.RegoEvaluator(isolation="thread", engine=engine),
    }
    print(
        f"{'suite':<16} {'changes':>8} {'policies':>8} {'violations':>10} "
        f"{'process':>9} {'cpu':>9} {'thread':>9}  within 10 s"
    )
    rows = []
    for content in (many_violations_set(), library_set(baseline)):
        for size in sizes:
            policy_input = _inputs(synthetic_plan(size))
            medians = {}
            results: Any = []
            for name, evaluator in evaluators.items():

                def evaluate(
                    evaluator: Any = evaluator,
                    policy_input: Any = policy_input,
                    content: PolicySetContent = content,
                ) -> Any:
                    return evaluator.evaluate([content], policy_input, timeout_seconds=300.0)

                _, rest = _timed(evaluate, repeat)
                medians[name] = _ms(statistics.median(rest))
                if name == "process":
                    medians["cpu"] = _ms(_cpu(evaluate, repeat))
                results = evaluate()
            errored = [r.messages for r in results if r.outcome == PolicyOutcome.ERRORED]
            if errored:
                raise SystemExit(f"{content.name} errored at {size} changes: {errored}")
            violations = sum(len(r.messages) + r.omitted for r in results)
            row = {
                "suite": content.name,
                "changes": size,
                "policies": len(content.policies),
                "violations": violations,
                "evaluate_process_ms": medians["process"],
                "evaluate_process_cpu_ms": medians["cpu"],
                "evaluate_thread_ms": medians["thread"],
                "within_deadline": medians["process"] < 10_000,
                "repeat": repeat,
            }
            rows.append(row)
            print(
                f"{content.name:<16} {size:>8} {row['policies']:>8} {violations:>10} "
                f"{medians['process']:>9} {medians['cpu']:>9} {medians['thread']:>9}  "
                f"{'yes' if row['within_deadline'] else 'NO'}"
            )
    return rows


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _cpu(fn: Any, repeat: int) -> float:
    """Median CPU seconds (this process and its reaped children, user and system) of
    ``fn``: what an evaluation costs a CPU of its own, whatever else the machine runs."""
    samples = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.process_time()
        fn()
        used = time.process_time() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        samples.append(used)
    return statistics.median(samples)


def _timed(fn: Any, repeat: int) -> tuple[float, list[float]]:
    """(first run, following runs) in seconds."""
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples[0], samples[1:]


def _inputs(plan: dict[str, Any]) -> PolicyInputs:
    """The run's inputs as the policy stage holds them: digest taken, then evaluated."""
    inputs = PolicyInputs(plan, RunMetadata("ws-bench", "plan_and_apply", "1.0.3"))
    inputs.digest("runplane")
    return inputs


def _breakdown(content: Any, policy_input: dict[str, Any], engine: str) -> dict[str, float]:
    """Where one in-process evaluation spends its time (CPU time of this process)."""
    if engine == "regorus":
        from runplane.adapters import rego_rs

        text = canonical_json(policy_input).decode("utf-8")
        start = time.process_time()
        base = rego_rs._engine()
        base.set_input_json(text)
        built = time.process_time()
        compiled = base.clone()
        rego_rs._add(compiled, content.modules)
        loaded = time.process_time()
        for policy in content.policies:
            rego_rs._evaluate_policy(compiled, policy, rego.MAX_MESSAGES)
        done = time.process_time()
    else:
        from runplane.adapters import rego_cpp

        start = time.process_time()
        handle = rego_cpp._input_handle(policy_input)
        built = time.process_time()
        cpp = rego_cpp._Compiled(content)
        cpp.set_input(handle)
        loaded = time.process_time()
        for policy in content.policies:
            rego_cpp._evaluate_policy(cpp, policy, rego.MAX_MESSAGES)
        done = time.process_time()
        rego_cpp._c.rego_free_input(handle)
    return {
        "build_input_ms": _ms(built - start),
        "compile_and_set_input_ms": _ms(loaded - built),
        "queries_ms": _ms(done - loaded),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--suite-sizes", default="1000,5000")
    parser.add_argument("--engine", default=None, help="regorus or regopy (default: as deployed)")
    args = parser.parse_args()
    engine = rego.engine_name(args.engine)
    print(f"engine: {rego.engine(engine).identity()}")
    sizes = [int(size) for size in args.sizes.split(",")]
    content = load_policy_set_dir(BASELINE)
    evaluators = {
        "process": rego.RegoEvaluator(isolation="process", engine=engine),
        "thread": rego.RegoEvaluator(isolation="thread", engine=engine),
    }
    rows = []
    header = (
        f"{'changes':>8} {'input KB':>9} {'sanitize':>9} {'digest':>7} "
        f"{'cold':>8} {'process':>8} {'cpu':>7} {'thread':>8} {'load in':>8} {'compile':>8} "
        f"{'queries':>8}  outcomes"
    )
    print(header)
    for size in sizes:
        plan = synthetic_plan(size)
        repeat = args.repeat if size < 10_000 else max(1, min(args.repeat, 3))

        def sanitize(plan: dict[str, Any] = plan) -> dict[str, Any]:
            return sanitize_plan(
                plan, workspace="ws-bench", run_kind="plan_and_apply", engine_version="1.0.3"
            )

        policy_input = sanitize()
        _, sanitize_s = _timed(sanitize, repeat)
        _, digest_s = _timed(lambda policy_input=policy_input: input_digest(policy_input), repeat)
        timings: dict[str, list[float]] = {}
        cold = cpu = 0.0
        outcomes: dict[str, int] = {}
        for name, evaluator in evaluators.items():
            inputs = _inputs(plan)

            def evaluate(evaluator: Any = evaluator, inputs: Any = inputs) -> Any:
                return evaluator.evaluate([content], inputs, timeout_seconds=120.0)

            first, rest = _timed(evaluate, repeat)
            if name == "process":
                cold = first
                cpu = _cpu(evaluate, repeat)
            timings[name] = rest
            results = evaluate()
            outcomes = {}
            for result in results:
                outcomes[str(result.outcome)] = outcomes.get(str(result.outcome), 0) + 1
            if any(r.outcome == PolicyOutcome.ERRORED for r in results):
                errors = [r.messages for r in results if r.outcome == PolicyOutcome.ERRORED]
                raise SystemExit(f"a policy errored at {size} changes: {errors}")
        breakdown = _breakdown(content, policy_input, engine)
        row = {
            "changes": size,
            "input_kb": round(len(canonical_json(policy_input)) / 1024, 1),
            "sanitize_ms": _ms(statistics.median(sanitize_s)),
            "digest_ms": _ms(statistics.median(digest_s)),
            "evaluate_cold_ms": _ms(cold),
            "evaluate_process_ms": _ms(statistics.median(timings["process"])),
            "evaluate_process_cpu_ms": _ms(cpu),
            "evaluate_thread_ms": _ms(statistics.median(timings["thread"])),
            **breakdown,
            "outcomes": outcomes,
            "repeat": repeat,
        }
        rows.append(row)
        print(
            f"{size:>8} {row['input_kb']:>9} {row['sanitize_ms']:>9} {row['digest_ms']:>7} "
            f"{row['evaluate_cold_ms']:>8} {row['evaluate_process_ms']:>8} "
            f"{row['evaluate_process_cpu_ms']:>7} {row['evaluate_thread_ms']:>8} "
            f"{row['build_input_ms']:>8} "
            f"{row['compile_and_set_input_ms']:>8} {row['queries_ms']:>8}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        )
    at_1000 = next((r for r in rows if r["changes"] == 1000), None)
    summary: dict[str, Any] = {
        "engine": rego.engine(engine).identity(),
        "policies": len(content.policies),
        "rows": rows,
    }
    if at_1000 is not None:
        met = at_1000["evaluate_process_ms"] < TARGET_MS_AT_1000
        summary["target_ms_at_1000"] = TARGET_MS_AT_1000
        summary["target_met"] = met
        print(
            f"target: evaluate 1,000 changes in under {TARGET_MS_AT_1000:g} ms: "
            f"{'met' if met else 'not met'} ({at_1000['evaluate_process_ms']} ms; "
            f"{at_1000['evaluate_process_cpu_ms']} ms of CPU)"
        )
    suite_sizes = [int(size) for size in args.suite_sizes.split(",") if size]
    summary["suites"] = _suites(suite_sizes, max(1, min(args.repeat, 3)), content, engine)
    print(f"active threads: {threading.active_count()}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
