"""The dependency rule: the domain is pure and cheap to import."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("boto3", "botocore", "pynamodb", "pydantic", "moto", "cryptography")


def test_importing_the_domain_loads_no_sdk() -> None:
    code = (
        "import sys, runplane.domain.transitions, runplane.domain.entities, "
        "runplane.domain.errors, runplane.domain.ids, runplane.domain.clock; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
