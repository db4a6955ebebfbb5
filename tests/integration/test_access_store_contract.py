"""The access stores' contract: the same cases against the DynamoDB store (on moto) and
the in-memory fakes the service tier uses (tests/service), so the fakes cannot drift.
Keys are hashes of secrets; here any distinct strings stand for them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.errors import ConcurrentChange, LoginLinkRefused, SignInRefused
from runplane.domain.identity import Permission
from runplane.domain.web_session import Grant, WebSession
from runplane.services.repositories.access import PreSessionStore, WebSessionStore
from runplane.store.sign_in import DynamoPreSessions
from runplane.store.web_sessions import DynamoWebSessions
from tests.fakes_access import InMemoryPreSessions, InMemoryWebSessions

AT = datetime(2026, 1, 1, tzinfo=UTC)
READER = frozenset({Permission.RUN_READ, Permission.WORKSPACE_READ})


def _grant(name: str = "ana", *, auth_time: datetime | None = None) -> Grant:
    return Grant("org-acme", name, READER, AT, AT + timedelta(hours=8), auth_time=auth_time)


# -- web sessions ----------------------------------------------------------------------------


@pytest.fixture(params=["dynamodb", "memory"])
def web_sessions(request: pytest.FixtureRequest) -> WebSessionStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoWebSessions()
    return InMemoryWebSessions()


def test_a_login_code_reads_back_its_grant_and_is_written_once(
    web_sessions: WebSessionStore,
) -> None:
    # Given a login code
    web_sessions.put_login_code("code-1", _grant(), "tests")
    # Then it reads back whole, and an unknown one is None
    assert web_sessions.login_code("code-1") == _grant()
    assert web_sessions.login_code("code-none") is None
    # And the same hash is not written twice
    with pytest.raises(ConcurrentChange):
        web_sessions.put_login_code("code-1", _grant("bea"), "tests")
    assert web_sessions.login_code("code-1") == _grant()


def test_a_code_is_redeemed_once_into_its_session(web_sessions: WebSessionStore) -> None:
    # Given a login code
    web_sessions.put_login_code("code-1", _grant(), "tests")
    session = WebSession("web-1", _grant())
    # When it is redeemed
    web_sessions.redeem("code-1", "secret-1", session)
    # Then the code is gone and the session is open
    assert web_sessions.login_code("code-1") is None
    assert web_sessions.session("secret-1") == session
    # And a second redemption is refused and opens nothing
    with pytest.raises(LoginLinkRefused):
        web_sessions.redeem("code-1", "secret-2", WebSession("web-2", _grant()))
    assert web_sessions.session("secret-2") is None


def test_a_redemption_onto_a_taken_session_keeps_the_code(web_sessions: WebSessionStore) -> None:
    # Given a login code and a session already under the hash a redemption names
    web_sessions.put_login_code("code-1", _grant(), "tests")
    web_sessions.put_session("secret-1", WebSession("web-1", _grant("bea")))
    # When the code is redeemed onto it
    with pytest.raises(ConcurrentChange):
        web_sessions.redeem("code-1", "secret-1", WebSession("web-2", _grant()))
    # Then nothing was written: the code is still there, the session unchanged
    assert web_sessions.login_code("code-1") == _grant()
    assert web_sessions.session("secret-1") == WebSession("web-1", _grant("bea"))


def test_a_session_is_opened_once_and_ends_when_deleted(web_sessions: WebSessionStore) -> None:
    # Given a session of a hosted-UI sign-in, with its authentication time
    session = WebSession("web-1", _grant(auth_time=AT - timedelta(minutes=1)))
    web_sessions.put_session("secret-1", session)
    assert web_sessions.session("secret-1") == session
    # When another is opened under the same hash, it is refused
    with pytest.raises(ConcurrentChange):
        web_sessions.put_session("secret-1", WebSession("web-2", _grant()))
    assert web_sessions.session("secret-1") == session
    # When it is deleted, it is gone, and deleting it again is no error
    web_sessions.delete_session("secret-1")
    assert web_sessions.session("secret-1") is None
    web_sessions.delete_session("secret-1")


# -- hosted-UI pre-sessions ------------------------------------------------------------------


@pytest.fixture(params=["dynamodb", "memory"])
def pre_sessions(request: pytest.FixtureRequest) -> PreSessionStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoPreSessions()
    return InMemoryPreSessions()


def test_a_pre_session_reads_back_its_validity_and_is_written_once(
    pre_sessions: PreSessionStore,
) -> None:
    # Given a pre-session valid for ten minutes
    until = AT + timedelta(minutes=10)
    pre_sessions.put_pre_session("pre-1", AT, until)
    # Then its validity reads back, and an unknown one is None
    assert pre_sessions.pre_session_validity("pre-1") == until
    assert pre_sessions.pre_session_validity("pre-none") is None
    # And the same hash is not written twice
    with pytest.raises(ConcurrentChange):
        pre_sessions.put_pre_session("pre-1", AT, AT + timedelta(hours=1))
    assert pre_sessions.pre_session_validity("pre-1") == until


def test_a_pre_session_is_consumed_once(pre_sessions: PreSessionStore) -> None:
    # Given a pre-session, consumed
    pre_sessions.put_pre_session("pre-1", AT, AT + timedelta(minutes=10))
    pre_sessions.consume_pre_session("pre-1")
    assert pre_sessions.pre_session_validity("pre-1") is None
    # When it is consumed again, or an unknown one is
    for again in ("pre-1", "pre-none"):
        with pytest.raises(SignInRefused) as refused:
            pre_sessions.consume_pre_session(again)
        # Then it is refused as already used
        assert refused.value.reason == "pre_session_used"
