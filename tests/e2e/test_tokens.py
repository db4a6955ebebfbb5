"""API tokens for automation: issued with a role, never beyond the issuer, revocable."""

from __future__ import annotations

import pytest

from runplane.client import ApiError, Client, Connection
from runplane.domain.identity import ROLES, Permission
from tests.e2e.conftest import Local, unique


def test_a_token_gets_its_role_and_stops_working_once_revoked(local: Local) -> None:
    # Given an admin issuing a developer token for a CI pipeline
    created = local.client.create_token(unique("ci"), "developer")
    ci = Client(Connection(local.url, created["token"], local.organization))

    # Then the token is shown once with exactly the role's permissions
    assert created["token"].startswith("rpt_")
    assert set(created["permissions"]) == {p.value for p in ROLES["developer"]}
    # And it can do what a developer does, and nothing more
    workspace = ci.create_workspace(unique("from-ci"))
    assert workspace["id"].startswith("ws-")
    with pytest.raises(ApiError) as refused:
        ci.create_token("escalate", "reader")
    assert refused.value.status == 403

    # When it is revoked / Then it no longer authenticates
    local.client.revoke_token(created["id"])
    with pytest.raises(ApiError) as revoked:
        ci.create_workspace(unique("after-revoke"))
    assert revoked.value.status == 401


def test_nobody_issues_a_token_with_more_than_they_hold(local: Local) -> None:
    # Given someone who manages tokens but is not an admin
    manager = local.token([*ROLES["operator"], Permission.TOKEN_MANAGE], name="manager")
    client = Client(Connection(local.url, manager, local.organization))
    # When they ask for an admin token / Then it is refused
    with pytest.raises(ApiError) as refused:
        client.create_token("too-much", "admin")
    assert refused.value.status == 403
    # And an unknown role is a validation error
    with pytest.raises(ApiError) as invalid:
        client.create_token("odd", "superuser")
    assert invalid.value.status == 422
