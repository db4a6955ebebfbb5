"""Hosted-UI sign-in pre-sessions: keyed by the hash of the browser's cookie secret.

The item holds no secret (state, nonce and verifier are derived from the cookie),
only when it was started and until when it may be finished.
"""

from __future__ import annotations

from datetime import datetime

from pynamodb.attributes import UTCDateTimeAttribute

from runplane.domain.errors import SignInRefused
from runplane.store.models import TableItem
from runplane.store.transaction import Transaction


class PreSessionItem(TableItem):
    created_at = UTCDateTimeAttribute()
    valid_until = UTCDateTimeAttribute()


def pre_session_key(secret_hash: str) -> tuple[str, str]:
    return f"WEBSIGNIN#{secret_hash}", "WEBSIGNIN"


def put_pre_session(secret_hash: str, created_at: datetime, valid_until: datetime) -> Transaction:
    return Transaction().put_new(
        PreSessionItem(
            *pre_session_key(secret_hash),
            created_at=created_at,
            valid_until=valid_until,
            # DynamoDB's TTL sweeps abandoned sign-ins; validity is checked on read.
            expires_at=valid_until,
        )
    )


def get_pre_session_validity(secret_hash: str) -> datetime | None:
    try:
        item = PreSessionItem.get(*pre_session_key(secret_hash), consistent_read=True)
    except PreSessionItem.DoesNotExist:
        return None
    return item.valid_until


def consume_pre_session(secret_hash: str) -> Transaction:
    """Delete the pre-session if it is still there: of two callbacks with one cookie,
    exactly one goes on to redeem its code."""
    return Transaction().delete(
        PreSessionItem(*pre_session_key(secret_hash)),
        condition=PreSessionItem.pk.exists(),
        on_refused=lambda current: SignInRefused(
            "pre_session_used", "this sign-in was already finished or abandoned"
        ),
    )


class DynamoPreSessions:
    """The ``PreSessionStore`` seam on the table (services/repositories/access.py)."""

    def put_pre_session(
        self, secret_hash: str, created_at: datetime, valid_until: datetime
    ) -> None:
        put_pre_session(secret_hash, created_at, valid_until).commit()

    def pre_session_validity(self, secret_hash: str) -> datetime | None:
        return get_pre_session_validity(secret_hash)

    def consume_pre_session(self, secret_hash: str) -> None:
        consume_pre_session(secret_hash).commit()
