"""Organization API tokens: only their hash is stored.

``DynamoApiTokens`` is the ``ApiTokenStore`` seam over them
(``services/repositories/access.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime

from runplane.domain.audit import AuditRecord
from runplane.domain.errors import NotFound
from runplane.domain.identity import ApiTokenRecord, Permission
from runplane.domain.read_ahead import Read, ReadAhead
from runplane.store import batch, prefetch
from runplane.store.models import ApiTokenItem, api_token_key
from runplane.store.prefetch import IdentityMap
from runplane.store.security_records import security_record
from runplane.store.transaction import Transaction


def tokens_partition(org_id: str) -> str:
    return f"ORG#{org_id}#TOKENS"


def put_token(token_hash: str, record: ApiTokenRecord) -> Transaction:
    return Transaction().put_new(_item(token_hash, record))


def _item(token_hash: str, record: ApiTokenRecord) -> ApiTokenItem:
    """The item of a new token's ``record`` under its hash (the inverse of ``_record``;
    revoking sets ``revoked_at`` on it later)."""
    return ApiTokenItem(
        *api_token_key(token_hash),
        gsi1pk=tokens_partition(record.organization_id),
        gsi1sk=record.id,
        token_id=record.id,
        org_id=record.organization_id,
        name=record.name,
        permissions=sorted(p.value for p in record.permissions),
        created_at=record.created_at,
        created_by=record.created_by,
        team_id=record.team_id,
    )


def _record(item: ApiTokenItem) -> ApiTokenRecord:
    """The record an item holds (the inverse of ``_item``)."""
    return ApiTokenRecord(
        id=item.token_id,
        organization_id=item.org_id,
        name=item.name,
        permissions=frozenset(Permission(p) for p in item.permissions or ()),
        created_at=item.created_at,
        created_by=item.created_by,
        revoked=item.revoked_at is not None,
        team_id=item.team_id,
    )


def get_token(token_hash: str) -> ApiTokenRecord | None:
    try:
        return _record(ApiTokenItem.get(*api_token_key(token_hash), consistent_read=True))
    except ApiTokenItem.DoesNotExist:
        return None


def list_tokens(org_id: str) -> list[ApiTokenRecord]:
    return [_record(item) for item in ApiTokenItem.gsi1.query(tokens_partition(org_id))]


def revoke_token(
    org_id: str, token_id: str, now: datetime, record: AuditRecord | None = None
) -> None:
    """Revoke the token once: revoking it again changes nothing and writes no record
    (its first revocation's time and record stand)."""

    def refused(current: dict[str, object] | None) -> Exception:
        if current is not None and current.get("org_id") == org_id:
            return _AlreadyRevoked()
        return NotFound("token", token_id)

    for item in ApiTokenItem.gsi1.query(tokens_partition(org_id), ApiTokenItem.gsi1sk == token_id):
        revoke = Transaction().update(
            ApiTokenItem(item.pk, item.sk),
            [ApiTokenItem.revoked_at.set(now)],
            condition=(ApiTokenItem.org_id == org_id) & ApiTokenItem.revoked_at.does_not_exist(),
            on_refused=refused,
        )
        if record is not None:
            revoke.extend([security_record(record)])
        with contextlib.suppress(_AlreadyRevoked):
            revoke.commit()
        return
    raise NotFound("token", token_id)


class _AlreadyRevoked(Exception):
    """The token was revoked before: nothing to write."""


class DynamoApiTokens:
    """``ApiTokenStore`` on the table."""

    def put_token(
        self, token_hash: str, record: ApiTokenRecord, audit: AuditRecord | None = None
    ) -> None:
        put = put_token(token_hash, record)
        if audit is not None:
            put.extend([security_record(audit)])
        put.commit()

    def token(self, token_hash: str) -> ApiTokenRecord | None:
        return get_token(token_hash)

    def token_read(
        self, token_hash: str, also: Sequence[Read]
    ) -> tuple[ApiTokenRecord | None, ReadAhead]:
        key = api_token_key(token_hash)
        found = batch.get_many([key, *map(prefetch.key_of, also)], reads=IdentityMap())
        raw = found.pop(key, None)
        record = _record(ApiTokenItem.from_raw_data(raw)) if raw else None
        return record, prefetch.read_ahead(also, found)

    def revoke_token(
        self, org_id: str, token_id: str, now: datetime, audit: AuditRecord | None = None
    ) -> None:
        revoke_token(org_id, token_id, now, audit)
