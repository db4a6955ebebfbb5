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


TIERS = ("unit", "service", "integration", "e2e", "infra", "statemachines", "browser", "iam")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With ``-n`` and no ``--dist``, pytest-xdist distributes by work stealing, not by
    its default load batches: those hand a worker runs of consecutive tests, and one
    worker took every chunk of the service tier's interleavings (seconds each) while
    the other sat idle. A worker that runs out takes half of another's queue."""
    if config.getoption("numprocesses", None) and config.getoption("dist", "no") == "no":
        config.option.dist = "worksteal"


# Tests that must share one worker under `--dist loadgroup`, by path prefix: what their
# session- or module-scoped fixtures build is built once per process, so every worker
# given one of their tests would build it again. The CDK app is synthesized once, one
# chromium serves the browser tier, and the real engine makes each module's plans once.
SHARED_WORKER = {
    "tests/infra/": "infra",
    "tests/browser/": "browser",
    "tests/iam/": "iam",
    "tests/unit/runner/test_plan_options.py::": "plan_options",
    "tests/unit/test_plan_file.py::": "plan_file",
    "tests/unit/runner/test_plan_config.py::": "plan_config",
    "tests/unit/test_policy_shapes_engine.py::": "policy_shapes_engine",
    "tests/unit/tools/test_policy_compat.py::": "policy_compat",
}


def shared_worker_group(nodeid: str) -> str | None:
    """The group of SHARED_WORKER a test's node ID falls in, if any."""
    for prefix, group in SHARED_WORKER.items():
        if nodeid.startswith(prefix):
            return group
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadgroup` with the groups of SHARED_WORKER, taken from node IDs.

    pytest-xdist groups by an ``@group`` suffix its workers add to the node IDs of tests
    marked ``xdist_group``; from pytest 9 a node ID is no longer that attribute, so the
    suffix is lost and every test was its own group (the CDK app was synthesized and the
    engine's plans made once per worker). The controller sees only node IDs, so groups
    are read from their paths here; a suffix, if xdist adds one again, still wins."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class SharedWorkerScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return str(super()._split_scope(nodeid))
            return shared_worker_group(nodeid) or nodeid

    return SharedWorkerScheduling(config, log)


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
                if tier in ("infra", "browser", "iam"):
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
