"""Dashboard sign-in through a Cognito hosted UI, over real HTTP end to end: the
browser (requests), the dashboard behind the embedded gateway, and a fake hosted
UI on 127.0.0.1 that issues codes and RS256 ID tokens."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import requests

from runplane.client import Client, Connection
from runplane.domain.identity import Permission
from runplane.settings import Settings
from runplane.wiring import build_services, install
from tests.e2e.conftest import Local, unique
from tests.e2e.dashboard_listing import every_listing_page
from tests.e2e.test_dashboard import form_fields
from tests.fake_cognito import FakeCognito, User

CLIENT_ID = "dashboard-client"


class ShiftedClock:
    """The real time, plus however far a test has moved it on."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


@dataclass
class HostedUi:
    local: Local
    cognito: FakeCognito
    clock: ShiftedClock
    org_id: str

    @property
    def callback(self) -> str:
        return f"{self.local.url}/ui/oauth2/callback"


@pytest.fixture
def hosted_ui(local: Local) -> Iterator[HostedUi]:
    services = local.stack.services
    assert services is not None
    callback = f"{local.url}/ui/oauth2/callback"
    cognito = FakeCognito(
        client_id=CLIENT_ID,
        client_secret=secrets.token_urlsafe(24),
        redirect_uris=(callback,),
        logout_uris=(f"{local.url}/ui/sign-in",),
    ).start()
    settings = Settings.model_validate(
        {
            **services.settings.model_dump(),
            "jwt_issuer": cognito.issuer,
            "sign_in_domain": cognito.url,
            "sign_in_client_id": CLIENT_ID,
            "sign_in_client_secret": cognito.client_secret,
            "sign_in_redirect_uri": callback,
        }
    )
    clock = ShiftedClock()
    assert local.stack.issuer is not None
    # The same stack, with hosted-UI sign-in configured (API tokens keep working).
    install(
        build_services(
            settings,
            clock=clock,
            verifier=local.stack.issuer.verifier(),
            launcher=services.launcher,
        )
    )
    try:
        org_id = services.workspaces.organization_id_of(local.organization)
        yield HostedUi(local, cognito, clock, org_id)
    finally:
        cognito.stop()
        local.stack.activate()


def web_sessions(local: Local) -> int:
    """How many dashboard sessions the table holds."""
    services = local.stack.services
    assert services is not None
    table = boto3.client(
        "dynamodb",
        region_name=services.settings.region,
        endpoint_url=services.settings.aws_endpoint_url,
    )
    pages = table.get_paginator("scan").paginate(
        TableName=services.settings.table_name,
        FilterExpression="begins_with(PK, :p)",
        ExpressionAttributeValues={":p": {"S": "WEBSESSION#"}},
        Select="COUNT",
    )
    return sum(page["Count"] for page in pages)


def authorized(ui: HostedUi, user: User) -> tuple[requests.Session, str]:
    """A browser that started a sign-in and came back from the hosted UI: the
    browser, and the callback URL it was sent to (not yet opened)."""
    browser = requests.Session()
    ui.cognito.user = user
    start = browser.get(f"{ui.local.url}/ui/sign-in", allow_redirects=False, timeout=30)
    assert start.status_code == 303, start.text
    authorize = browser.get(start.headers["Location"], allow_redirects=False, timeout=30)
    assert authorize.status_code == 302, authorize.text
    return browser, authorize.headers["Location"]


def with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()} | changes
    return parts._replace(query="&".join(f"{k}={v}" for k, v in query.items())).geturl()


def refused(answer: requests.Response, reason: str) -> None:
    assert answer.status_code == 403, answer.text
    assert "SIGN_IN_REFUSED" in answer.text
    assert f"({reason})" in answer.text
    assert "runplane_session" not in answer.headers.get("Set-Cookie", "")


def test_hosted_ui_sign_in_lands_on_the_users_own_organization(hosted_ui: HostedUi) -> None:
    local, cognito = hosted_ui.local, hosted_ui.cognito
    # Given two organizations with a workspace each, and a person in each
    mine = local.client.create_workspace(unique("signin-mine"))["name"]
    other_name, other_token = local.other_organization(unique("signin-other"))
    services = local.stack.services
    assert services is not None
    other_id = services.workspaces.organization_id_of(other_name)
    theirs = Client(Connection(local.url, other_token, other_name)).create_workspace(
        unique("signin-theirs")
    )["name"]
    signed_in_at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    alice = User("alice", hosted_ui.org_id, ("developer",), auth_time=signed_in_at)
    bob = User("bob", other_id, ("reader",))

    # When Alice starts signing in
    browser = requests.Session()
    cognito.user = alice
    start = browser.get(f"{local.url}/ui/sign-in", allow_redirects=False, timeout=30)

    # Then she is sent to the hosted UI with state, nonce and an S256 PKCE challenge,
    # bound to her browser by a short-lived HttpOnly SameSite=Lax cookie
    assert start.status_code == 303
    location = urlsplit(start.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == (
        f"{cognito.url}/oauth2/authorize"
    )
    asked = {k: v[-1] for k, v in parse_qs(location.query).items()}
    assert asked["response_type"] == "code"
    assert asked["client_id"] == CLIENT_ID
    assert asked["redirect_uri"] == hosted_ui.callback
    assert asked["code_challenge_method"] == "S256"
    assert {"state", "nonce", "code_challenge"} <= set(asked)
    assert set(asked["scope"].split()) == {"openid", "email", "profile"}
    pre_session = start.cookies["runplane_sign_in"]
    assert pre_session is not None
    flags = [f.strip() for f in start.headers["Set-Cookie"].split(";")[1:]]
    assert {"Path=/ui/oauth2/", "HttpOnly", "SameSite=Lax"} <= set(flags)
    assert any(f.startswith("Max-Age=") and 0 < int(f[8:]) <= 600 for f in flags)
    assert pre_session not in start.headers["Location"]

    # When the hosted UI sends her back with a code
    back = browser.get(start.headers["Location"], allow_redirects=False, timeout=30)
    landing = browser.get(back.headers["Location"], allow_redirects=False, timeout=30)

    # Then a strict session cookie is set, the pre-session is cleared, and the page
    # moves her on to / from the dashboard's own site
    assert landing.status_code == 200, landing.text
    assert landing.headers["Refresh"] == "0; url=/"
    assert 'id="signed-in-notice"' in landing.text
    set_cookies = landing.raw.headers.getlist("Set-Cookie")
    session_cookie = next(c for c in set_cookies if c.startswith("runplane_session="))
    assert {"Path=/", "HttpOnly", "SameSite=Strict"} <= {
        f.strip() for f in session_cookie.split(";")[1:]
    }
    assert any(c.startswith("runplane_sign_in=;") and "Max-Age=0" in c for c in set_cookies)
    session = browser.cookies["runplane_session"]
    assert session is not None
    for secret in (session, pre_session):
        assert secret not in landing.text
    assert cognito.redeemed == 1

    # And the workspace list shows her organization's workspaces only
    listing = every_listing_page(browser, local.url)
    assert mine in listing
    assert theirs not in listing
    assert "User alice (dashboard)" in listing

    # And the session carries her organization, her roles' permissions, and the time
    # she authenticated at the hosted UI (what step-up rules read)
    principal = services.web_sessions.authenticate(browser.cookies["runplane_session"])
    assert principal.organization_id == hosted_ui.org_id
    assert Permission.RUN_CREATE in principal.permissions
    assert Permission.TOKEN_MANAGE not in principal.permissions
    assert principal.auth_time == signed_in_at

    # When Bob, of the other organization, signs in
    bobs, callback = authorized(hosted_ui, bob)
    assert bobs.get(callback, allow_redirects=False, timeout=30).status_code == 200
    listing = every_listing_page(bobs, local.url)

    # Then he sees his organization's workspace, not Alice's
    assert theirs in listing
    assert mine not in listing


def test_a_callback_whose_state_does_not_match_is_refused(hosted_ui: HostedUi) -> None:
    # Given a browser back from the hosted UI, and the sessions there are
    browser, callback = authorized(hosted_ui, User("carol", hosted_ui.org_id))
    before = web_sessions(hosted_ui.local)

    # When the callback arrives with another state (a forged or crossed answer)
    answer = browser.get(
        with_query(callback, state="forged-state"), allow_redirects=False, timeout=30
    )

    # Then it is refused, the code is never redeemed and no session exists
    refused(answer, "state_mismatch")
    assert hosted_ui.cognito.redeemed == 0
    assert hosted_ui.cognito.refusals == []
    assert web_sessions(hosted_ui.local) == before

    # And a callback from a browser that never started a sign-in is refused too
    stranger = requests.get(callback, allow_redirects=False, timeout=30)
    refused(stranger, "no_pre_session")


def test_a_code_is_redeemed_once(hosted_ui: HostedUi) -> None:
    local = hosted_ui.local
    # Given a completed sign-in
    browser, callback = authorized(hosted_ui, User("dave", hosted_ui.org_id))
    pre_session = browser.cookies["runplane_sign_in"]
    assert pre_session is not None
    assert browser.get(callback, allow_redirects=False, timeout=30).status_code == 200
    before = web_sessions(local)

    # When the same callback is replayed with the same pre-session
    replay = requests.get(
        callback, cookies={"runplane_sign_in": pre_session}, allow_redirects=False, timeout=30
    )
    # Then the used pre-session refuses it before the code is sent anywhere
    refused(replay, "pre_session_used")

    # When the code is replayed through a fresh sign-in of another browser
    other, fresh = authorized(hosted_ui, User("dave", hosted_ui.org_id))
    code = parse_qs(urlsplit(callback).query)["code"][0]
    answer = other.get(with_query(fresh, code=code), allow_redirects=False, timeout=30)

    # Then the hosted UI refuses the used code and nothing is created
    refused(answer, "code_refused")
    assert hosted_ui.cognito.refusals == ["code_replayed"]
    assert web_sessions(local) == before


def test_a_code_redeemed_without_its_pkce_verifier_is_refused(hosted_ui: HostedUi) -> None:
    # Given a code issued to one browser's sign-in (its PKCE challenge)
    _, victims = authorized(hosted_ui, User("erin", hosted_ui.org_id))
    code = parse_qs(urlsplit(victims).query)["code"][0]
    before = web_sessions(hosted_ui.local)

    # When another browser injects that code into its own sign-in
    attacker, own = authorized(hosted_ui, User("mallory", hosted_ui.org_id))
    answer = attacker.get(with_query(own, code=code), allow_redirects=False, timeout=30)

    # Then the token endpoint refuses the other browser's verifier
    refused(answer, "code_refused")
    assert hosted_ui.cognito.refusals == ["pkce"]
    assert hosted_ui.cognito.redeemed == 0
    assert web_sessions(hosted_ui.local) == before


def test_an_id_token_for_another_audience_is_refused(hosted_ui: HostedUi) -> None:
    # Given a hosted UI that answers with an ID token for another app client
    hosted_ui.cognito.audience = "another-client"
    browser, callback = authorized(hosted_ui, User("frank", hosted_ui.org_id))
    before = web_sessions(hosted_ui.local)

    # When the browser comes back
    answer = browser.get(callback, allow_redirects=False, timeout=30)

    # Then the token is refused and no session exists
    refused(answer, "wrong_audience")
    assert web_sessions(hosted_ui.local) == before


def test_an_id_token_with_another_nonce_is_refused(hosted_ui: HostedUi) -> None:
    # Given a hosted UI that answers with an ID token minted for another sign-in
    hosted_ui.cognito.nonce = "nonce-of-another-sign-in"
    browser, callback = authorized(hosted_ui, User("grace", hosted_ui.org_id))
    before = web_sessions(hosted_ui.local)

    # When the browser comes back
    answer = browser.get(callback, allow_redirects=False, timeout=30)

    # Then it is refused, and the error page repeats no token
    refused(answer, "nonce_mismatch")
    assert "nonce-of-another-sign-in" not in answer.text
    assert web_sessions(hosted_ui.local) == before


def test_people_of_no_known_organization_are_refused(hosted_ui: HostedUi) -> None:
    before = web_sessions(hosted_ui.local)
    for user in (User("henry", None), User("ivy", "org-does-not-exist")):
        # Given a person the hosted UI knows but no Runplane organization does
        browser, callback = authorized(hosted_ui, user)

        # When they come back from the hosted UI
        answer = browser.get(callback, allow_redirects=False, timeout=30)

        # Then sign-in is refused and nothing is created
        refused(answer, "unknown_user")
    assert web_sessions(hosted_ui.local) == before


def test_a_sign_in_finished_too_late_is_refused(hosted_ui: HostedUi) -> None:
    # Given a browser back from the hosted UI after the pre-session's ten minutes
    browser, callback = authorized(hosted_ui, User("judy", hosted_ui.org_id))
    hosted_ui.clock.offset = timedelta(minutes=11)

    # When the callback is opened
    answer = browser.get(callback, allow_redirects=False, timeout=30)

    # Then it is refused without redeeming the code
    refused(answer, "pre_session_expired")
    assert hosted_ui.cognito.redeemed == 0


def test_a_refused_client_secret_is_reported_as_unavailable(hosted_ui: HostedUi) -> None:
    # Given a hosted UI whose app client secret no longer matches the dashboard's
    browser, callback = authorized(hosted_ui, User("leo", hosted_ui.org_id))
    configured = hosted_ui.cognito.client_secret
    hosted_ui.cognito.client_secret = "rotated-elsewhere"
    before = web_sessions(hosted_ui.local)

    # When the browser comes back
    answer = browser.get(callback, allow_redirects=False, timeout=30)

    # Then sign-in is unavailable (not the person's fault), nothing is created, and
    # the secret appears nowhere in the answer
    assert answer.status_code == 503, answer.text
    assert "SIGN_IN_UNAVAILABLE" in answer.text
    assert "(invalid_client)" in answer.text
    assert configured not in answer.text
    assert hosted_ui.cognito.refusals == ["client"]
    assert web_sessions(hosted_ui.local) == before


def test_a_sign_in_the_hosted_ui_declined_is_refused(hosted_ui: HostedUi) -> None:
    # Given a browser the hosted UI sent back with an error instead of a code
    browser, callback = authorized(hosted_ui, User("mia", hosted_ui.org_id))
    state = parse_qs(urlsplit(callback).query)["state"][0]
    declined = f"{hosted_ui.callback}?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E"

    # When the callback is opened
    answer = browser.get(f"{declined}&state={state}", allow_redirects=False, timeout=30)

    # Then it is refused without repeating the provider's text
    refused(answer, "provider_refused")
    assert "no</b>" not in answer.text
    assert hosted_ui.cognito.redeemed == 0


def test_sign_out_ends_the_session_and_the_hosted_ui_session(hosted_ui: HostedUi) -> None:
    local = hosted_ui.local
    # Given a person signed in through the hosted UI
    browser, callback = authorized(hosted_ui, User("kim", hosted_ui.org_id))
    assert browser.get(callback, allow_redirects=False, timeout=30).status_code == 200
    secret = browser.cookies["runplane_session"]
    assert secret is not None
    page = browser.get(f"{local.url}/", timeout=30).text

    # When they sign out
    out = browser.post(
        f"{local.url}/ui/logout",
        data={"csrf": form_fields(page, "logout-form")["csrf"]},
        allow_redirects=False,
        timeout=30,
    )

    # Then the browser goes to the hosted UI's logout, which comes back to sign-in
    assert out.status_code == 303
    assert "Max-Age=0" in out.headers["Set-Cookie"]
    logout = urlsplit(out.headers["Location"])
    assert f"{logout.scheme}://{logout.netloc}{logout.path}" == f"{hosted_ui.cognito.url}/logout"
    assert parse_qs(logout.query) == {
        "client_id": [CLIENT_ID],
        "logout_uri": [f"{local.url}/ui/sign-in"],
    }
    back = browser.get(out.headers["Location"], allow_redirects=False, timeout=30)
    assert back.headers["Location"] == f"{local.url}/ui/sign-in"
    assert hosted_ui.cognito.logouts == [f"{local.url}/ui/sign-in"]

    # And the session is gone on the server: its cookie no longer opens a page
    again = requests.get(
        f"{local.url}/", cookies={"runplane_session": secret}, allow_redirects=False, timeout=30
    )
    assert again.status_code == 303
    assert again.headers["Location"] == "/ui/sign-in"


def test_without_hosted_ui_settings_the_callback_does_not_exist(local: Local) -> None:
    # Given the embedded stack's defaults (login links only)
    # When the callback is opened
    answer = requests.get(
        f"{local.url}/ui/oauth2/callback?code=x&state=y", allow_redirects=False, timeout=30
    )
    # Then there is no such page, and the sign-in page is the login-link notice
    assert answer.status_code == 404
    notice = requests.get(f"{local.url}/ui/sign-in", allow_redirects=False, timeout=30)
    assert notice.status_code == 401
    assert 'id="sign-in-notice"' in notice.text
