"""Policy evaluation: sanitizing a plan, digesting it and evaluating the baseline set.

    python -m benchmarks.policy [--sizes 10,100,1000,10000] [--repeat 5]

Builds synthetic ``show -json`` plans (format 0.2) of realistic AWS resources
(buckets, instances, IAM policies, databases, security groups, access blocks and
random passwords, with tags, sensitive attributes and values known after apply;
mostly creates, some updates, no-ops, deletes and replacements), sanitizes them,
and evaluates ``examples/policies/baseline`` (10 policies) with ``RegoEvaluator``.

Per size: the sanitized input's size, sanitize and digest times (median), the first
evaluation in this process (cold) and the median of the following ones, in a forked
child (the default isolation) and in a thread; then where the time goes inside one
evaluation: loading the input into rego-cpp, compiling the modules, the queries.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from runplane.adapters import rego
from runplane.domain.policy import (
    PolicyOutcome,
    canonical_json,
    input_digest,
    load_policy_set_dir,
    sanitize_plan,
)

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


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _timed(fn: Any, repeat: int) -> tuple[float, list[float]]:
    """(first run, following runs) in seconds."""
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples[0], samples[1:]


def _breakdown(content: Any, policy_input: dict[str, Any]) -> dict[str, float]:
    """Where one in-process evaluation spends its time."""
    start = time.perf_counter()
    handle = rego._input_handle(policy_input)
    built = time.perf_counter()
    compiled = rego._Compiled(content)
    compiled.set_input(handle)
    loaded = time.perf_counter()
    for policy in content.policies:
        rego._evaluate_policy(compiled, policy, rego.MAX_MESSAGES)
    done = time.perf_counter()
    rego._c.rego_free_input(handle)
    return {
        "build_input_ms": _ms(built - start),
        "compile_and_set_input_ms": _ms(loaded - built),
        "queries_ms": _ms(done - loaded),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    content = load_policy_set_dir(BASELINE)
    evaluators = {
        "process": rego.RegoEvaluator(isolation="process"),
        "thread": rego.RegoEvaluator(isolation="thread"),
    }
    rows = []
    header = (
        f"{'changes':>8} {'input KB':>9} {'sanitize':>9} {'digest':>7} "
        f"{'cold':>8} {'process':>8} {'thread':>8} {'load in':>8} {'compile':>8} "
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
        cold = 0.0
        outcomes: dict[str, int] = {}
        for name, evaluator in evaluators.items():

            def evaluate(evaluator: Any = evaluator, policy_input: Any = policy_input) -> Any:
                return evaluator.evaluate([content], policy_input, timeout_seconds=120.0)

            first, rest = _timed(evaluate, repeat)
            if name == "process":
                cold = first
            timings[name] = rest
            results = evaluate()
            outcomes = {}
            for result in results:
                outcomes[str(result.outcome)] = outcomes.get(str(result.outcome), 0) + 1
            if any(r.outcome == PolicyOutcome.ERRORED for r in results):
                errors = [r.messages for r in results if r.outcome == PolicyOutcome.ERRORED]
                raise SystemExit(f"a policy errored at {size} changes: {errors}")
        breakdown = _breakdown(content, policy_input)
        row = {
            "changes": size,
            "input_kb": round(len(canonical_json(policy_input)) / 1024, 1),
            "sanitize_ms": _ms(statistics.median(sanitize_s)),
            "digest_ms": _ms(statistics.median(digest_s)),
            "evaluate_cold_ms": _ms(cold),
            "evaluate_process_ms": _ms(statistics.median(timings["process"])),
            "evaluate_thread_ms": _ms(statistics.median(timings["thread"])),
            **breakdown,
            "outcomes": outcomes,
            "repeat": repeat,
        }
        rows.append(row)
        print(
            f"{size:>8} {row['input_kb']:>9} {row['sanitize_ms']:>9} {row['digest_ms']:>7} "
            f"{row['evaluate_cold_ms']:>8} {row['evaluate_process_ms']:>8} "
            f"{row['evaluate_thread_ms']:>8} {row['build_input_ms']:>8} "
            f"{row['compile_and_set_input_ms']:>8} {row['queries_ms']:>8}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        )
    at_1000 = next((r for r in rows if r["changes"] == 1000), None)
    summary: dict[str, Any] = {"policies": len(content.policies), "rows": rows}
    if at_1000 is not None:
        met = at_1000["evaluate_process_ms"] < TARGET_MS_AT_1000
        summary["target_ms_at_1000"] = TARGET_MS_AT_1000
        summary["target_met"] = met
        print(
            f"target: evaluate 1,000 changes in under {TARGET_MS_AT_1000:g} ms: "
            f"{'met' if met else 'not met'} ({at_1000['evaluate_process_ms']} ms)"
        )
    print(f"active threads: {threading.active_count()}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
