"""Dashboard sign-in on moto: only hashes of codes and sessions are stored, and a used
code is gone from the table. The rules (single use, lifetimes, sign-out) are tested over
the in-memory store: tests/service/test_web_sessions.py."""

from __future__ import annotations

import pytest

from runplane.domain.entities import Organization
from runplane.domain.errors import LoginLinkRefused
from runplane.domain.identity import Permission, PrincipalKind
from runplane.services.web_sessions import WebSessions
from runplane.store.web_sessions import DynamoWebSessions, WebSessionItem
from tests.integration.conftest import Stack


def stored(kind: str) -> list[str]:
    """Partition keys of one kind of item (a scan reads the whole table)."""
    return [str(i.pk) for i in WebSessionItem.scan() if i.sk == kind]


READER = frozenset({Permission.RUN_READ, Permission.WORKSPACE_READ})


def test_a_login_code_opens_one_session_of_its_grant(stack: Stack, org: Organization) -> None:
    # Given a login code for a reader of the organization
    sessions = WebSessions(stack.clock, stack.ids, DynamoWebSessions())
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
