"""The security audit trail: an organization's records, paged by time (docs/audit.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import Field

from functions.api import schema as oas
from functions.api.edge import Reply, json_reply, principal
from runplane.domain.audit import AuditAction, AuditQuery
from runplane.domain.errors import InvalidInput
from runplane.wiring import services

router = Router()  # type: ignore[no-untyped-call]


class AuditRecordView(oas.Doc):
    id: str
    organization_id: str
    at: str = Field(description="When it happened (ISO 8601, UTC)")
    action: str
    actor: str
    actor_display: str
    source_address: str | None
    object: dict[str, str] = Field(description="The object acted on: its kind and ID")
    outcome: str = Field(description="succeeded, refused or failed")
    details: dict[str, str]


class AuditPageView(oas.Doc):
    records: list[AuditRecordView] = Field(description="Oldest first")
    next_cursor: str | None = Field(description="page[cursor] of the next page; null: the last")


def _time(raw: str | None, name: str) -> datetime | None:
    if raw is None:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be an ISO 8601 time with its offset", f"/{name}") from None
    if parsed.tzinfo is None:
        raise InvalidInput(f"{name} must be an ISO 8601 time with its offset", f"/{name}")
    return parsed


@router.get(
    "/api/v1/audit",
    responses=oas.responses(200, AuditPageView, *oas.READ),
    security=oas.PEOPLE,
)
def audit_trail(
    since: Annotated[str | None, Query(max_length=64)] = None,
    until: Annotated[str | None, Query(max_length=64)] = None,
    action: Annotated[AuditAction | None, Query()] = None,
    size: Annotated[int, Query(alias="page[size]", ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(alias="page[cursor]", max_length=1024)] = None,
) -> Reply:
    query = AuditQuery(
        since=_time(since, "since"),
        until=_time(until, "until"),
        action=action,
        size=size,
        cursor=cursor,
    )
    page = services().audit.page(principal(), query)
    body: dict[str, Any] = {
        "records": [record.to_dict() for record in page.records],
        "next_cursor": page.next_cursor,
    }
    return json_reply(200, AuditPageView.model_validate(body))
