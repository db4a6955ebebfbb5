"""Dashboard sign-in with login codes over the in-memory store: a code is single use
and short-lived, a session is its grant's principal until its lifetime ends or it
signs out, and a refusal opens nothing. What the table stores (hashes only) is on moto:
tests/integration/test_web_sessions.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runplane.domain.errors import LoginLinkRefused
from runplane.domain.identity import Permission, PrincipalKind, Unauthenticated
from runplane.domain.web_session import LOGIN_CODE_LIFETIME, SESSION_LIFETIME
from runplane.services.web_sessions import WebSessions
from tests.fakes import FakeClock, SeededIds
from tests.fakes_access import InMemoryWebSessions

READER = frozenset({Permission.RUN_READ, Permission.WORKSPACE_READ})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> InMemoryWebSessions:
    return InMemoryWebSessions()


@pytest.fixture
def sessions(clock: FakeClock, store: InMemoryWebSessions) -> WebSessions:
    return WebSessions(clock, SeededIds(), store)


def test_a_login_code_opens_one_session_of_its_grant(
    sessions: WebSessions, store: InMemoryWebSessions
) -> None:
    # Given a login code for a reader of the organization
    code = sessions.issue_login_code("org-acme", "ana", READER, created_by="tests")

    # When it is used
    signed_in = sessions.sign_in(code)

    # Then the session is the grant's principal, signed in as it was opened
    who = sessions.authenticate(signed_in.secret)
    assert who.kind is PrincipalKind.USER
    assert (who.organization_id, who.permissions) == ("org-acme", READER)
    assert who.display == "User ana (dashboard)"
    (session,) = store.sessions.values()
    # (named as the person, so a bearer token and a session are one principal)
    assert (who.id, who.user, who.ref) == ("ana", "ana", "user:ana")
    assert who.auth_time == session.grant.created_at
    assert signed_in.valid_until == session.grant.created_at + SESSION_LIFETIME
    # And the code is spent: nothing secret is a key
    assert store.login_codes == {}
    assert code not in store.sessions
    assert signed_in.secret not in store.sessions


def test_a_second_use_of_a_code_is_refused_and_opens_nothing(
    sessions: WebSessions, store: InMemoryWebSessions
) -> None:
    # Given a code used once
    code = sessions.issue_login_code("org-acme", "ana", READER, created_by="tests")
    sessions.sign_in(code)
    # When it is used again
    with pytest.raises(LoginLinkRefused):
        sessions.sign_in(code)
    # Then no second session was opened
    assert len(store.sessions) == 1


def test_an_expired_or_unknown_login_code_is_refused_and_opens_nothing(
    sessions: WebSessions, store: InMemoryWebSessions, clock: FakeClock
) -> None:
    # Given a code whose lifetime is over
    code = sessions.issue_login_code("org-acme", "ana", READER, created_by="tests")
    clock.advance(LOGIN_CODE_LIFETIME)
    # When it is used, or a made-up one is
    with pytest.raises(LoginLinkRefused):
        sessions.sign_in(code)
    with pytest.raises(LoginLinkRefused):
        sessions.sign_in("not-a-code")
    # Then no session was opened
    assert store.sessions == {}


def test_a_session_ends_at_its_lifetime_or_on_sign_out(
    sessions: WebSessions, clock: FakeClock
) -> None:
    # Given two signed-in sessions
    first = sessions.sign_in(sessions.issue_login_code("org-acme", "a", READER, created_by="t"))
    second = sessions.sign_in(sessions.issue_login_code("org-acme", "b", READER, created_by="t"))

    # When one signs out
    sessions.sign_out(first.secret)
    # Then only that one ends
    with pytest.raises(Unauthenticated):
        sessions.authenticate(first.secret)
    sessions.authenticate(second.secret)

    # And the other ends when its lifetime is over
    clock.advance(SESSION_LIFETIME + timedelta(seconds=1))
    with pytest.raises(Unauthenticated):
        sessions.authenticate(second.secret)


def test_no_secret_or_an_unknown_one_is_unauthenticated(sessions: WebSessions) -> None:
    for missing in (None, "", "made-up"):
        with pytest.raises(Unauthenticated):
            sessions.authenticate(missing)


def test_a_hosted_ui_session_carries_when_the_person_authenticated(
    sessions: WebSessions, clock: FakeClock
) -> None:
    # Given someone the identity provider authenticated a minute ago
    authenticated = clock.now() - timedelta(minutes=1)
    # When a session is opened for them
    signed_in = sessions.open("org-acme", "ana", READER, auth_time=authenticated)
    # Then step-up rules read that time, not the session's start
    who = sessions.authenticate(signed_in.secret)
    assert who.auth_time == authenticated
    assert who.permissions == READER
