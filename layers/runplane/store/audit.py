"""Audit events: immutable items written in the same transaction as what they record."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane.domain.entities import AuditEvent
from runplane.store.models import AUDIT_PREFIX, AuditEventItem, org_event_key
from runplane.store.transaction import Transaction


def org_audit_partition(org_id: str) -> str:
    return f"ORG#{org_id}#AUDIT"


def audit_item(
    *,
    key: tuple[str, str],
    event_id: str,
    org_id: str,
    subject_id: str,
    type: str,
    actor: str,
    at: datetime,
    details: Mapping[str, str],
) -> AuditEventItem:
    return AuditEventItem(
        key[0],
        key[1],
        gsi1pk=org_audit_partition(org_id),
        gsi1sk=f"{at.isoformat()}#{event_id}",
        event_id=event_id,
        org_id=org_id,
        subject_id=subject_id,
        type=type,
        actor=actor,
        at=at,
        details=dict(details),
    )


def org_event(
    *,
    organization_id: str,
    subject_id: str,
    event_id: str,
    type: str,
    actor: str,
    at: datetime,
    details: Mapping[str, str],
) -> Transaction:
    """An organization audit event, written once, to commit with what it records."""
    return Transaction().put_new(
        audit_item(
            key=org_event_key(organization_id, f"{at.isoformat()}#{event_id}"),
            event_id=event_id,
            org_id=organization_id,
            subject_id=subject_id,
            type=type,
            actor=actor,
            at=at,
            details=details,
        )
    )


def recorded(event: AuditEvent) -> Transaction:
    """The organization audit event ``event``, written once, to commit with what it
    records (``org_event`` of its fields)."""
    return org_event(
        organization_id=event.organization_id,
        subject_id=event.subject_id,
        event_id=event.id,
        type=event.type,
        actor=event.actor,
        at=event.at,
        details=event.details,
    )


def to_event(item: AuditEventItem) -> AuditEvent:
    return AuditEvent(
        id=item.event_id,
        organization_id=item.org_id,
        subject_id=item.subject_id,
        type=item.type,
        actor=item.actor,
        at=item.at,
        details={str(k): str(v) for k, v in _as_dict(item.details).items()},
    )


def _as_dict(details: Any) -> dict[str, Any]:
    # A raw MapAttribute reads back as an attribute container, a fresh one as a dict.
    return details.as_dict() if hasattr(details, "as_dict") else dict(details)


def events_in(partition: str) -> list[AuditEvent]:
    """The audit events of one subject partition (a run, an organization), oldest first."""
    return [
        to_event(item)
        for item in AuditEventItem.query(
            partition, AuditEventItem.sk.startswith(AUDIT_PREFIX), consistent_read=True
        )
    ]


def organization_trail(org_id: str) -> list[AuditEvent]:
    return [to_event(item) for item in AuditEventItem.gsi1.query(org_audit_partition(org_id))]
