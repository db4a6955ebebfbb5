"""The dependency rule: the domain is pure and cheap to import."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "boto3",
    "botocore",
    "pynamodb",
    "pydantic",
    "moto",
    "cryptography",
    "regopy",
    "regorus",
    "aws_lambda_powertools",
)


def test_importing_the_domain_loads_no_sdk() -> None:
    code = (
        "import sys, runplane.domain.transitions, runplane.domain.entities, "
        "runplane.domain.errors, runplane.domain.ids, runplane.domain.clock, "
        "runplane.domain.policy; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_runner_needs_only_the_standard_library_and_cryptography() -> None:
    # The sandbox image installs cryptography alone (functions/runner/Dockerfile).
    code = (
        "import sys, runplane.runner.main; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "['cryptography']"
