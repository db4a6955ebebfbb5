"""The permission table (tests/permission_rules.py) names every route each resolver
registers, and only those: a new endpoint without a rule, or a rule left for a removed
one, fails here before the walk ever runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from functions.api.app import build_app as run_api
from functions.cloud_api.app import build_app as cloud_api
from functions.dashboard.app import build_app as dashboard
from runplane.domain.identity import ROLES, Permission
from runplane.domain.teams import WORKSPACE_SCOPED
from tests.permission_rules import TABLES, Scope, Surface

BUILDERS: dict[Surface, Callable[[], Any]] = {
    Surface.API: run_api,
    Surface.CLOUD_API: cloud_api,
    Surface.DASHBOARD: dashboard,
}


def registered(app: Any) -> set[tuple[str, str]]:
    """(method, path template) of every route the resolver would match a request to."""
    return {(route.method, route.path) for route in [*app._static_routes, *app._dynamic_routes]}


@pytest.mark.parametrize("surface", list(Surface))
def test_every_registered_route_has_exactly_one_rule(surface: Surface) -> None:
    # Given the routes the resolver registered
    routes = registered(BUILDERS[surface]())
    # Then the table has a rule for each, and none for a route that does not exist
    table = set(TABLES[surface])
    assert sorted(routes - table) == [], "routes without a permission rule"
    assert sorted(table - routes) == [], "rules for routes that no longer exist"


def test_a_workspace_rule_names_only_what_a_workspace_grant_can_hold() -> None:
    # A workspace rule whose permission no team grant can give on a workspace would be
    # walked as "refused to every level" and hide a route checked organization-wide.
    for surface, table in TABLES.items():
        for key, rule in table.items():
            if rule.scope is Scope.WORKSPACE:
                assert rule.needs, (surface, key)
                assert set(rule.needs) <= WORKSPACE_SCOPED, (surface, key)
            if rule.scope is Scope.ORGANIZATION:
                assert rule.needs, (surface, key)


def test_every_permission_a_rule_needs_is_held_by_the_admin_role() -> None:
    # Otherwise nobody but a platform operator could ever call the route.
    for table in TABLES.values():
        for key, rule in table.items():
            if rule.scope not in {Scope.PLATFORM, Scope.RUNNER}:
                assert set(rule.needs) <= ROLES["admin"], key
    assert Permission.PLATFORM_OPERATE not in ROLES["admin"]
