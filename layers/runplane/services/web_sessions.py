"""Dashboard sign-in: a one-time login code becomes a cookie session of a principal."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from runplane.domain.audit import AuditOutcome, sign_in_record
from runplane.domain.capabilities import handle_hash
from runplane.domain.clock import Clock
from runplane.domain.errors import LoginLinkRefused
from runplane.domain.identity import Permission, Principal, PrincipalKind, Unauthenticated
from runplane.domain.ids import IdGenerator, IdKind
from runplane.domain.web_session import (
    LOGIN_CODE_LIFETIME,
    SESSION_LIFETIME,
    Grant,
    WebSession,
    new_secret,
)
from runplane.services.repositories.access import WebSessionStore

if TYPE_CHECKING:
    from runplane.services.repositories.audit import SecurityTrailStore


@dataclass(frozen=True)
class SignedIn:
    secret: str = field(repr=False)
    valid_until: datetime


class WebSessions:
    def __init__(
        self,
        clock: Clock,
        ids: IdGenerator,
        store: WebSessionStore,
        trail: SecurityTrailStore | None = None,
    ) -> None:
        self._clock = clock
        self._ids = ids
        self._store = store
        # Where a refused sign-in of a known organization is recorded.
        self._trail = trail

    def issue_login_code(
        self,
        organization_id: str,
        name: str,
        permissions: Iterable[Permission],
        *,
        created_by: str,
    ) -> str:
        """A single-use code; its secret is returned here and never again."""
        code = new_secret()
        now = self._clock.now()
        grant = Grant(organization_id, name, frozenset(permissions), now, now + LOGIN_CODE_LIFETIME)
        self._store.put_login_code(handle_hash(code), grant, created_by)
        return code

    def sign_in(self, code: str, source_address: str | None = None) -> SignedIn:
        """Consume ``code`` (once, before it expires) and open a session."""
        now = self._clock.now()
        code_hash = handle_hash(code)
        grant = self._store.login_code(code_hash)
        if grant is None:
            raise LoginLinkRefused()
        if grant.valid_until <= now:
            # An expired code still names its organization: the refusal is recorded.
            self.refused(grant.organization_id, grant.name, "login_link", "expired", source_address)
            raise LoginLinkRefused()
        secret = new_secret()
        session = WebSession(
            self._ids.new(IdKind.WEB_SESSION),
            Grant(
                grant.organization_id,
                grant.name,
                grant.permissions,
                now,
                now + SESSION_LIFETIME,
            ),
        )
        record = sign_in_record(
            self._ids.new(IdKind.AUDIT_EVENT),
            grant.organization_id,
            grant.name,
            "login_link",
            now,
            source_address,
            session_id=session.id,
        )
        self._store.redeem(code_hash, handle_hash(secret), session, record)
        return SignedIn(secret, session.grant.valid_until)

    def open(
        self,
        organization_id: str,
        name: str,
        permissions: Iterable[Permission],
        *,
        auth_time: datetime,
        groups: Iterable[str] = (),
        source_address: str | None = None,
        until: datetime | None = None,
    ) -> SignedIn:
        """A session for someone the identity provider authenticated at ``auth_time``
        (hosted-UI sign-in); step-up rules read that time, not the session's start.
        ``until`` caps its validity (the ID token's expiry)."""
        now = self._clock.now()
        valid_until = (
            now + SESSION_LIFETIME if until is None else min(until, now + SESSION_LIFETIME)
        )
        secret = new_secret()
        session = WebSession(
            self._ids.new(IdKind.WEB_SESSION),
            Grant(
                organization_id,
                name,
                frozenset(permissions),
                now,
                valid_until,
                auth_time=auth_time,
                groups=tuple(groups),
            ),
        )
        record = sign_in_record(
            self._ids.new(IdKind.AUDIT_EVENT),
            organization_id,
            name,
            "hosted_ui",
            now,
            source_address,
            session_id=session.id,
        )
        self._store.put_session(handle_hash(secret), session, record)
        return SignedIn(secret, session.grant.valid_until)

    def refused(
        self,
        organization_id: str,
        name: str,
        method: str,
        reason: str,
        source_address: str | None,
    ) -> None:
        """Record a sign-in refused for a person of a known organization."""
        if self._trail is None:
            return
        self._trail.append(
            sign_in_record(
                self._ids.new(IdKind.AUDIT_EVENT),
                organization_id,
                name,
                method,
                self._clock.now(),
                source_address,
                session_id="",
                outcome=AuditOutcome.REFUSED,
                reason=reason,
            )
        )

    def authenticate(self, secret: str | None) -> Principal:
        if not secret:
            raise Unauthenticated("sign in to use the dashboard")
        session = self._store.session(handle_hash(secret))
        if session is None or session.grant.valid_until <= self._clock.now():
            raise Unauthenticated("the dashboard session has ended: sign in again")
        grant = session.grant
        return Principal(
            kind=PrincipalKind.USER,
            id=grant.name,
            organization_id=grant.organization_id,
            permissions=grant.permissions,
            display=f"User {grant.name} (dashboard)",
            auth_time=grant.auth_time or grant.created_at,
            user=grant.name,
            groups=grant.groups,
        )

    def sign_out(self, secret: str) -> None:
        self._store.delete_session(handle_hash(secret))
