"""The repository contract: the same cases against the DynamoDB store (on moto) and the
in-memory fake the service tier uses (tests/service), so the fake cannot drift."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from runplane.domain.audit import AuditAction, AuditOutcome, AuditQuery, AuditRecord
from runplane.domain.entities import AuditEvent, Organization, Workspace
from runplane.domain.errors import AlreadyExists, ConcurrentChange, NotFound
from runplane.domain.second_approval import SecondApprovalRule
from runplane.services.repositories import WorkspaceDirectory
from runplane.store import audit
from runplane.store.security_records import trail_page
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from tests.fakes import InMemoryWorkspaces

AT = datetime(2026, 1, 1, tzinfo=UTC)
ACME = Organization(id="org-acme", name="acme", created_at=AT)


def _workspace(workspace_id: str, name: str, org_id: str = ACME.id) -> Workspace:
    return Workspace(
        id=workspace_id,
        organization_id=org_id,
        name=name,
        created_at=AT,
        fence=0,
        writer_run_id=None,
        lock_id=None,
        lock_run_id=None,
        queue_length=0,
        tag_names=("net",),
        # Counted from its creation: none of either yet.
        destination_count=0,
        dependent_count=0,
    )


@pytest.fixture(params=["dynamodb", "memory"])
def directory(request: pytest.FixtureRequest) -> WorkspaceDirectory:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoWorkspaceDirectory()
    return InMemoryWorkspaces()


def test_a_created_workspace_reads_back_by_id_and_by_name(directory: WorkspaceDirectory) -> None:
    # Given an organization
    directory.create_organization(ACME)
    # When a workspace is created in it
    directory.create_workspace(_workspace("ws-1", "network"))
    # Then it reads back whole, by ID and by name
    assert directory.get_workspace("ws-1") == _workspace("ws-1", "network")
    assert directory.find_workspace_id(ACME.id, "network") == "ws-1"
    assert directory.find_organization_id("acme") == ACME.id
    assert directory.get_organization(ACME.id) == ACME
    # And a preview reads back naming the workspace it was made from
    preview = replace(_workspace("ws-2", "network-pr-7"), preview_of="ws-1")
    directory.create_workspace(preview)
    assert directory.get_workspace("ws-2") == preview


def test_a_taken_workspace_name_is_refused_and_writes_nothing(
    directory: WorkspaceDirectory,
) -> None:
    # Given a workspace named "network"
    directory.create_organization(ACME)
    directory.create_workspace(_workspace("ws-1", "network"))
    # When another workspace claims the same name in the same organization
    with pytest.raises(AlreadyExists):
        directory.create_workspace(_workspace("ws-2", "network"))
    # Then the second was not written and the name still names the first
    with pytest.raises(NotFound):
        directory.get_workspace("ws-2")
    assert directory.find_workspace_id(ACME.id, "network") == "ws-1"
    assert [w.id for w in directory.list_workspaces(ACME.id)] == ["ws-1"]


def test_the_same_name_is_free_in_another_organization(directory: WorkspaceDirectory) -> None:
    other = Organization(id="org-other", name="other", created_at=AT)
    directory.create_organization(ACME)
    directory.create_organization(other)
    directory.create_workspace(_workspace("ws-1", "network"))
    directory.create_workspace(_workspace("ws-2", "network", other.id))
    assert directory.find_workspace_id(other.id, "network") == "ws-2"


def test_a_taken_organization_name_is_refused_and_writes_nothing(
    directory: WorkspaceDirectory,
) -> None:
    directory.create_organization(ACME)
    with pytest.raises(AlreadyExists):
        directory.create_organization(replace(ACME, id="org-copy"))
    with pytest.raises(NotFound):
        directory.get_organization("org-copy")
    assert directory.find_organization_id("acme") == ACME.id


def test_unknown_records_are_not_found_and_unknown_names_none(
    directory: WorkspaceDirectory,
) -> None:
    with pytest.raises(NotFound):
        directory.get_workspace("ws-none")
    with pytest.raises(NotFound):
        directory.get_organization("org-none")
    assert directory.find_workspace_id(ACME.id, "none") is None
    assert directory.find_organization_id("none") is None
    assert directory.list_workspaces(ACME.id) == []


def test_workspaces_list_in_name_order(directory: WorkspaceDirectory) -> None:
    directory.create_organization(ACME)
    for workspace_id, name in (("ws-1", "zeta"), ("ws-2", "alpha"), ("ws-3", "mid")):
        directory.create_workspace(_workspace(workspace_id, name))
    assert [w.name for w in directory.list_workspaces(ACME.id)] == ["alpha", "mid", "zeta"]


def test_settings_change_only_what_is_given(directory: WorkspaceDirectory) -> None:
    # Given a workspace with a tag
    directory.create_organization(ACME)
    directory.create_workspace(_workspace("ws-1", "network"))
    # When its description and approval window are set
    directory.update_settings("ws-1", description="core", approval_window_seconds=60)
    # Then those two changed and nothing else did, the change counted once
    assert directory.get_workspace("ws-1") == replace(
        _workspace("ws-1", "network"),
        description="core",
        approval_window_seconds=60,
        settings_version=1,
    )


def test_a_settings_change_at_a_stale_version_is_refused_and_writes_nothing(
    directory: WorkspaceDirectory,
) -> None:
    # Given a workspace whose settings changed once (version 1)
    directory.create_organization(ACME)
    directory.create_workspace(_workspace("ws-1", "network"))
    directory.update_settings("ws-1", description="core", expected_settings_version=0)
    changed = directory.get_workspace("ws-1")
    # When a change made from version 0 is written
    with pytest.raises(ConcurrentChange):
        directory.update_settings("ws-1", description="stale", expected_settings_version=0)
    # Then nothing changed; at version 1 it is written
    assert directory.get_workspace("ws-1") == changed
    directory.update_settings("ws-1", description="next", expected_settings_version=1)
    assert directory.get_workspace("ws-1").settings_version == 2


def test_the_second_approval_rule_is_stored_whole_and_cleared(
    directory: WorkspaceDirectory,
) -> None:
    # Given a workspace
    directory.create_organization(ACME)
    directory.create_workspace(_workspace("ws-1", "network"))
    rule = SecondApprovalRule(destroy_runs=True, destroys_over=5)
    # When its two-person rule is set, then turned off
    directory.update_settings("ws-1", second_approval=rule)
    set_rule = directory.get_workspace("ws-1").second_approval
    directory.update_settings("ws-1", second_approval=SecondApprovalRule())
    # Then it read back whole, and then as off, with nothing else changed
    assert set_rule == rule
    assert directory.get_workspace("ws-1") == replace(
        _workspace("ws-1", "network"), settings_version=2
    )


def test_settings_of_an_unknown_workspace_are_not_found_and_write_nothing(
    directory: WorkspaceDirectory,
) -> None:
    with pytest.raises(NotFound):
        directory.update_settings("ws-none", description="x")
    with pytest.raises(NotFound):
        directory.get_workspace("ws-none")


# -- deletion ----------------------------------------------------------------------------


def _deleted_event(event_id: str = "evt-1") -> AuditEvent:
    return AuditEvent(
        id=event_id,
        organization_id=ACME.id,
        subject_id="ws-1",
        type="workspace.deleted",
        actor="user:ada",
        at=AT,
        details={"name": "network", "force": "false", "resources": "0"},
    )


def _trail(directory: WorkspaceDirectory) -> list[AuditEvent]:
    if isinstance(directory, InMemoryWorkspaces):
        return directory.audit
    return audit.organization_trail(ACME.id)


def test_a_deleted_workspace_is_not_found_and_frees_its_name(
    directory: WorkspaceDirectory,
) -> None:
    # Given a workspace named "network" and another one
    directory.create_organization(ACME)
    directory.create_workspace(_workspace("ws-1", "network"))
    directory.create_workspace(_workspace("ws-2", "storage"))
    # When the first is deleted, as read
    directory.delete_workspace(
        directory.get_workspace("ws-1"), deleted_by="user:ada", event=_deleted_event()
    )
    # Then it is not found by ID or name, nor listed, and its deletion was audited
    with pytest.raises(NotFound):
        directory.get_workspace("ws-1")
    assert directory.find_workspace_id(ACME.id, "network") is None
    assert [w.id for w in directory.list_workspaces(ACME.id)] == ["ws-2"]
    assert _trail(directory) == [_deleted_event()]
    # And its settings can no longer be changed, nor can it be deleted again
    with pytest.raises(NotFound):
        directory.update_settings("ws-1", description="x")
    with pytest.raises(NotFound):
        directory.delete_workspace(
            _workspace("ws-1", "network"), deleted_by="user:ada", event=_deleted_event("evt-2")
        )
    # And its name can be claimed by a new workspace
    directory.create_workspace(_workspace("ws-3", "network"))
    assert directory.find_workspace_id(ACME.id, "network") == "ws-3"
    assert [w.id for w in directory.list_workspaces(ACME.id)] == ["ws-3", "ws-2"]


@pytest.mark.parametrize(
    "stale",
    [
        {"fence": 1},
        {"current_state_version_id": "sv-older"},
    ],
    ids=["fence", "state"],
)
def test_a_deletion_of_a_workspace_changed_since_it_was_read_writes_nothing(
    directory: WorkspaceDirectory, stale: dict[str, Any]
) -> None:
    # Given a workspace, and a deletion built on a snapshot it no longer matches
    directory.create_organization(ACME)
    directory.create_workspace(_workspace("ws-1", "network"))
    snapshot = replace(directory.get_workspace("ws-1"), **stale)
    # When the deletion is committed
    with pytest.raises(ConcurrentChange):
        directory.delete_workspace(snapshot, deleted_by="user:ada", event=_deleted_event())
    # Then nothing was written: the workspace, its name and the audit trail are as they were
    assert directory.get_workspace("ws-1") == _workspace("ws-1", "network")
    assert directory.find_workspace_id(ACME.id, "network") == "ws-1"
    assert [w.id for w in directory.list_workspaces(ACME.id)] == ["ws-1"]
    assert _trail(directory) == []


def _settings_record(directory: WorkspaceDirectory) -> list[str]:
    """The IDs of settings records the directory holds (the table's trail, or the fake's)."""
    if isinstance(directory, InMemoryWorkspaces):
        return [r.id for r in directory.security_records]
    return [r.id for r in trail_page(ACME.id, AuditQuery(size=100)).records]


def test_a_settings_record_commits_with_its_change_or_not_at_all(
    directory: WorkspaceDirectory,
) -> None:
    # Given a workspace at settings version 0
    directory.create_organization(ACME)
    directory.create_workspace(_workspace("ws-1", "network"))
    record = AuditRecord(
        id="evt-settings-1",
        organization_id=ACME.id,
        at=datetime(2026, 1, 2, tzinfo=UTC),
        action=AuditAction.WORKSPACE_SETTINGS_CHANGED,
        actor="user:ada",
        actor_display="User ada",
        source_address="127.0.0.1",
        object_kind="workspace",
        object_id="ws-1",
        outcome=AuditOutcome.SUCCEEDED,
        details={"changed": "second_approval"},
    )
    # When a change is refused (a stale version) / Then its record is not written
    directory.update_settings("ws-1", description="a", expected_settings_version=0)
    with pytest.raises(ConcurrentChange):
        directory.update_settings(
            "ws-1", description="b", expected_settings_version=0, audit=record
        )
    assert _settings_record(directory) == []
    # And when it commits, its one record does too
    directory.update_settings(
        "ws-1",
        second_approval=SecondApprovalRule(separation_of_duties=True),
        expected_settings_version=1,
        audit=record,
    )
    assert _settings_record(directory) == ["evt-settings-1"]
