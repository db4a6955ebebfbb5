"""Dashboard sign-in on moto: login codes are single use and short-lived; sessions end."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runplane.domain.entities import Organization
from runplane.domain.errors import LoginLinkRefused
from runplane.domain.identity import Permission, PrincipalKind, Unauthenticated
from runplane.domain.web_session import LOGIN_CODE_LIFETIME, SESSION_LIFETIME
from runplane.services.web_sessions import WebSessions
from runplane.store.web_sessions import WebSessionItem
from tests.integration.conftest import Stack


def stored(kind: str) -> list[str]:
    """Partition keys of one kind of item (a scan reads the whole table)."""
    return [str(i.pk) for i in WebSessionItem.scan() if i.sk == kind]


READER = frozenset({Permission.RUN_READ, Permission.WORKSPACE_READ})


def test_a_login_code_opens_one_session_of_its_grant(stack: Stack, org: Organization) -> None:
    # Given a login code for a reader of the organization
    sessions = WebSessions(stack.clock, stack.ids)
    code = sessions.issue_login_code(org.id, "ana", READER, created_by="tests")

    # When it is used
    signed_in = sessions.sign_in(code)

    # Then the session is the grant's principal, and nothing secret is stored
    who = sessions.authenticate(signed_in.secret)
    assert who.kind is PrincipalKind.USER
    assert who.organization_id == org.id
    assert who.permissions == READER
    keys = stored("WEBLOGIN") + stored("WEBSESSION")
    assert keys
    assert all(code not in key and signed_in.secret not in key for key in keys)
    # And a second use is refused and opens nothing
    with pytest.raises(LoginLinkRefused):
        sessions.sign_in(code)
    assert len(stored("WEBSESSION")) == 1
    assert stored("WEBLOGIN") == []


def test_an_expired_login_code_is_refused(stack: Stack, org: Organization) -> None:
    sessions = WebSessions(stack.clock, stack.ids)
    code = sessions.issue_login_code(org.id, "ana", READER, created_by="tests")
    stack.clock.advance(LOGIN_CODE_LIFETIME)
    with pytest.raises(LoginLinkRefused):
        sessions.sign_in(code)
    assert stored("WEBSESSION") == []
    with pytest.raises(LoginLinkRefused):
        sessions.sign_in("not-a-code")


def test_a_session_ends_at_its_lifetime_or_on_sign_out(stack: Stack, org: Organization) -> None:
    sessions = WebSessions(stack.clock, stack.ids)
    first = sessions.sign_in(sessions.issue_login_code(org.id, "a", READER, created_by="t"))
    second = sessions.sign_in(sessions.issue_login_code(org.id, "b", READER, created_by="t"))

    # When one signs out
    sessions.sign_out(first.secret)
    # Then only that one ends
    with pytest.raises(Unauthenticated):
        sessions.authenticate(first.secret)
    sessions.authenticate(second.secret)

    # And the other ends when its lifetime is over
    stack.clock.advance(SESSION_LIFETIME + timedelta(seconds=1))
    with pytest.raises(Unauthenticated):
        sessions.authenticate(second.secret)
    for missing in (None, "", "made-up"):
        with pytest.raises(Unauthenticated):
            sessions.authenticate(missing)
