"""Connecting GitHub App installations over the in-memory stores: a connect flow is
single use, short-lived, bound to its browser and to an open dashboard session; GitHub
must show the signed-in person administers the installation's account; one
organization holds an installation, up to a limit, and releases it only when no binding
uses it. Every refusal claims nothing and writes no audit event. GitHub's real pages
and API are end to end: tests/e2e/test_github_installations.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from runplane.adapters.github_user import GitHubUserAuthorization
from runplane.adapters.secrets import Secrets
from runplane.domain.capabilities import handle_hash
from runplane.domain.errors import (
    Conflict,
    GitHubConnectRefused,
    GitHubInstallationTaken,
    GitHubNotConfigured,
    NotFound,
)
from runplane.domain.github_connect import CONNECT_LIFETIME, GitHubUser
from runplane.domain.identity import Forbidden, Permission, Principal, PrincipalKind
from runplane.domain.web_session import SESSION_LIFETIME, Grant, WebSession
from runplane.services.github_installations import ConnectConfig, GitHubInstallations
from tests.fakes import FakeClock, SeededIds
from tests.fakes_access import InMemoryGitHubInstallations, InMemoryWebSessions

CONFIG = ConnectConfig(
    web_url="https://github.example",
    api_url="https://api.github.example",
    app_slug="runplane",
    client_id="Iv1.runplane",
    client_secret_arn="arn:aws:secretsmanager:us-east-1:1:secret:client",
    max_installations=2,
)
ADMIN = frozenset({Permission.GITHUB_CONNECT, Permission.ORGANIZATION_READ})


class KnownSecret(Secrets):
    """The App's client secret without Secrets Manager."""

    def __init__(self) -> None:
        super().__init__(client=None)

    def read(self, arn: str | None, what: str) -> str:
        if not arn:
            raise GitHubNotConfigured(f"no {what} is configured for this deployment")
        return "client-secret"


class ScriptedGitHub(GitHubUserAuthorization):
    """GitHub's user authorization without HTTP: a person, the installations GitHub
    lists for them, and whether they own each GitHub organization."""

    def __init__(self) -> None:
        super().__init__(CONFIG.web_url, CONFIG.api_url, "client", "secret")
        self.person = GitHubUser("alice", 1)
        self.listed: dict[int, Mapping[str, Any]] = {}
        self.owners: set[str] = set()
        self.exchanged: list[str] = []
        self.revoked: list[str] = []

    def lists(self, installation_id: int, account: str, kind: str = "Organization") -> None:
        self.listed[installation_id] = {
            "id": installation_id,
            "account": {"login": account, "type": kind, "id": 100 + installation_id},
        }

    def exchange(self, code: str, verifier: str) -> str:
        self.exchanged.append(code)
        return f"token-{code}"

    def user(self, token: str) -> GitHubUser:
        return self.person

    def installations(self, token: str) -> list[Mapping[str, Any]]:
        return list(self.listed.values())

    def membership(self, token: str, organization: str) -> Mapping[str, Any] | None:
        if organization in self.owners:
            return {"state": "active", "role": "admin"}
        return {"state": "active", "role": "member"}

    def revoke(self, token: str) -> None:
        self.revoked.append(token)


class Scene:
    def __init__(self, config: ConnectConfig = CONFIG) -> None:
        self.clock = FakeClock()
        self.store = InMemoryGitHubInstallations()
        self.web_sessions = InMemoryWebSessions()
        self.github = ScriptedGitHub()
        self.installations = GitHubInstallations(
            self.clock,
            SeededIds(),
            KnownSecret(),
            config,
            self.store,
            self.web_sessions,
            user_api=lambda *args: self.github,
        )

    def admin(self, org_id: str = "org-acme") -> tuple[Principal, str]:
        """An admin of ``org_id`` signed in to the dashboard, with their session secret."""
        secret = f"session-of-{org_id}-{len(self.web_sessions.sessions)}"
        now = self.clock.now()
        grant = Grant(org_id, "ada", ADMIN, now, now + SESSION_LIFETIME)
        self.web_sessions.put_session(handle_hash(secret), WebSession(f"web-{org_id}", grant))
        principal = Principal(PrincipalKind.USER, f"web-{org_id}", org_id, ADMIN, "User ada")
        return principal, secret

    def connect(self, installation_id: int, org_id: str = "org-acme") -> None:
        """An admin of ``org_id`` connects an installation GitHub lists as theirs."""
        principal, session = self.admin(org_id)
        self.github.lists(installation_id, "acme")
        self.github.owners.add("acme")
        started = self.installations.start(principal, session, installation_id)
        self.installations.finish(started.secret, _state(started.location), "code", None)

    def written(self) -> tuple[object, ...]:
        s = self.store
        return (dict(s.flows), dict(s.holders), dict(s.installations), list(s.audit_events))


def _state(location: str) -> str:
    return parse_qs(urlsplit(location).query)["state"][0]


def refused_as(reason: str, attempt: Callable[[], object]) -> None:
    with pytest.raises(GitHubConnectRefused) as refused:
        attempt()
    assert refused.value.reason == reason


@pytest.fixture
def scene() -> Scene:
    return Scene()


def test_installing_the_app_connects_the_new_installation_with_its_audit_event(
    scene: Scene,
) -> None:
    # Given an admin who starts a connection for a new installation
    principal, session = scene.admin()
    started = scene.installations.start(principal, session, None)
    assert urlsplit(started.location).path == "/apps/runplane/installations/new"
    assert started.valid_until == scene.store.flows[handle_hash(started.secret)].valid_until
    state = _state(started.location)
    # When GitHub's setup callback names the installation, and the person authorizes
    authorize = scene.installations.setup(started.secret, state, "42")
    assert urlsplit(authorize).path == "/login/oauth/authorize"
    scene.github.lists(42, "acme")
    scene.github.owners.add("acme")
    held = scene.installations.finish(started.secret, state, "code-1", None)

    # Then the organization holds it, as GitHub showed it, with who proved it
    assert (held.installation_id, held.organization_id) == (42, "org-acme")
    assert (held.account.login, held.verified_github_user) == ("acme", "alice")
    assert held.claimed_by == principal.ref
    assert scene.store.held("org-acme", 42) == held
    assert scene.installations.holder_of(42) == "org-acme"
    # And its audit event is written, the flow is spent and GitHub's token revoked
    (event,) = scene.store.audit_events
    assert (event.type, event.actor) == ("github.installation.connected", principal.ref)
    assert event.details == {"installation_id": "42", "account": "acme", "github_user": "alice"}
    assert scene.store.flows == {}
    assert scene.github.revoked == ["token-code-1"]


def test_a_connection_finishes_only_in_its_browser_while_fresh(scene: Scene) -> None:
    # Given a connection started for an installation its admin owns on GitHub
    principal, session = scene.admin()
    scene.github.lists(42, "acme")
    scene.github.owners.add("acme")
    started = scene.installations.start(principal, session, 42)
    state = _state(started.location)
    other = scene.installations.start(principal, session, 42)
    before = scene.written()
    # When the callback arrives without the cookie, with another connection's state,
    # or after the flow's lifetime
    refused_as("no_flow", lambda: scene.installations.finish(None, state, "code", None))
    refused_as(
        "state_mismatch",
        lambda: scene.installations.finish(started.secret, _state(other.location), "c", None),
    )
    scene.clock.advance(CONNECT_LIFETIME)
    refused_as("flow_expired", lambda: scene.installations.finish(started.secret, state, "c", None))
    # Then no code was redeemed and nothing was written
    assert scene.github.exchanged == []
    assert scene.written() == before


def test_a_second_callback_is_refused_before_its_code_is_redeemed(scene: Scene) -> None:
    # Given a connection finished once
    principal, session = scene.admin()
    scene.github.lists(42, "acme")
    scene.github.owners.add("acme")
    started = scene.installations.start(principal, session, 42)
    state = _state(started.location)
    scene.installations.finish(started.secret, state, "code-1", None)
    before = scene.written()
    # When the same browser comes back again, or GitHub's setup callback does
    refused_as("flow_used", lambda: scene.installations.finish(started.secret, state, "c2", None))
    refused_as("flow_used", lambda: scene.installations.setup(started.secret, state, "43"))
    # Then the second code was not redeemed and nothing more was written
    assert scene.github.exchanged == ["code-1"]
    assert scene.written() == before


def test_a_connection_whose_dashboard_session_ended_claims_nothing(scene: Scene) -> None:
    # Given a connection started from a dashboard session that has since signed out
    principal, session = scene.admin()
    scene.github.lists(42, "acme")
    started = scene.installations.start(principal, session, 42)
    scene.web_sessions.delete_session(handle_hash(session))
    # When it finishes
    refused_as(
        "session_ended",
        lambda: scene.installations.finish(started.secret, _state(started.location), "c", None),
    )
    # Then nothing was claimed, no code redeemed, and the flow is spent
    assert scene.store.holders == {}
    assert scene.store.audit_events == []
    assert scene.github.exchanged == []
    assert scene.store.flows == {}


def test_github_must_show_the_person_administers_the_installations_account(
    scene: Scene,
) -> None:
    principal, session = scene.admin()

    def finish(installation_id: int) -> None:
        started = scene.installations.start(principal, session, installation_id)
        scene.installations.finish(started.secret, _state(started.location), "code", None)

    # When GitHub does not list the installation among the person's
    refused_as("installation_not_yours", lambda: finish(42))
    # Or lists it on a GitHub organization they are only a member of
    scene.github.lists(43, "acme")
    refused_as("not_organization_owner", lambda: finish(43))
    # Or on another person's account
    scene.github.lists(44, "bob", kind="User")
    refused_as("not_account_owner", lambda: finish(44))
    # Then nothing was claimed, and each token was revoked all the same
    assert scene.store.holders == {}
    assert scene.store.audit_events == []
    assert len(scene.github.revoked) == 3


def test_github_declining_the_authorization_claims_nothing(scene: Scene) -> None:
    principal, session = scene.admin()
    started = scene.installations.start(principal, session, 42)
    refused_as(
        "github_refused",
        lambda: scene.installations.finish(
            started.secret, _state(started.location), None, "access_denied"
        ),
    )
    assert scene.store.holders == {}
    assert scene.store.flows == {}


def test_an_installation_another_organization_holds_is_refused_with_409(scene: Scene) -> None:
    # Given an installation connected to one organization
    scene.connect(42, "org-other")
    before = scene.written()
    # When an admin of another organization, who owns it on GitHub, connects it
    with pytest.raises(GitHubInstallationTaken) as taken:
        scene.connect(42, "org-acme")
    # Then it is a conflict, and nothing was written for them
    assert taken.value.http_status == 409
    assert scene.installations.holder_of(42) == "org-other"
    assert scene.written() == before


def test_an_organization_holds_at_most_its_limit(scene: Scene) -> None:
    # Given an organization holding as many installations as it may
    scene.connect(1)
    scene.connect(2)
    before = scene.written()
    # When it connects one more
    with pytest.raises(GitHubInstallationTaken) as full:
        scene.connect(3)
    # Then it is refused, saying why, and nothing was written
    assert "already holds 2" in full.value.message
    assert scene.written() == before


def test_connecting_a_held_installation_again_records_the_new_proof(scene: Scene) -> None:
    # Given an installation held and used by one binding
    scene.connect(42)
    scene.store.use("org-acme", 42)
    # When an admin connects it again, as another GitHub user
    scene.github.person = GitHubUser("carol", 3)
    scene.connect(42)
    # Then the proof is the new one, the binding count stays, and both are audited
    held = scene.store.held("org-acme", 42)
    assert held is not None
    assert (held.verified_github_user, held.bindings) == ("carol", 1)
    assert [e.details["github_user"] for e in scene.store.audit_events] == ["alice", "carol"]


def test_an_admin_lists_and_releases_what_the_organization_holds(scene: Scene) -> None:
    # Given an organization holding two installations, and another holding one
    scene.connect(10)
    scene.connect(9)
    scene.connect(5, "org-other")
    admin, _ = scene.admin()
    # Then it lists its own, in ID order
    assert [i.installation_id for i in scene.installations.list(admin)] == [9, 10]
    # When it releases one
    scene.installations.release(admin, 9)
    # Then it holds it no more, and the release is audited
    assert [i.installation_id for i in scene.installations.list(admin)] == [10]
    assert scene.installations.holder_of(9) is None
    released = scene.store.audit_events[-1]
    assert (released.type, released.actor) == ("github.installation.released", admin.ref)
    assert released.details == {"installation_id": "9", "reason": "released"}


def test_a_release_while_bound_or_of_another_organizations_is_refused(scene: Scene) -> None:
    # Given an installation used by a binding, and one another organization holds
    scene.connect(42)
    scene.store.use("org-acme", 42)
    scene.connect(7, "org-other")
    admin, _ = scene.admin()
    before = scene.written()
    # When the admin releases each
    with pytest.raises(Conflict) as bound:
        scene.installations.release(admin, 42)
    with pytest.raises(NotFound):
        scene.installations.release(admin, 7)
    # Then the bound one is a 409, the other is not found, and nothing was written
    assert bound.value.http_status == 409
    assert "still used by 1" in bound.value.message
    assert scene.written() == before


def test_only_admins_connect_or_release_and_readers_may_list(scene: Scene) -> None:
    scene.connect(42)
    reader = Principal(
        PrincipalKind.USER, "web-r", "org-acme", frozenset({Permission.ORGANIZATION_READ}), "r"
    )
    with pytest.raises(Forbidden):
        scene.installations.start(reader, "session", 42)
    with pytest.raises(Forbidden):
        scene.installations.release(reader, 42)
    assert [i.installation_id for i in scene.installations.list(reader)] == [42]


def test_connecting_needs_the_apps_settings() -> None:
    unconfigured = Scene(
        ConnectConfig(CONFIG.web_url, CONFIG.api_url, None, None, None, max_installations=2)
    )
    principal, session = unconfigured.admin()
    with pytest.raises(GitHubNotConfigured):
        unconfigured.installations.start(principal, session, 42)
    assert unconfigured.store.flows == {}


def test_a_flow_started_is_fresh_for_its_lifetime_only(scene: Scene) -> None:
    principal, session = scene.admin()
    started = scene.installations.start(principal, session, None)
    scene.clock.advance(CONNECT_LIFETIME - timedelta(seconds=1))
    # Still fresh: the setup callback is accepted
    scene.installations.setup(started.secret, _state(started.location), "42")
    assert scene.store.flows[handle_hash(started.secret)].installation_id == 42
