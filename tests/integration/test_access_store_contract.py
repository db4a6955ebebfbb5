"""The access stores' contract: the same cases against the DynamoDB store (on moto) and
the in-memory fakes the service tier uses (tests/service), so the fakes cannot drift.
Keys are hashes of secrets; here any distinct strings stand for them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runplane.domain.entities import AuditEvent
from runplane.domain.errors import (
    ConcurrentChange,
    Conflict,
    GitHubConnectRefused,
    GitHubInstallationTaken,
    LoginLinkRefused,
    SignInRefused,
)
from runplane.domain.github_connect import AuditNote, ConnectFlow, GitHubAccount, Installation
from runplane.domain.identity import Permission
from runplane.domain.web_session import Grant, WebSession
from runplane.services.repositories.access import (
    GitHubInstallationStore,
    PreSessionStore,
    WebSessionStore,
)
from runplane.store import audit
from runplane.store import github_installations as installations_on_table
from runplane.store.github_installations import DynamoGitHubInstallations
from runplane.store.sign_in import DynamoPreSessions
from runplane.store.web_sessions import DynamoWebSessions
from tests.fakes_access import (
    InMemoryGitHubInstallations,
    InMemoryPreSessions,
    InMemoryWebSessions,
)

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


# -- GitHub App installations ----------------------------------------------------------------


@pytest.fixture(params=["dynamodb", "memory"])
def installations(request: pytest.FixtureRequest) -> GitHubInstallationStore:
    if request.param == "dynamodb":
        request.getfixturevalue("stack")  # moto, with the table
        return DynamoGitHubInstallations()
    return InMemoryGitHubInstallations()


def _flow(installation_id: int | None = None) -> ConnectFlow:
    return ConnectFlow(
        "org-acme", "user:ada", "session-1", installation_id, AT + timedelta(minutes=10)
    )


def _installation(org_id: str, number: int, *, user: str = "alice") -> Installation:
    return Installation(
        installation_id=number,
        organization_id=org_id,
        account=GitHubAccount("acme", "Organization", 7),
        verified_github_user=user,
        claimed_by="user:ada",
        claimed_at=AT,
        bindings=0,
    )


def _note(tag: str, type_: str = "github.installation.connected") -> AuditNote:
    return AuditNote(f"evt-{tag}", type_, "user:ada", {"installation_id": tag})


def _claim(store: GitHubInstallationStore, org_id: str, number: int, cap: int = 3) -> None:
    store.claim(_installation(org_id, number), cap=cap, note=_note(f"{org_id}-{number}"), now=AT)


def _trail(store: GitHubInstallationStore, org_id: str) -> list[AuditEvent]:
    """The organization's audit events, oldest first (on the table, its audit trail)."""
    if isinstance(store, InMemoryGitHubInstallations):
        events = [e for e in store.audit_events if e.organization_id == org_id]
    else:
        events = audit.organization_trail(org_id)
    return sorted(events, key=lambda e: (e.at, e.id))


def _bind_one(store: GitHubInstallationStore, org_id: str, number: int) -> None:
    """A workspace binding starts using the installation (the binding's own write)."""
    if isinstance(store, InMemoryGitHubInstallations):
        store.use(org_id, number)
    else:
        installations_on_table.use(org_id, number).commit()


def test_a_connect_flow_names_its_installation_once_and_is_consumed_once(
    installations: GitHubInstallationStore,
) -> None:
    # Given a connect flow naming no installation yet
    installations.put_connect("flow-1", _flow(), AT)
    assert installations.connect_flow("flow-1") == _flow()
    assert installations.connect_flow("flow-none") is None
    with pytest.raises(ConcurrentChange):
        installations.put_connect("flow-1", _flow(9), AT)
    # When GitHub's setup callback names one, it is recorded
    installations.choose_installation("flow-1", 42)
    assert installations.connect_flow("flow-1") == _flow(42)
    # And naming another is refused, keeping the first
    with pytest.raises(GitHubConnectRefused) as again:
        installations.choose_installation("flow-1", 43)
    assert again.value.reason == "flow_used"
    assert installations.connect_flow("flow-1") == _flow(42)
    # When it is consumed, it is gone, and neither it nor an unknown one is consumed again
    installations.consume_connect("flow-1")
    assert installations.connect_flow("flow-1") is None
    for gone in ("flow-1", "flow-none"):
        with pytest.raises(GitHubConnectRefused) as used:
            installations.consume_connect(gone)
        assert used.value.reason == "flow_used"
    with pytest.raises(GitHubConnectRefused):
        installations.choose_installation("flow-1", 44)
    assert installations.connect_flow("flow-1") is None


def test_a_claim_holds_the_installation_with_its_audit_event(
    installations: GitHubInstallationStore,
) -> None:
    # When an organization claims an installation
    _claim(installations, "org-a", 10)
    # Then it holds it, whole and unbound, and its trail says so
    assert installations.holder_of(10) == "org-a"
    assert installations.held("org-a", 10) == _installation("org-a", 10)
    (event,) = _trail(installations, "org-a")
    assert (event.id, event.type, event.actor, event.subject_id, event.at) == (
        "evt-org-a-10",
        "github.installation.connected",
        "user:ada",
        "github-installation-10",
        AT,
    )
    assert event.details == {"installation_id": "org-a-10"}
    # And nobody holds what was never claimed
    assert installations.holder_of(11) is None
    assert installations.held("org-a", 11) is None
    assert installations.held("org-b", 10) is None


def test_an_installation_held_by_any_organization_is_not_claimed_again(
    installations: GitHubInstallationStore,
) -> None:
    # Given an installation held by one organization
    _claim(installations, "org-a", 9)
    # When another organization, or the same one, claims it
    for org in ("org-b", "org-a"):
        with pytest.raises(GitHubInstallationTaken) as taken:
            _claim(installations, org, 9)
        assert "connected to another organization" in taken.value.message
    # Then nothing was written: one holder, one record, one audit event
    assert installations.holder_of(9) == "org-a"
    assert installations.held_by("org-b") == []
    assert [e.id for e in _trail(installations, "org-b")] == []
    assert len(_trail(installations, "org-a")) == 1


def test_an_organization_at_its_cap_claims_nothing_until_it_releases_one(
    installations: GitHubInstallationStore,
) -> None:
    # Given an organization holding three installations, at a cap of three, in ID order
    for number in (10, 9, 2):
        _claim(installations, "org-a", number)
    assert [i.installation_id for i in installations.held_by("org-a")] == [2, 9, 10]
    # When it claims a fourth
    with pytest.raises(GitHubInstallationTaken) as full:
        _claim(installations, "org-a", 4)
    # Then it is refused, saying why, and nothing was written
    assert "already holds 3" in full.value.message
    assert installations.holder_of(4) is None
    assert len(_trail(installations, "org-a")) == 3
    # And releasing one makes room again
    installations.release("org-a", 9, note=_note("rel-9", "github.installation.released"), now=AT)
    _claim(installations, "org-a", 4)
    assert [i.installation_id for i in installations.held_by("org-a")] == [2, 4, 10]


def test_a_release_of_an_installation_in_use_or_not_held_writes_nothing(
    installations: GitHubInstallationStore,
) -> None:
    # Given an installation held and used by a workspace binding
    _claim(installations, "org-a", 5)
    _bind_one(installations, "org-a", 5)
    # When it is released, or another organization releases it
    with pytest.raises(Conflict) as busy:
        installations.release("org-a", 5, note=_note("r1"), now=AT)
    with pytest.raises(Conflict) as foreign:
        installations.release("org-b", 5, note=_note("r2"), now=AT)
    # Then each is refused, saying why, and nothing was written
    assert "still used by 1" in busy.value.message
    assert "not held by this organization" in foreign.value.message
    held = installations.held("org-a", 5)
    assert held is not None
    assert held.bindings == 1
    assert installations.holder_of(5) == "org-a"
    assert [e.id for e in _trail(installations, "org-a")] == ["evt-org-a-5"]
    assert _trail(installations, "org-b") == []


def test_a_release_frees_the_installation_for_another_organization(
    installations: GitHubInstallationStore,
) -> None:
    # Given an installation held by one organization, released
    _claim(installations, "org-a", 5)
    later = AT + timedelta(minutes=1)
    installations.release("org-a", 5, note=_note("rel", "github.installation.released"), now=later)
    # Then nobody holds it, the release is in the trail, and another organization claims it
    assert installations.holder_of(5) is None
    assert installations.held_by("org-a") == []
    assert [(e.type, e.at) for e in _trail(installations, "org-a")] == [
        ("github.installation.connected", AT),
        ("github.installation.released", later),
    ]
    _claim(installations, "org-b", 5)
    assert installations.holder_of(5) == "org-b"


def test_a_new_proof_replaces_the_old_one_only_for_the_holder(
    installations: GitHubInstallationStore,
) -> None:
    # Given an installation held and used by one binding
    _claim(installations, "org-a", 5)
    _bind_one(installations, "org-a", 5)
    later = AT + timedelta(hours=1)
    # When the holder proves it again through another GitHub user
    installations.verify_again(_installation("org-a", 5, user="bob"), note=_note("v"), now=later)
    # Then the proof is the new one, at the time given, and the binding count stays
    held = installations.held("org-a", 5)
    assert held is not None
    assert (held.verified_github_user, held.claimed_at, held.bindings) == ("bob", later, 1)
    assert [e.id for e in _trail(installations, "org-a")] == ["evt-org-a-5", "evt-v"]
    # And another organization's proof of it is refused, writing nothing
    with pytest.raises(GitHubInstallationTaken):
        installations.verify_again(_installation("org-b", 5), note=_note("w"), now=later)
    assert installations.held("org-b", 5) is None
    assert _trail(installations, "org-b") == []
