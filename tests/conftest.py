from __future__ import annotations

import gc
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


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With ``-n`` and no ``--dist``, pytest-xdist distributes by work stealing, not by
    its default load batches: those hand a worker runs of consecutive tests, and one
    worker took every chunk of the service tier's interleavings (seconds each) while
    the other sat idle. A worker that runs out takes half of another's queue."""
    if config.getoption("numprocesses", None) and config.getoption("dist", "no") == "no":
        config.option.dist = "worksteal"


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


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once the tests to run are known: what collection built is kept out of the cyclic
    collector's sight, and moto's speedups are installed if a test may reach moto."""
    # The modules and test items live as long as the session: frozen, they are no longer
    # walked by every full collection (the service tier's interleavings trigger several).
    gc.freeze()
    # moto without its own overheads (replies, dispatch, ASL parsing), as the embedded
    # stack runs it (tests/integration/test_moto_speedups.py checks that no reply
    # changes). The service tier never reaches moto: importing moto's Step Functions
    # parser to patch it would cost each of its processes about two seconds.
    if all(item.get_closest_marker("service") for item in session.items):
        return
    from runplane.local import moto_speedups

    moto_speedups.install()
