"""Workspaces and tenancy over the in-memory directory: names, visibility, settings."""

from __future__ import annotations

import copy

import pytest

from runplane.domain.audit import AuditAction
from runplane.domain.errors import AlreadyExists, ConcurrentChange, InvalidInput, NotFound
from runplane.domain.second_approval import SecondApprovalRule
from runplane.domain.tfe_runs import ExecutionMode
from tests.service.conftest import Tier


def test_a_created_workspace_is_found_by_name_and_in_search(tier: Tier) -> None:
    # Given an organization and its admin
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    # When the admin creates a remote workspace with tags
    created = tier.workspaces.create(
        admin, "acme", "network", tags=("net", "prod"), execution_mode=ExecutionMode.REMOTE
    )
    # Then it is found by name, and by a tag search
    assert tier.workspaces.by_name(admin, "acme", "network") == created
    assert created.execution_mode == "remote"
    assert created.tag_names == ("net", "prod")
    assert [w.id for w in tier.workspaces.search(admin, "acme", tags=("prod",)).items] == [
        created.id
    ]


def test_a_taken_name_is_refused_and_writes_nothing(tier: Tier) -> None:
    # Given a workspace named "network"
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    tier.workspaces.create(admin, "acme", "network")
    before = copy.deepcopy(tier.directory.workspaces)
    # When another is created with the same name
    with pytest.raises(AlreadyExists):
        tier.workspaces.create(admin, "acme", "network")
    # Then nothing was written
    assert tier.directory.workspaces == before


def test_a_bad_name_is_invalid_input_naming_the_field_and_writes_nothing(tier: Tier) -> None:
    org = tier.tenancy.create_organization("acme")
    with pytest.raises(InvalidInput) as refused:
        tier.workspaces.create(tier.admin(org), "acme", "no spaces")
    assert refused.value.pointer == "/data/attributes/name"
    assert tier.directory.workspaces == {}


def test_another_organizations_workspace_is_not_found(tier: Tier) -> None:
    # Given a workspace in another organization
    acme, other = (tier.tenancy.create_organization(n) for n in ("acme", "other"))
    theirs = tier.tenancy.create_workspace(other.id, "network")
    # When acme's admin asks for it, by ID or through the other organization's name
    # Then neither reveals it
    with pytest.raises(NotFound):
        tier.workspaces.by_id(tier.admin(acme), theirs.id)
    with pytest.raises(NotFound):
        tier.workspaces.by_name(tier.admin(acme), "other", "network")


def test_a_workspace_for_an_unknown_organization_is_not_found_and_writes_nothing(
    tier: Tier,
) -> None:
    with pytest.raises(NotFound):
        tier.tenancy.create_workspace("org-none", "network")
    assert tier.directory.workspaces == {}


def test_an_approval_window_out_of_range_is_refused_and_changes_nothing(tier: Tier) -> None:
    # Given a workspace
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    workspace = tier.workspaces.create(admin, "acme", "network")
    # When its approval window is set to zero seconds
    with pytest.raises(InvalidInput) as refused:
        tier.workspaces.update(admin, workspace, approval_window_seconds=0)
    # Then it is refused, naming the field, and the workspace is unchanged
    assert refused.value.pointer == "/approval_window_seconds"
    assert tier.workspaces.by_id(admin, workspace.id) == workspace


def test_settings_updates_are_read_back(tier: Tier) -> None:
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    workspace = tier.workspaces.create(admin, "acme", "network")
    updated = tier.workspaces.update(
        admin, workspace, description="core network", approval_window_seconds=3600
    )
    assert (updated.description, updated.approval_window_seconds) == ("core network", 3600)
    assert tier.workspaces.list_own(admin) == [updated]


def test_a_settings_change_from_a_stale_form_is_refused_and_writes_nothing(tier: Tier) -> None:
    # Given a workspace whose settings were changed once since a form showed version 0
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    ws = tier.workspaces.create(admin, "acme", "network")
    changed = tier.workspaces.update(admin, ws, description="first", expected_settings_version=0)
    assert changed.settings_version == 1
    before = copy.deepcopy(tier.directory.workspaces)
    # When the form that showed version 0 is sent
    with pytest.raises(ConcurrentChange):
        tier.workspaces.update(admin, changed, description="stale", expected_settings_version=0)
    # Then nothing was written
    assert tier.directory.workspaces == before


def test_a_settings_change_writes_one_record_naming_what_changed(tier: Tier) -> None:
    # Given a workspace with a description
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    ws = tier.workspaces.create(admin, "acme", "network", description="core")

    # When separation of duties is turned on, the same description sent again
    rule = SecondApprovalRule(destroy_runs=True, separation_of_duties=True)
    tier.workspaces.update(admin, ws, description="core", second_approval=rule)

    # Then one record names only the rule, with its new values
    (record,) = tier.directory.security_records
    assert record.action is AuditAction.WORKSPACE_SETTINGS_CHANGED
    assert (record.organization_id, record.object_kind, record.object_id) == (
        org.id,
        "workspace",
        ws.id,
    )
    assert record.actor == admin.ref
    assert dict(record.details) == {
        "changed": "second_approval",
        "destroy_runs": "true",
        "destroys_over": "-",
        "separation_of_duties": "true",
    }

    # And a change that changes nothing, or is refused, writes no record
    current = tier.workspaces.by_id(admin, ws.id)
    tier.workspaces.update(admin, current, second_approval=rule)
    with pytest.raises(ConcurrentChange):
        tier.workspaces.update(admin, ws, description="stale", expected_settings_version=0)
    assert len(tier.directory.security_records) == 1


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"description": "x" * 1001}, "/description"),
        ({"terraform_version": "1" * 41}, "/terraform_version"),
    ],
)
def test_a_too_long_description_or_engine_version_is_refused(
    tier: Tier, change: dict[str, str], pointer: str
) -> None:
    # Given a workspace
    org = tier.tenancy.create_organization("acme")
    admin = tier.admin(org)
    ws = tier.workspaces.create(admin, "acme", "network")
    before = copy.deepcopy(tier.directory.workspaces)
    # When a too long value is sent, then it is refused naming the field, writing nothing
    with pytest.raises(InvalidInput) as refused:
        tier.workspaces.update(admin, ws, **change)  # type: ignore[arg-type]
    assert refused.value.pointer == pointer
    assert tier.directory.workspaces == before
