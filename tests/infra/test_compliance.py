"""What a security reviewer runs: AWS Solutions checks (cdk-nag) and cfn-lint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from tests.infra.synth import Synthesized


def _acknowledged(stack: Synthesized) -> dict[str, set[str]]:
    """Acknowledged AWS Solutions findings (rule ID -> reasons), from template metadata."""
    found: dict[str, set[str]] = {}
    for resource in stack.resources.values():
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            found.setdefault(rule["id"], set()).add(rule["reason"])
    return found


@pytest.mark.parametrize("variant", ["stack", "custom_stack"])
def test_synthesis_leaves_no_unacknowledged_finding(
    variant: str, request: pytest.FixtureRequest
) -> None:
    # Given a synthesized deployment (synthesis fails on an unacknowledged finding)
    synthesized: Synthesized = request.getfixturevalue(variant)
    # Then the validation report holds no violation at all
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    violations = [v for r in report["pluginReports"] for v in r.get("violations", [])]
    assert violations == []
    # And the AWS Solutions checks did run: their acknowledgments are in the template
    assert any(rule.startswith("AwsSolutions-") for rule in _acknowledged(synthesized))


def test_every_acknowledged_finding_carries_a_written_reason(stack: Synthesized) -> None:
    acknowledged = {k: v for k, v in _acknowledged(stack).items() if k.startswith("AwsSolutions")}
    for rule, reasons in acknowledged.items():
        for reason in reasons:
            assert len(reason.split()) >= 8, f"{rule}: {reason!r}"


def test_only_these_rules_are_acknowledged(stack: Synthesized) -> None:
    # A new acknowledgment is a security decision: it must be added here, deliberately.
    rules = {k.split("[")[0] for k in _acknowledged(stack) if k.startswith("AwsSolutions")}
    assert rules == {
        "AwsSolutions-APIG3",  # WAF: attached when webAclArn is set
        "AwsSolutions-APIG4",  # the five public routes
        "AwsSolutions-COG4",  # one REQUEST authorizer for tokens, JWTs and runner sessions
        "AwsSolutions-ECS2",  # the sandbox's engine user and isolation (no secret)
        "AwsSolutions-IAM4",  # API Gateway's account logging role
        "AwsSolutions-IAM5",  # X-Ray, log delivery, ECR auth, artifact prefixes, sandbox tasks
        "AwsSolutions-S1",  # the access-log bucket itself
        "AwsSolutions-SMG4",  # Cognito's app client secret; GitHub App secrets (rotated in GitHub)
        "AwsSolutions-SQS3",  # the dead-letter queue itself
    }


def test_the_checks_fail_synthesis_on_a_finding(tmp_path: Path) -> None:
    # Given an app with a non-compliant bucket and the same checks registered
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Bad")
    s3.Bucket(stack, "Open")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    # Then synthesis refuses it
    with pytest.raises(RuntimeError, match=r"Validation ?[Ff]ailed"):
        app.synth()


@pytest.mark.parametrize("variant", ["stack", "custom_stack"])
def test_cfn_lint_passes_on_the_template(variant: str, request: pytest.FixtureRequest) -> None:
    synthesized: Synthesized = request.getfixturevalue(variant)
    # W3005 (redundant DependsOn) is emitted by CDK itself for Lambda role policies.
    linted = subprocess.run(
        [
            str(Path(sys.executable).with_name("cfn-lint")),
            str(synthesized.template_path),
            "--ignore-checks",
            "W3005",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
