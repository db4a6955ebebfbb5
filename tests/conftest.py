from __future__ import annotations

import os

import pytest

# No test may reach AWS: fake credentials and a fixed region for every client.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
)


TIERS = ("unit", "service", "integration", "e2e", "infra", "statemachines", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tier, taken from its directory (`-m unit`, `-m "not e2e"`).

    Under pytest-xdist (`--dist loadgroup`) the CDK tests share one worker, so the
    app is synthesized once, and the browser tests share one worker too, so one
    chromium serves them all; every other test goes wherever a worker is free.
    """
    for item in items:
        parts = item.path.parts
        for tier in TIERS:
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))
                if tier in ("infra", "browser"):
                    item.add_marker(pytest.mark.xdist_group(tier))
                break


def pytest_sessionstart(session: pytest.Session) -> None:
    """moto without its own overheads (replies, dispatch, ASL parsing), as the embedded
    stack runs it; tests/integration/test_moto_speedups.py checks that no reply changes."""
    from runplane.local import moto_speedups

    moto_speedups.install()
