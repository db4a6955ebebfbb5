"""What checking the launch controls costs: every scope's controls and sandbox count in
one consistent read, and a switch set a moment ago is honoured."""

from __future__ import annotations

import pytest

from runplane.domain.entities import Organization
from runplane.domain.errors import LaunchDenied
from runplane.domain.identity import Permission, Principal, PrincipalKind
from runplane.services.launch_controls import GLOBAL, Controls
from tests.integration.conftest import Stack
from tests.integration.dynamodb_requests import DynamoDBRequests


def _operator(org: Organization) -> Principal:
    return Principal(
        kind=PrincipalKind.USER,
        id="ops",
        organization_id=org.id,
        permissions=frozenset(Permission),
        display="ops",
    )


def test_a_launch_check_reads_every_scope_in_one_request(
    stack: Stack, org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given platform controls capping sandboxes and organization controls
    controls = stack.services.launch_controls
    controls.set(_operator(org), GLOBAL, Controls(max_sandboxes=5))
    controls.set(_operator(org), org.id, Controls(max_sandboxes=2))
    requests = DynamoDBRequests(monkeypatch)

    # When a new run's launch is checked (controls and running counts)
    clearance = controls.check(org.id, "dev")

    # Then both scopes' controls and counts came back in one consistent read
    assert requests.operations == ["BatchGetItem"]
    assert clearance.limits == {GLOBAL: ("platform", 5), org.id: ("organization", 2)}


def test_an_organization_switched_off_a_moment_ago_is_denied(
    stack: Stack, org: Organization
) -> None:
    # Given an organization whose launches were just switched off
    controls = stack.services.launch_controls
    controls.set(_operator(org), org.id, Controls(launches_enabled=False))

    # When a sandbox start is checked, Then it is denied
    with pytest.raises(LaunchDenied, match="switched off for the organization"):
        controls.check(org.id, "dev", capacity=False)
