"""What a Cloud API workspace read costs: names are resolved once, the workspace is
always read fresh (its lock and current state change)."""

from __future__ import annotations

import pytest

from runplane.domain.entities import Organization, Workspace
from runplane.domain.errors import NotFound
from runplane.domain.identity import Permission, Principal
from tests.integration.conftest import Stack
from tests.integration.dynamodb_requests import DynamoDBRequests


def _admin(stack: Stack, org: Organization) -> Principal:
    token = stack.identity.issue_token(org.id, "admin", list(Permission), created_by="t").token
    return stack.identity.authenticate(f"Bearer {token}")


def test_a_workspace_read_by_name_again_costs_one_read_and_sees_its_lock(
    stack: Stack, org: Organization, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace this process has read by name once
    admin = _admin(stack, org)
    stack.workspaces.by_name(admin, org.name, workspace.name)
    stack.workspaces.organization_name(org.id)
    stack.workspaces.lock(admin, workspace.id, "maintenance")
    requests = DynamoDBRequests(monkeypatch)

    # When it is read by name again, and its organization's name asked
    again = stack.workspaces.by_name(admin, org.name, workspace.name)
    name = stack.workspaces.organization_name(org.id)

    # Then only the workspace itself was read, and it is current (locked since)
    assert requests.operations == ["GetItem"]
    assert (again.id, again.lock_reason, name) == (workspace.id, "maintenance", org.name)


def test_a_missing_workspace_name_is_asked_again_once_created(
    stack: Stack, org: Organization
) -> None:
    # Given a name no workspace has
    admin = _admin(stack, org)
    with pytest.raises(NotFound):
        stack.workspaces.by_name(admin, org.name, "later")

    # When a workspace takes it
    created = stack.tenancy.create_workspace(org.id, "later")

    # Then the name now finds it
    assert stack.workspaces.by_name(admin, org.name, "later").id == created.id
