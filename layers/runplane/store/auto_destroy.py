"""Workspaces' auto-destroys in the table: one item per workspace (``WS#<id>`` /
``AUTODESTROY``) at a version, replaced whole by each write, conditioned on the version
read (``services.repositories.AutoDestroyStore``). Every armed workspace is also in one
index partition, which the sweep reads.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pynamodb.attributes import JSONAttribute, NumberAttribute, UnicodeAttribute

from runplane.domain.auto_destroy import AutoDestroy, AutoDestroySettings
from runplane.domain.entities import AuditEvent, Workspace
from runplane.domain.errors import ConcurrentChange, NotFound
from runplane.store import audit, state_versions
from runplane.store.models import Gsi1, TableItem, auto_destroy_key
from runplane.store.prefetch import IdentityMap
from runplane.store.schedules import latest_configuration_id
from runplane.store.table import GSI1
from runplane.store.transaction import Item, Transaction

ARMED_PARTITION = "AUTODESTROY"


class AutoDestroyItem(TableItem):
    # Its own connection: a model first used after ``models.bind`` would otherwise share
    # TableItem's, whose schema has no index.
    _connection = None
    gsi1: Gsi1[AutoDestroyItem] = Gsi1()
    gsi1pk = UnicodeAttribute(attr_name=GSI1.partition_key)
    gsi1sk = UnicodeAttribute(attr_name=GSI1.sort_key)
    workspace_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    version = NumberAttribute()
    body = JSONAttribute()


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _parsed(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))


def to_body(record: AutoDestroy) -> dict[str, Any]:
    """The item's document for ``record`` (the inverse of ``from_item``)."""
    settings = record.settings
    inactivity = settings.destroy_after_inactivity
    return {
        "destroy_at": _time(settings.destroy_at),
        "inactivity_seconds": None if inactivity is None else int(inactivity.total_seconds()),
        "auto_apply": settings.auto_apply,
        "set_at": record.set_at.isoformat(),
        "set_by": record.set_by,
        "postponed_until": _time(record.postponed_until),
        "postponed_by": record.postponed_by,
        "notices": list(record.notices),
        "active_run_id": record.active_run_id,
        "last_run_id": record.last_run_id,
        "last_outcome": record.last_outcome,
        "last_reason": record.last_reason,
        "attempts": record.attempts,
        "next_attempt_at": _time(record.next_attempt_at),
        "destroyed_at": _time(record.destroyed_at),
    }


def from_item(item: AutoDestroyItem) -> AutoDestroy:
    body = item.body or {}
    inactivity = body.get("inactivity_seconds")
    set_at = _parsed(body["set_at"])
    assert set_at is not None
    return AutoDestroy(
        workspace_id=item.workspace_id,
        organization_id=item.org_id,
        settings=AutoDestroySettings(
            destroy_at=_parsed(body.get("destroy_at")),
            destroy_after_inactivity=None
            if inactivity is None
            else timedelta(seconds=int(inactivity)),
            auto_apply=bool(body.get("auto_apply", False)),
        ),
        set_at=set_at,
        set_by=str(body["set_by"]),
        version=int(item.version),
        postponed_until=_parsed(body.get("postponed_until")),
        postponed_by=body.get("postponed_by"),
        notices=tuple(str(n) for n in body.get("notices") or ()),
        active_run_id=body.get("active_run_id"),
        last_run_id=body.get("last_run_id"),
        last_outcome=body.get("last_outcome"),
        last_reason=body.get("last_reason"),
        attempts=int(body.get("attempts") or 0),
        next_attempt_at=_parsed(body.get("next_attempt_at")),
        destroyed_at=_parsed(body.get("destroyed_at")),
    )


def _item(record: AutoDestroy) -> AutoDestroyItem:
    return AutoDestroyItem(
        *auto_destroy_key(record.workspace_id),
        gsi1pk=ARMED_PARTITION,
        gsi1sk=record.workspace_id,
        workspace_id=record.workspace_id,
        org_id=record.organization_id,
        version=record.version,
        body=to_body(record),
    )


def _moved(workspace_id: str) -> Any:
    def refused(current: Item | None) -> Exception:
        return ConcurrentChange(
            f"the auto-destroy of workspace {workspace_id} changed meanwhile; nothing was "
            "written: read it again"
        )

    return refused


def _at_version(previous_version: int) -> Any:
    if previous_version == 0:
        return AutoDestroyItem.pk.does_not_exist()
    return AutoDestroyItem.version == previous_version


def _audited(event: AuditEvent | None) -> list[Transaction]:
    if event is None:
        return []
    return [audit.recorded(event)]


def get(workspace_id: str) -> AutoDestroy | None:
    try:
        item = AutoDestroyItem.get(*auto_destroy_key(workspace_id), consistent_read=True)
    except AutoDestroyItem.DoesNotExist:
        return None
    return from_item(item)


def put(
    record: AutoDestroy,
    *,
    previous_version: int,
    event: AuditEvent | None = None,
    announce: Transaction | None = None,
) -> Transaction:
    """Write ``record`` only while the stored one is at ``previous_version`` (0: none),
    with its audit ``event`` and the outbox write ``announce``, if given."""
    return (
        Transaction()
        .put(
            _item(record),
            condition=_at_version(previous_version),
            on_refused=_moved(record.workspace_id),
        )
        .extend(_audited(event))
        .extend([] if announce is None else [announce])
    )


def delete(workspace_id: str, *, previous_version: int, event: AuditEvent) -> Transaction:
    return (
        Transaction()
        .delete(
            AutoDestroyItem(*auto_destroy_key(workspace_id)),
            condition=_at_version(previous_version),
            on_refused=_moved(workspace_id),
        )
        .extend(_audited(event))
    )


def armed() -> list[AutoDestroy]:
    return [from_item(item) for item in AutoDestroyItem.gsi1.query(ARMED_PARTITION)]


def last_activity(workspace: Workspace) -> datetime | None:
    """When the workspace's current state (as it was read) was published, or None."""
    if workspace.current_state_version_id is None:
        return None
    try:
        return state_versions.get(
            workspace.current_state_version_id, reads=IdentityMap()
        ).created_at
    except NotFound:
        return None


class DynamoAutoDestroyStore:
    """``services.repositories.AutoDestroyStore`` on the table."""

    def get(self, workspace_id: str) -> AutoDestroy | None:
        return get(workspace_id)

    def put(
        self,
        record: AutoDestroy,
        *,
        previous_version: int,
        event: AuditEvent | None = None,
        announce: Any = None,
    ) -> None:
        put(record, previous_version=previous_version, event=event, announce=announce).commit()

    def delete(self, workspace_id: str, *, previous_version: int, event: AuditEvent) -> None:
        delete(workspace_id, previous_version=previous_version, event=event).commit()

    def armed(self) -> list[AutoDestroy]:
        return armed()

    def last_activity(self, workspace: Workspace) -> datetime | None:
        return last_activity(workspace)

    def latest_configuration_id(self, workspace_id: str) -> str | None:
        return latest_configuration_id(workspace_id)
