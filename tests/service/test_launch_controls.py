"""Launch controls over the in-memory store: who may set and read them, what each
control denies, the sandbox limits, failing closed, and a refused change writing
nothing (one consistent read of every scope is a DynamoDB matter:
tests/integration/test_launch_control_reads.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runplane.domain.errors import LaunchDenied
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.launch_controls import GLOBAL, Controls
from runplane.services.launch_controls import LaunchControls
from tests.fakes import FakeClock
from tests.fakes_operations import InMemoryLaunchControls

ORG = "org-acme"


@dataclass
class Setup:
    store: InMemoryLaunchControls
    controls: LaunchControls


@pytest.fixture
def setup() -> Setup:
    store = InMemoryLaunchControls()
    controls = LaunchControls(FakeClock(), store, region="eu-west-1", policy_runtime="rego-1")
    return Setup(store, controls)


def _person(*permissions: Permission, org: str = ORG) -> Principal:
    return Principal(
        kind=PrincipalKind.USER,
        id="ada",
        organization_id=org,
        permissions=frozenset(permissions),
        display="ada",
    )


OPERATOR = _person(*Permission)
ORG_ADMIN = _person(Permission.ORGANIZATION_READ, Permission.LAUNCH_CONTROL)
READER = _person(Permission.ORGANIZATION_READ)


def test_an_organization_admin_sets_only_its_own_organization(setup: Setup) -> None:
    # When an organization admin sets controls, naming another organization's scope
    stored = setup.controls.set(ORG_ADMIN, "org-other", Controls(max_sandboxes=2))
    # Then they are its own organization's, noted as set by it
    assert stored == Controls(max_sandboxes=2)
    assert setup.store.get(ORG) == Controls(max_sandboxes=2)
    assert setup.store.get("org-other") == Controls()
    assert setup.store.set_by[ORG][0] == ORG_ADMIN.ref
    # And it reads them back with the running count
    setup.store.running_sandboxes(ORG, 1)
    assert setup.controls.get(READER, "organization") == (Controls(max_sandboxes=2), 1)


def test_only_platform_operators_set_or_read_the_platform_controls(setup: Setup) -> None:
    # When an organization admin sets or reads the platform's controls, Then it is refused
    with pytest.raises(Forbidden):
        setup.controls.set(ORG_ADMIN, GLOBAL, Controls(launches_enabled=False))
    with pytest.raises(Forbidden):
        setup.controls.get(ORG_ADMIN, GLOBAL)
    # And nothing was written
    assert setup.store.set_by == {}
    # When an operator sets them, Then they are the platform's
    setup.controls.set(OPERATOR, GLOBAL, Controls(launches_enabled=False))
    assert setup.controls.get(OPERATOR, GLOBAL) == (Controls(launches_enabled=False), 0)


def test_a_reader_can_read_but_not_change_the_organization_controls(setup: Setup) -> None:
    # When a reader sets the organization's controls, Then it is refused writing nothing
    with pytest.raises(Forbidden):
        setup.controls.set(READER, ORG, Controls(suspended=True))
    assert setup.store.set_by == {}
    # And someone without organization:read cannot read them either
    with pytest.raises(Forbidden):
        setup.controls.get(_person(Permission.RUN_READ), ORG)


def test_nothing_set_allows_a_launch_with_no_limits(setup: Setup) -> None:
    # When a launch is checked with no controls stored, Then it passes with no limits
    clearance = setup.controls.check(ORG, "runner-1")
    assert clearance.limits == {GLOBAL: ("platform", None), ORG: ("organization", None)}


@pytest.mark.parametrize(
    ("controls", "reason"),
    [
        (Controls(launches_enabled=False), "launches are switched off for the platform"),
        (Controls(suspended=True), "the platform is suspended"),
        (Controls(allowed_regions=("us-east-1",)), "region eu-west-1 is not allowed"),
        (Controls(runner_releases=("runner-2",)), "runner release runner-1 is not on"),
        (Controls(policy_runtimes=("rego-2",)), "policy runtime rego-1 is not on"),
    ],
)
def test_each_platform_control_denies_a_launch(
    setup: Setup, controls: Controls, reason: str
) -> None:
    # Given the platform's control set
    setup.controls.set(OPERATOR, GLOBAL, controls)
    # When a launch is checked, with or without capacity, Then it is denied saying why
    for capacity in (True, False):
        with pytest.raises(LaunchDenied, match=reason):
            setup.controls.check(ORG, "runner-1", capacity=capacity)


def test_an_organization_control_denies_only_that_organization(setup: Setup) -> None:
    # Given the organization suspended, and allowlists it satisfies
    setup.controls.set(
        ORG_ADMIN,
        ORG,
        Controls(
            suspended=True,
            allowed_regions=("eu-west-1",),
            runner_releases=("runner-1",),
            policy_runtimes=("rego-1",),
        ),
    )
    # Then its launches are denied, naming the organization
    with pytest.raises(LaunchDenied, match="the organization is suspended"):
        setup.controls.check(ORG, "runner-1")
    # And another organization's are not
    setup.controls.check("org-other", "runner-1")


def test_a_scope_at_its_sandbox_limit_denies_a_new_run_but_not_a_start(setup: Setup) -> None:
    # Given an organization limited to two sandboxes, running two
    setup.controls.set(ORG_ADMIN, ORG, Controls(max_sandboxes=2))
    setup.store.running_sandboxes(ORG, 2)
    # When a new run is checked, Then it is denied at the limit
    with pytest.raises(LaunchDenied, match="running its limit of 2 sandboxes"):
        setup.controls.check(ORG, "runner-1")
    # And a sandbox start (no capacity check) is cleared, to take a slot within the limit
    clearance = setup.controls.check(ORG, "runner-1", capacity=False)
    assert clearance.limits[ORG] == ("organization", 2)
    # When one finishes, Then a new run passes again
    setup.store.running_sandboxes(ORG, 1)
    setup.controls.check(ORG, "runner-1")


def test_the_platform_limit_counts_every_organization(setup: Setup) -> None:
    # Given the platform limited to three sandboxes and running three
    setup.controls.set(OPERATOR, GLOBAL, Controls(max_sandboxes=3))
    setup.store.running_sandboxes(GLOBAL, 3)
    # Then a new run of an organization running none is denied
    with pytest.raises(LaunchDenied, match="the platform is running its limit of 3"):
        setup.controls.check(ORG, "runner-1")


def test_controls_that_cannot_be_read_deny(setup: Setup) -> None:
    # Given a store that cannot answer
    setup.store.unreadable = True
    # When a launch is checked, Then it is denied (fail closed)
    with pytest.raises(LaunchDenied, match="could not be read"):
        setup.controls.check(ORG, "runner-1")
