"""The operations seams' contract: the same cases against the DynamoDB store (on moto)
and the in-memory fakes the service tier uses (tests/service), so the fakes cannot
drift."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.launch_controls import GLOBAL, Controls
from runplane.services.repositories.operations import LaunchControlStore
from runplane.store import sandbox_slots
from runplane.store.launch_controls import DynamoLaunchControls
from tests.fakes_operations import InMemoryLaunchControls

AT = datetime(2026, 1, 1, tzinfo=UTC)

# -- launch controls ----------------------------------------------------------------------

Occupy = Callable[[str, int], None]
"""Makes a scope run that many more sandboxes (on the table: slots taken)."""


@pytest.fixture(params=["dynamodb", "memory"])
def launch_controls(request: pytest.FixtureRequest) -> tuple[LaunchControlStore, Occupy]:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table

        def take(scope: str, count: int) -> None:
            for _ in range(count):
                sandbox_slots.take(scope, None, scope).commit()

        return DynamoLaunchControls(), take
    fake = InMemoryLaunchControls()
    return fake, lambda scope, count: fake.running_sandboxes(scope, fake.running(scope) + count)


def test_scopes_never_set_read_as_allowed_with_nothing_running(
    launch_controls: tuple[LaunchControlStore, Occupy],
) -> None:
    store, _ = launch_controls
    # When scopes nobody ever set are read, with and without counts
    controls, running = store.read([GLOBAL, "org-1"], counts=True)
    without, none = store.read([GLOBAL, "org-1"], counts=False)
    # Then each reads as the default controls, running nothing
    assert controls == without == {GLOBAL: Controls(), "org-1": Controls()}
    assert running == {GLOBAL: 0, "org-1": 0}
    assert none == {}
    assert (store.get("org-1"), store.running("org-1")) == (Controls(), 0)


def test_controls_put_read_back_whole_and_replace_the_previous_ones(
    launch_controls: tuple[LaunchControlStore, Occupy],
) -> None:
    store, _ = launch_controls
    # Given an organization's controls with every field set
    full = Controls(
        launches_enabled=False,
        suspended=True,
        allowed_regions=("eu-west-1", "us-east-1"),
        runner_releases=("r-2", "r-1"),
        policy_runtimes=("rego-1",),
        max_sandboxes=3,
    )
    store.put("org-1", full, by="user:ada", at=AT)
    # Then they read back whole, in the order given, for that scope only
    assert store.get("org-1") == full
    assert store.read(["org-1", GLOBAL], counts=False)[0] == {"org-1": full, GLOBAL: Controls()}
    # When they are replaced by controls with fewer fields set
    store.put("org-1", Controls(max_sandboxes=None), by="user:bob", at=AT + timedelta(1))
    # Then the last write wins whole: nothing of the first is left
    assert store.get("org-1") == Controls()


def test_running_counts_are_per_scope_and_untouched_by_a_put(
    launch_controls: tuple[LaunchControlStore, Occupy],
) -> None:
    store, occupy = launch_controls
    # Given the platform running three sandboxes and an organization one
    occupy(GLOBAL, 3)
    occupy("org-1", 1)
    # When the organization's controls are set
    store.put("org-1", Controls(max_sandboxes=1), by="user:ada", at=AT)
    # Then each scope's count reads back as taken, in one read and one by one
    assert store.read([GLOBAL, "org-1", "org-2"], counts=True)[1] == {
        GLOBAL: 3,
        "org-1": 1,
        "org-2": 0,
    }
    assert (store.running(GLOBAL), store.running("org-1")) == (3, 1)
