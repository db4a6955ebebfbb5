"""A deleted workspace on DynamoDB takes no writer and no lock: a run or a native client
that read the workspace before its deletion committed is refused by the table, so a
deletion and a run racing it never both succeed (and no state is written to a deleted
workspace)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runplane.domain.entities import AuditEvent, LockHolder, Organization, Workspace
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.store import apply_lock, writer_queue
from runplane.store.workspace_directory import DynamoWorkspaceDirectory
from tests.integration.conftest import Stack

AT = datetime(2026, 1, 1, tzinfo=UTC)
ACME = Organization(id="org-acme", name="acme", created_at=AT)


def _deleted(stack: Stack) -> Workspace:
    """A workspace as read just before its deletion committed."""
    directory = DynamoWorkspaceDirectory()
    directory.create_organization(ACME)
    read = Workspace(
        id="ws-1",
        organization_id=ACME.id,
        name="preview",
        created_at=AT,
        fence=0,
        writer_run_id=None,
        lock_id=None,
        lock_run_id=None,
        queue_length=0,
    )
    directory.create_workspace(read)
    event = AuditEvent("evt-1", ACME.id, "ws-1", "workspace.deleted", "user:ada", AT, {})
    directory.delete_workspace(read, deleted_by="user:ada", event=event)
    return read


def test_a_run_that_read_the_workspace_before_its_deletion_takes_no_reservation(
    stack: Stack,
) -> None:
    # Given a workspace deleted after a run read it free
    read = _deleted(stack)
    before = stack.scan()

    # When the run takes the free reservation as it read it (a waiter needs a holder,
    # which a deleted workspace never gets)
    with pytest.raises(ConcurrentChange):
        writer_queue.take_free_reservation(read.id, "run-1", AT).commit()

    # Then the table refused it and holds what it held
    assert stack.scan() == before


def test_a_client_that_read_the_workspace_before_its_deletion_takes_no_lock(
    stack: Stack,
) -> None:
    # Given a workspace deleted after a native client read it unlocked
    read = _deleted(stack)
    before = stack.scan()

    # When the client locks it at the fence it read
    with pytest.raises(NotFound):
        apply_lock.acquire_lock(
            read.id,
            LockHolder("user:ada", "ada"),
            lock_id="lock-1",
            observed_fence=read.fence,
            reason=None,
            now=AT,
        ).commit()

    # Then it is refused as not found, and nothing was written
    assert stack.scan() == before
