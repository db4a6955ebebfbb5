"""In-memory seams of access (runplane.services.repositories.access): plain dicts
keeping the DynamoDB store's promises, the same cases holding both
(tests/integration/test_access_store_contract.py). A refused write changes nothing
and raises the store's typed error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from runplane.domain.errors import ConcurrentChange, LoginLinkRefused, SignInRefused
from runplane.domain.web_session import Grant, WebSession


@dataclass(frozen=True)
class StoredLoginCode:
    grant: Grant
    created_by: str


class InMemoryWebSessions:
    """``WebSessionStore``: login codes and sessions by the hash of their secret."""

    def __init__(self) -> None:
        self.login_codes: dict[str, StoredLoginCode] = {}
        self.sessions: dict[str, WebSession] = {}

    def put_login_code(self, code_hash: str, grant: Grant, created_by: str) -> None:
        if code_hash in self.login_codes:
            raise ConcurrentChange("the login code changed concurrently; nothing was written")
        self.login_codes[code_hash] = StoredLoginCode(grant, created_by)

    def login_code(self, code_hash: str) -> Grant | None:
        stored = self.login_codes.get(code_hash)
        return None if stored is None else stored.grant

    def redeem(self, code_hash: str, secret_hash: str, session: WebSession) -> None:
        if code_hash not in self.login_codes:
            raise LoginLinkRefused()
        self._refuse_taken_session(secret_hash)
        del self.login_codes[code_hash]
        self.sessions[secret_hash] = session

    def put_session(self, secret_hash: str, session: WebSession) -> None:
        self._refuse_taken_session(secret_hash)
        self.sessions[secret_hash] = session

    def session(self, secret_hash: str) -> WebSession | None:
        return self.sessions.get(secret_hash)

    def delete_session(self, secret_hash: str) -> None:
        self.sessions.pop(secret_hash, None)

    def _refuse_taken_session(self, secret_hash: str) -> None:
        if secret_hash in self.sessions:
            raise ConcurrentChange("the web session changed concurrently; nothing was written")


class InMemoryPreSessions:
    """``PreSessionStore``: hosted-UI pre-sessions (started, valid until) by hash."""

    def __init__(self) -> None:
        self.pre_sessions: dict[str, tuple[datetime, datetime]] = {}

    def put_pre_session(
        self, secret_hash: str, created_at: datetime, valid_until: datetime
    ) -> None:
        if secret_hash in self.pre_sessions:
            raise ConcurrentChange("the sign-in changed concurrently; nothing was written")
        self.pre_sessions[secret_hash] = (created_at, valid_until)

    def pre_session_validity(self, secret_hash: str) -> datetime | None:
        stored = self.pre_sessions.get(secret_hash)
        return None if stored is None else stored[1]

    def consume_pre_session(self, secret_hash: str) -> None:
        if self.pre_sessions.pop(secret_hash, None) is None:
            raise SignInRefused(
                "pre_session_used", "this sign-in was already finished or abandoned"
            )
