"""A workspace counts its notification destinations and the workspaces its applies
trigger, in the write of each change; a run's move carries those counts to its event,
so its consumers look for neither when the workspace had none."""

from __future__ import annotations

from datetime import UTC, datetime

from runplane.domain.notifications import Destination
from runplane.domain.run import RunKind
from runplane.store import notifications
from runplane.store import workspaces as workspace_store
from runplane.store.models import WorkspaceItem, workspace_key
from runplane.store.prefetch import IdentityMap
from runplane.store.run_trigger_store import DynamoRunTriggerStore
from tests.integration.arena import Arena

AT = datetime(2026, 1, 1, tzinfo=UTC)


def counts(workspace_id: str) -> tuple[int | None, int | None]:
    found = workspace_store.get_workspace(workspace_id, reads=IdentityMap())
    return found.destination_count, found.dependent_count


def destination(arena: Arena, workspace_id: str, destination_id: str) -> Destination:
    return Destination(
        id=destination_id,
        organization_id=arena.org.id,
        workspace_id=workspace_id,
        name="ops",
        kind="generic",
        events=("needs_attention",),
        display_url="https://hooks.example/…",
        wrapped_key=b"k",
        sealed=b"s",
        created_at=AT,
        created_by="user:ada",
    )


def test_destinations_and_dependents_are_counted_in_their_own_writes(arena: Arena) -> None:
    # Given two new workspaces, counting none of either
    source = arena.stack.tenancy.create_workspace(arena.org.id, "counted-source")
    dependent = arena.stack.tenancy.create_workspace(arena.org.id, "counted-dependent")
    assert counts(source.id) == (0, 0)
    # When the source gets a destination and the dependent follows it
    notifications.put_destination(destination(arena, source.id, "nd-1")).commit()
    triggers = DynamoRunTriggerStore()
    triggers.add_source(
        triggers.get(dependent.id),
        source.id,
        org_id=arena.org.id,
        run_kind=RunKind.PLAN_AND_APPLY,
        now=AT,
    )
    # Then the source counts one of each; adding the same source again counts nothing
    assert counts(source.id) == (1, 1)
    triggers.add_source(
        triggers.get(dependent.id),
        source.id,
        org_id=arena.org.id,
        run_kind=RunKind.PLAN_ONLY,
        now=AT,
    )
    assert counts(source.id) == (1, 1)
    # And removing them counts them down again
    notifications.delete_destination(source.id, "nd-1")
    triggers.remove_source(triggers.get(dependent.id), source.id, org_id=arena.org.id, now=AT)
    assert counts(source.id) == (0, 0)


def test_an_older_workspace_reads_as_not_counted_whatever_changes(arena: Arena) -> None:
    # Given a workspace made before the counts (its item has none)
    made = arena.stack.tenancy.create_workspace(arena.org.id, "uncounted")
    item = WorkspaceItem.get(*workspace_key(made.id))
    item.update(
        actions=[
            WorkspaceItem.destination_count.remove(),
            WorkspaceItem.dependent_count.remove(),
        ]
    )
    # When a destination is added and removed
    notifications.put_destination(destination(arena, made.id, "nd-2")).commit()
    assert counts(made.id) == (None, None)
    notifications.delete_destination(made.id, "nd-2")
    # Then it still reads as not counted: its consumers keep looking
    assert counts(made.id) == (None, None)
