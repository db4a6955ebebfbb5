"""Hosted-UI sign-in over the in-memory stores: a pre-session is single use and
short-lived, bound to its browser by ``state`` and to its ID token by ``nonce``, and
consumed before its code is redeemed; any refusal opens no session. The real hosted UI
round trip (HTTP, PKCE, the key set) is end to end: tests/e2e/test_dashboard_sign_in.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from runplane.adapters.hosted_ui import HostedUi
from runplane.adapters.jwt import LocalIssuer
from runplane.domain.capabilities import handle_hash
from runplane.domain.errors import SignInRefused
from runplane.domain.identity import Permission
from runplane.domain.sign_in import PRE_SESSION_LIFETIME, Binding
from runplane.services.sign_in import HostedUiSignIn
from runplane.services.web_sessions import WebSessions
from tests.fakes import FakeClock, SeededIds
from tests.fakes_access import InMemoryPreSessions, InMemoryWebSessions

CLIENT_ID = "dashboard-client"
ISSUER = "https://cognito.example/pool"


class ScriptedHostedUi(HostedUi):
    """The hosted UI's token endpoint without HTTP: each code answers the ID token a
    test scripted for it, once, and the exchanges are recorded."""

    def __init__(self) -> None:
        super().__init__(
            domain="https://auth.example",
            client_id=CLIENT_ID,
            client_secret=lambda: "client-secret",
            redirect_uri="https://runplane.example/ui/sign-in/callback",
        )
        self.id_tokens: dict[str, str] = {}
        self.exchanged: list[str] = []

    def exchange(self, code: str, verifier: str) -> str:
        self.exchanged.append(code)
        return self.id_tokens.pop(code)


@pytest.fixture(scope="module")
def issuer() -> LocalIssuer:
    return LocalIssuer.create(ISSUER, CLIENT_ID)


class Scene:
    def __init__(self, issuer: LocalIssuer, organizations: set[str]) -> None:
        self.clock = FakeClock()
        self.issuer = issuer
        self.pre_sessions = InMemoryPreSessions()
        self.web_session_store = InMemoryWebSessions()
        self.hosted_ui = ScriptedHostedUi()
        self.sign_in = HostedUiSignIn(
            self.clock,
            self.pre_sessions,
            WebSessions(self.clock, SeededIds(), self.web_session_store),
            self.hosted_ui,
            issuer.verifier,
            organizations.__contains__,
        )

    def id_token_for(
        self, secret: str, *, organization: str = "org-acme", nonce: str | None = None
    ) -> str:
        """The ID token the hosted UI answers a sign-in begun with ``secret``."""
        now = self.clock.now()
        return self.issuer.issue(
            subject="ana",
            now=now,
            groups=["admin"],
            auth_time=now - timedelta(seconds=30),
            extra={
                "nonce": nonce or Binding.of(secret).nonce,
                "custom:organization": organization,
            },
        )

    def answer(self, code: str, id_token: str) -> None:
        self.hosted_ui.id_tokens[code] = id_token


@pytest.fixture
def scene(issuer: LocalIssuer) -> Scene:
    return Scene(issuer, {"org-acme"})


def _state(location: str) -> str:
    return parse_qs(urlsplit(location).query)["state"][0]


def refused_as(reason: str, attempt: Callable[[], object]) -> None:
    with pytest.raises(SignInRefused) as refused:
        attempt()
    assert refused.value.reason == reason


def test_a_sign_in_opens_a_session_of_the_users_organization(scene: Scene) -> None:
    # Given a sign-in started in a browser
    started = scene.sign_in.start()
    assert scene.pre_sessions.pre_session_validity(handle_hash(started.secret)) == (
        started.valid_until
    )
    query = parse_qs(urlsplit(started.location).query)
    binding = Binding.of(started.secret)
    assert (query["state"], query["nonce"]) == ([binding.state], [binding.nonce])
    assert query["code_challenge"] == [binding.challenge]
    token = scene.id_token_for(started.secret)
    scene.answer("code-1", token)

    # When the hosted UI sends the browser back with its code
    signed_in = scene.sign_in.finish(started.secret, binding.state, "code-1", None)

    # Then a session of the user's organization and groups is open, and the
    # pre-session is spent
    (session,) = scene.web_session_store.sessions.values()
    assert session.grant.organization_id == "org-acme"
    assert Permission.GITHUB_CONNECT in session.grant.permissions
    assert session.grant.auth_time is not None
    assert signed_in.valid_until == session.grant.valid_until
    assert scene.pre_sessions.pre_sessions == {}


def test_a_second_callback_with_the_same_cookie_is_refused_before_its_code(
    scene: Scene,
) -> None:
    # Given a sign-in finished once
    started = scene.sign_in.start()
    scene.answer("code-1", scene.id_token_for(started.secret))
    state = _state(started.location)
    scene.sign_in.finish(started.secret, state, "code-1", None)
    scene.answer("code-2", scene.id_token_for(started.secret))

    # When the same browser comes back again
    refused_as(
        "pre_session_used", lambda: scene.sign_in.finish(started.secret, state, "code-2", None)
    )

    # Then its code was not redeemed and no second session was opened
    assert scene.hosted_ui.exchanged == ["code-1"]
    assert len(scene.web_session_store.sessions) == 1


def test_a_callback_without_the_browsers_cookie_or_state_is_refused_and_keeps_the_sign_in(
    scene: Scene,
) -> None:
    # Given a sign-in started in a browser
    started = scene.sign_in.start()
    state = _state(started.location)
    # When the callback arrives with no cookie, or with another sign-in's state
    refused_as("no_pre_session", lambda: scene.sign_in.finish(None, state, "code-1", None))
    other = scene.sign_in.start()
    refused_as(
        "state_mismatch",
        lambda: scene.sign_in.finish(started.secret, _state(other.location), "code-1", None),
    )
    # Then no code was redeemed, nothing was opened, and the sign-in may still finish
    assert scene.hosted_ui.exchanged == []
    assert scene.web_session_store.sessions == {}
    assert handle_hash(started.secret) in scene.pre_sessions.pre_sessions


def test_a_sign_in_finished_too_late_is_refused(scene: Scene) -> None:
    # Given a sign-in started longer ago than a pre-session lives
    started = scene.sign_in.start()
    scene.clock.advance(PRE_SESSION_LIFETIME)
    # When the browser comes back
    refused_as(
        "pre_session_expired",
        lambda: scene.sign_in.finish(started.secret, _state(started.location), "code-1", None),
    )
    # Then no code was redeemed and nothing was opened
    assert scene.hosted_ui.exchanged == []
    assert scene.web_session_store.sessions == {}


def test_a_sign_in_the_identity_provider_declined_spends_the_pre_session(scene: Scene) -> None:
    # Given a sign-in the hosted UI answered with an error
    started = scene.sign_in.start()
    state = _state(started.location)
    refused_as(
        "provider_refused",
        lambda: scene.sign_in.finish(started.secret, state, None, "access_denied"),
    )
    # Then nothing was opened, and the pre-session cannot be tried again
    assert scene.web_session_store.sessions == {}
    refused_as("pre_session_used", lambda: scene.sign_in.finish(started.secret, state, "c", None))


def test_an_id_token_for_another_sign_in_or_of_an_unknown_organization_opens_nothing(
    scene: Scene,
) -> None:
    # Given two sign-ins: one answered with another sign-in's nonce, one for a person
    # of an organization that does not exist
    first, second = scene.sign_in.start(), scene.sign_in.start()
    scene.answer("code-1", scene.id_token_for(first.secret, nonce="another-nonce"))
    scene.answer("code-2", scene.id_token_for(second.secret, organization="org-gone"))
    # When each finishes
    refused_as(
        "nonce_mismatch",
        lambda: scene.sign_in.finish(first.secret, _state(first.location), "code-1", None),
    )
    refused_as(
        "unknown_user",
        lambda: scene.sign_in.finish(second.secret, _state(second.location), "code-2", None),
    )
    # Then both codes were redeemed once, both pre-sessions spent, and nothing opened
    assert scene.hosted_ui.exchanged == ["code-1", "code-2"]
    assert scene.pre_sessions.pre_sessions == {}
    assert scene.web_session_store.sessions == {}


def test_a_session_ends_no_later_than_the_id_token_it_was_opened_with(scene: Scene) -> None:
    # Given a sign-in whose ID token expires in an hour (shorter than a dashboard session)
    started = scene.sign_in.start()
    token = scene.id_token_for(started.secret)
    scene.answer("code-1", token)
    expires = scene.issuer.verifier().verify(token, scene.clock.now()).expires_at
    # When it finishes
    signed_in = scene.sign_in.finish(
        started.secret, Binding.of(started.secret).state, "code-1", None
    )
    # Then the session is valid until the token's expiry, not longer
    assert signed_in.valid_until == expires
    (session,) = scene.web_session_store.sessions.values()
    assert session.grant.valid_until == expires
