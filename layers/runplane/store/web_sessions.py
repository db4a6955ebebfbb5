"""Dashboard login codes and cookie sessions: only their hashes are keys."""

from __future__ import annotations

from pynamodb.attributes import ListAttribute, UnicodeAttribute, UTCDateTimeAttribute

from runplane.domain.audit import AuditRecord
from runplane.domain.errors import LoginLinkRefused
from runplane.domain.identity import Permission
from runplane.domain.web_session import Grant, WebSession
from runplane.store.models import TableItem
from runplane.store.security_records import security_record
from runplane.store.transaction import Transaction


class LoginCodeItem(TableItem):
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    permissions: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    created_at = UTCDateTimeAttribute()
    valid_until = UTCDateTimeAttribute()
    created_by = UnicodeAttribute()


class WebSessionItem(TableItem):
    session_id = UnicodeAttribute()
    org_id = UnicodeAttribute()
    name = UnicodeAttribute()
    permissions: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, default=list)  # type: ignore[arg-type]
    created_at = UTCDateTimeAttribute()
    valid_until = UTCDateTimeAttribute()
    # When the person authenticated at the identity provider (hosted-UI sign-in);
    # absent for login-link sessions, whose sign-in is their creation.
    auth_time = UTCDateTimeAttribute(null=True)
    groups: ListAttribute[str] = ListAttribute(of=UnicodeAttribute, null=True)  # type: ignore[arg-type]


def login_code_key(code_hash: str) -> tuple[str, str]:
    return f"WEBLOGIN#{code_hash}", "WEBLOGIN"


def web_session_key(secret_hash: str) -> tuple[str, str]:
    return f"WEBSESSION#{secret_hash}", "WEBSESSION"


def put_login_code(code_hash: str, grant: Grant, created_by: str) -> Transaction:
    return Transaction().put_new(_login_code_item(code_hash, grant, created_by))


def _login_code_item(code_hash: str, grant: Grant, created_by: str) -> LoginCodeItem:
    """The login code item granting ``grant`` (read back by ``_grant``)."""
    return LoginCodeItem(
        *login_code_key(code_hash),
        org_id=grant.organization_id,
        name=grant.name,
        permissions=sorted(p.value for p in grant.permissions),
        created_at=grant.created_at,
        valid_until=grant.valid_until,
        created_by=created_by,
        # DynamoDB's TTL sweeps the leftovers; validity is checked on read.
        expires_at=grant.valid_until,
    )


def _grant(item: LoginCodeItem | WebSessionItem) -> Grant:
    """The grant a login code or session item holds."""
    return Grant(
        organization_id=item.org_id,
        name=item.name,
        permissions=frozenset(Permission(p) for p in item.permissions or ()),
        created_at=item.created_at,
        valid_until=item.valid_until,
        auth_time=item.auth_time if isinstance(item, WebSessionItem) else None,
        groups=tuple(item.groups or ()) if isinstance(item, WebSessionItem) else (),
    )


def get_login_code(code_hash: str) -> Grant | None:
    try:
        return _grant(LoginCodeItem.get(*login_code_key(code_hash), consistent_read=True))
    except LoginCodeItem.DoesNotExist:
        return None


def redeem(code_hash: str, secret_hash: str, session: WebSession) -> Transaction:
    """Consume the code and open the session in one transaction: of two uses of one
    code, exactly one succeeds."""
    return (
        Transaction()
        .delete(
            LoginCodeItem(*login_code_key(code_hash)),
            condition=LoginCodeItem.pk.exists(),
            on_refused=lambda current: LoginLinkRefused(),
        )
        .extend([put_session(secret_hash, session)])
    )


def put_session(secret_hash: str, session: WebSession) -> Transaction:
    return Transaction().put_new(_session_item(secret_hash, session))


def _session_item(secret_hash: str, session: WebSession) -> WebSessionItem:
    """The item holding ``session`` under its secret's hash (the inverse of
    ``_session``)."""
    grant = session.grant
    return WebSessionItem(
        *web_session_key(secret_hash),
        session_id=session.id,
        org_id=grant.organization_id,
        name=grant.name,
        permissions=sorted(p.value for p in grant.permissions),
        created_at=grant.created_at,
        valid_until=grant.valid_until,
        auth_time=grant.auth_time,
        groups=list(grant.groups) or None,
        expires_at=grant.valid_until,
    )


def _session(item: WebSessionItem) -> WebSession:
    """The session an item holds (the inverse of ``_session_item``)."""
    return WebSession(item.session_id, _grant(item))


def get_session(secret_hash: str) -> WebSession | None:
    try:
        item = WebSessionItem.get(*web_session_key(secret_hash), consistent_read=True)
    except WebSessionItem.DoesNotExist:
        return None
    return _session(item)


def delete_session(secret_hash: str) -> None:
    WebSessionItem(*web_session_key(secret_hash)).delete()


class DynamoWebSessions:
    """The ``WebSessionStore`` seam on the table (services/repositories/access.py)."""

    def put_login_code(self, code_hash: str, grant: Grant, created_by: str) -> None:
        put_login_code(code_hash, grant, created_by).commit()

    def login_code(self, code_hash: str) -> Grant | None:
        return get_login_code(code_hash)

    def redeem(
        self,
        code_hash: str,
        secret_hash: str,
        session: WebSession,
        audit: AuditRecord | None = None,
    ) -> None:
        redeem(code_hash, secret_hash, session).extend(_recorded(audit)).commit()

    def put_session(
        self, secret_hash: str, session: WebSession, audit: AuditRecord | None = None
    ) -> None:
        put_session(secret_hash, session).extend(_recorded(audit)).commit()

    def session(self, secret_hash: str) -> WebSession | None:
        return get_session(secret_hash)

    def delete_session(self, secret_hash: str) -> None:
        delete_session(secret_hash)


def _recorded(audit: AuditRecord | None) -> list[Transaction]:
    return [] if audit is None else [security_record(audit)]
