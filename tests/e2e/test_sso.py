"""Single sign-on end to end over HTTP: the dashboard and `runplane login` sign in
through the embedded stack's sign-in broker (the hosted UI's stand-in), which
federates to a fake OpenID Connect provider and a fake SAML provider, each bound to
its own organization."""

from __future__ import annotations

import html
import json
import re
import secrets
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

import pytest
import requests

from runplane import cli
from runplane.client import Client, Connection
from runplane.domain.identity import ROLES, Principal
from runplane.local.federation import BrokerClient, FederationBroker, OidcProvider, SamlProvider
from runplane.local.stack import LOCAL_AUDIENCE, free_port
from runplane.settings import Settings
from runplane.wiring import build_services, install, services
from tests.e2e.conftest import Local, unique
from tests.e2e.dashboard_listing import every_listing_page
from tests.e2e.test_dashboard_sign_in import web_sessions
from tests.fake_oidc import FakeOidcProvider, OidcUser
from tests.fake_saml import EMAIL, GROUPS, FakeSamlProvider, SamlUser

DASHBOARD_CLIENT = "dashboard"


class ShiftedClock:
    """The real time, plus however far a test has moved it on."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


@dataclass
class Sso:
    local: Local
    broker: FederationBroker
    oidc: FakeOidcProvider
    saml: FakeSamlProvider
    clock: ShiftedClock
    okta_org: str
    corp_org: str
    corp_name: str
    corp_token: str


@pytest.fixture
def sso(local: Local) -> Iterator[Sso]:
    built = local.stack.services
    assert built is not None
    assert local.stack.issuer is not None
    oidc = FakeOidcProvider("runplane-broker", secrets.token_urlsafe(16)).start()
    saml = FakeSamlProvider().start()
    okta_org = built.workspaces.organization_id_of(local.organization)
    corp_name, corp_token = local.other_organization(unique("corp"))
    corp_org = built.workspaces.organization_id_of(corp_name)
    clock = ShiftedClock()
    callback = f"{local.url}/ui/oauth2/callback"
    ports = (free_port(), free_port())
    dashboard_secret = secrets.token_urlsafe(24)
    broker = FederationBroker(
        local.stack.issuer,
        (
            BrokerClient(
                DASHBOARD_CLIENT,
                (callback,),
                secret=dashboard_secret,
                logout_uris=(f"{local.url}/ui/sign-in",),
            ),
            # The CLI's public client is the API's audience, as in a deployment.
            BrokerClient(LOCAL_AUDIENCE, tuple(f"http://127.0.0.1:{p}/callback" for p in ports)),
        ),
        (
            OidcProvider(
                "Okta",
                okta_org,
                oidc.url,
                oidc.client_id,
                oidc.client_secret,
                roles={"platform-admins": "admin", "engineers": "developer"},
            ),
            SamlProvider(
                "Corp",
                corp_org,
                saml.sso_url,
                saml.entity_id,
                saml.certificate_pem,
                groups_attribute=GROUPS,
                email_attribute=EMAIL,
                roles={"ops": "operator"},
            ),
        ),
        clock.now,
        refresh_lifetime=timedelta(hours=3),
    ).start()
    settings = Settings.model_validate(
        {
            **built.settings.model_dump(),
            "jwt_issuer": broker.issuer,
            "jwt_jwks": json.dumps(broker.jwks()),
            "sign_in_domain": broker.url,
            "sign_in_client_id": DASHBOARD_CLIENT,
            "sign_in_client_secret": dashboard_secret,
            "sign_in_redirect_uri": callback,
            "sso_providers": broker.bindings(),
            "cli_sign_in_domain": broker.url,
            "cli_sign_in_client_id": LOCAL_AUDIENCE,
            "cli_sign_in_ports": ",".join(str(p) for p in ports),
        }
    )
    # The same stack, with single sign-on configured (API tokens keep working).
    install(
        build_services(
            settings,
            clock=clock,
            verifier=local.stack.issuer.verifier(),
            launcher=built.launcher,
        )
    )
    try:
        yield Sso(local, broker, oidc, saml, clock, okta_org, corp_org, corp_name, corp_token)
    finally:
        broker.stop()
        oidc.stop()
        saml.stop()
        local.stack.activate()


def browse(browser: requests.Session, url: str, provider: str) -> requests.Response:
    """Follow a sign-in as a browser would: redirects, the broker's provider choice,
    and the SAML provider's self-submitting form."""
    answer = browser.get(url, timeout=30)
    for _ in range(5):
        chooser = re.search(rf'<a href="([^"]+)">{provider}</a>', answer.text)
        form = re.search(r'<form method="post" action="([^"]+)">(.*?)</form>', answer.text)
        if chooser:
            answer = browser.get(_absolute(answer.url, html.unescape(chooser[1])), timeout=30)
        elif form:
            fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form[2]))
            data = {k: html.unescape(v) for k, v in fields.items()}
            answer = browser.post(html.unescape(form[1]), data=data, timeout=30)
        else:
            return answer
    raise AssertionError("the sign-in did not finish")


def _absolute(base: str, href: str) -> str:
    return href if href.startswith("http") else re.sub(r"(https?://[^/]+).*", r"\1", base) + href


def dashboard_sign_in(sso: Sso, provider: str) -> tuple[requests.Session, requests.Response]:
    browser = requests.Session()
    landing = browse(browser, f"{sso.local.url}/ui/sign-in", provider)
    return browser, landing


def session_principal(browser: requests.Session) -> Principal:
    return services().web_sessions.authenticate(browser.cookies.get("runplane_session"))


def test_an_oidc_user_lands_in_the_providers_organization_with_mapped_roles(sso: Sso) -> None:
    # Given an Okta user in two groups, whose provider also asserts the other organization
    sso.oidc.users["alice"] = OidcUser(
        "alice@acme.example",
        ["platform-admins", "dev"],
        extra={"custom:organization": sso.corp_org, "organization": sso.corp_org},
    )
    sso.oidc.login_as = "alice"
    mine = sso.local.client.create_workspace(unique("sso-mine"))["name"]
    theirs = Client(Connection(sso.local.url, sso.corp_token, sso.corp_name)).create_workspace(
        unique("sso-theirs")
    )["name"]
    # When she signs in to the dashboard through Okta
    browser, landing = dashboard_sign_in(sso, "Okta")
    # Then she has a session in Okta's organization, with the mapped role and her groups
    assert landing.status_code == 200, landing.text
    principal = session_principal(browser)
    assert principal.organization_id == sso.okta_org
    assert principal.permissions == ROLES["admin"]
    assert set(principal.groups) == {"platform-admins", "dev"}
    assert principal.user == "Okta_alice"
    listing = every_listing_page(browser, sso.local.url)
    assert mine in listing
    assert theirs not in listing


def test_a_saml_user_lands_in_the_providers_organization_whatever_it_asserts(sso: Sso) -> None:
    # Given a SAML user whose groups include one named like a role, and who asserts
    # an organization attribute naming the OIDC provider's organization
    sso.saml.users["bob"] = SamlUser(
        "bob@corp.example", ["ops", "admin"], extra={"custom:organization": sso.okta_org}
    )
    sso.saml.login_as = "bob"
    # When he signs in through the SAML provider
    browser, landing = dashboard_sign_in(sso, "Corp")
    # Then he is in the SAML provider's organization with the mapped role only
    assert landing.status_code == 200, landing.text
    principal = session_principal(browser)
    assert principal.organization_id == sso.corp_org
    assert principal.permissions == ROLES["operator"]
    assert set(principal.groups) == {"ops", "admin"}


def test_a_group_change_at_the_provider_takes_effect_at_the_next_sign_in(sso: Sso) -> None:
    # Given an engineer signed in
    sso.oidc.users["carol"] = OidcUser("carol@acme.example", ["engineers"])
    sso.oidc.login_as = "carol"
    first, _ = dashboard_sign_in(sso, "Okta")
    assert session_principal(first).permissions == ROLES["developer"]
    # When the provider moves her to the administrators
    sso.oidc.users["carol"].groups = ["platform-admins"]
    # Then her open session keeps what it had, and her next sign-in has the new role
    assert session_principal(first).permissions == ROLES["developer"]
    second, _ = dashboard_sign_in(sso, "Okta")
    assert session_principal(second).permissions == ROLES["admin"]
    assert session_principal(second).groups == ("platform-admins",)


def test_a_removed_user_cannot_sign_in_again_and_loses_the_dashboard_by_token_expiry(
    sso: Sso,
) -> None:
    # Given a user signed in to the dashboard
    sso.oidc.users["dave"] = OidcUser("dave@acme.example", ["engineers"])
    sso.oidc.login_as = "dave"
    browser, _ = dashboard_sign_in(sso, "Okta")
    assert browser.get(f"{sso.local.url}/", timeout=30).status_code == 200
    # When the provider removes him
    del sso.oidc.users["dave"]
    sessions = web_sessions(sso.local)
    # Then a new sign-in is refused and opens no session
    refused = browse(requests.Session(), f"{sso.local.url}/ui/sign-in", "Okta")
    assert refused.status_code == 403
    assert "(provider_refused)" in refused.text
    assert web_sessions(sso.local) == sessions
    # And his open session ends when the ID token it was opened with expires (1 hour),
    # not after the dashboard's usual 8 hours
    sso.clock.offset = timedelta(minutes=59)
    assert browser.get(f"{sso.local.url}/", timeout=30, allow_redirects=False).status_code == 200
    sso.clock.offset = timedelta(minutes=61)
    ended = browser.get(f"{sso.local.url}/", timeout=30, allow_redirects=False)
    assert ended.status_code != 200


@pytest.mark.parametrize("misbehaviour", ["oidc_key", "oidc_audience", "saml_key", "saml_unsigned"])
def test_a_provider_answer_that_does_not_verify_signs_nobody_in(
    sso: Sso, misbehaviour: str
) -> None:
    # Given a provider whose answer is signed by another key, or is for another client
    sso.oidc.users["erin"] = OidcUser("erin@acme.example", ["platform-admins"])
    sso.saml.users["erin"] = SamlUser("erin@corp.example", ["ops"])
    sso.oidc.login_as = sso.saml.login_as = "erin"
    sso.oidc.rogue_key = misbehaviour == "oidc_key"
    sso.oidc.audience = "someone-else" if misbehaviour == "oidc_audience" else None
    sso.saml.rogue_key = misbehaviour == "saml_key"
    sso.saml.unsigned = misbehaviour == "saml_unsigned"
    sessions = web_sessions(sso.local)
    # When someone signs in through it
    browser, landing = dashboard_sign_in(sso, "Okta" if misbehaviour.startswith("oidc") else "Corp")
    # Then nobody is signed in and nothing is written
    assert landing.status_code in (400, 403), landing.text
    assert "runplane_session" not in browser.cookies
    assert web_sessions(sso.local) == sessions


def test_a_replayed_saml_response_signs_nobody_in(sso: Sso) -> None:
    # Given a SAML user who signed in once
    sso.saml.users["frank"] = SamlUser("frank@corp.example", ["ops"])
    sso.saml.login_as = "frank"
    dashboard_sign_in(sso, "Corp")
    captured = dict(sso.saml.last_form)
    sessions = web_sessions(sso.local)
    # When an attacker posts the same response again (in a sign-in of their own)
    attacker = requests.Session()
    start = attacker.get(f"{sso.local.url}/ui/sign-in", timeout=30, allow_redirects=False)
    chooser = attacker.get(start.headers["Location"], timeout=30)
    link = re.search(r'<a href="([^"]+)">Corp</a>', chooser.text)
    assert link is not None
    to_idp = attacker.get(
        _absolute(chooser.url, html.unescape(link[1])), timeout=30, allow_redirects=False
    )
    relay = re.search(r"RelayState=([^&]+)", to_idp.headers["Location"])
    assert relay is not None
    replayed = attacker.post(
        sso.broker.acs_url,
        data={
            "SAMLResponse": captured["SAMLResponse"],
            "RelayState": unquote(relay[1]),
        },
        timeout=30,
    )
    # Then it is refused and nothing is written
    assert replayed.status_code == 400
    assert "saml_" in replayed.text
    assert "runplane_session" not in attacker.cookies
    assert web_sessions(sso.local) == sessions


def cli_login(sso: Sso, path: Path, monkeypatch: pytest.MonkeyPatch, provider: str) -> int:
    """`runplane login`, with the test as the browser it opens."""
    finished: list[requests.Response] = []

    def open_browser(url: str) -> bool:
        threading.Thread(
            target=lambda: finished.append(browse(requests.Session(), url, provider)),
            daemon=True,
        ).start()
        return True

    monkeypatch.setattr("webbrowser.open", open_browser)
    return cli.main(
        ["login", "--url", sso.local.url, "--credentials", str(path), "--timeout", "60"]
    )


def test_the_cli_signs_in_through_the_loopback_flow_and_refreshes(
    sso: Sso, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an Okta engineer and a workspace of her organization
    sso.oidc.users["gina"] = OidcUser("gina@acme.example", ["engineers"])
    sso.oidc.login_as = "gina"
    workspace = sso.local.client.create_workspace(unique("sso-cli"))["name"]
    path = tmp_path / "runplane" / "credentials.json"
    # When she runs `runplane login` and finishes in the browser
    assert cli_login(sso, path, monkeypatch, "Okta") == 0
    # Then the credential is saved for her organization, readable by her only
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text())
    assert saved["organization"] == sso.local.organization
    assert saved["url"] == sso.local.url
    assert {"token", "refresh_token", "expires_at"} <= set(saved)
    capsys.readouterr()
    # And the CLI uses it
    assert cli.main(["workspace", "list", "--credentials", str(path)]) == 0
    assert workspace in capsys.readouterr().out
    # When the ID token has expired
    sso.clock.offset = timedelta(minutes=70)
    # Then the CLI renews it with the refresh token, saves it (still 0600) and goes on
    assert cli.main(["workspace", "list", "--credentials", str(path)]) == 0
    assert workspace in capsys.readouterr().out
    renewed = json.loads(path.read_text())
    assert renewed["token"] != saved["token"]
    assert renewed["refresh_token"] == saved["refresh_token"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # When the refresh token has expired too, she is told to sign in again
    sso.clock.offset = timedelta(hours=5)
    assert cli.main(["workspace", "list", "--credentials", str(path)]) != 0
    assert "sign in again" in capsys.readouterr().err
    # And `runplane logout` forgets the credential
    assert cli.main(["logout", "--credentials", str(path)]) == 0
    assert not path.exists()


def test_the_cli_refuses_a_credential_others_can_read(
    sso: Sso, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sso.saml.users["hal"] = SamlUser("hal@corp.example", ["ops"])
    sso.saml.login_as = "hal"
    path = tmp_path / "credentials.json"
    assert cli_login(sso, path, monkeypatch, "Corp") == 0
    # The SAML provider's organization, whatever the CLI was started with
    assert json.loads(path.read_text())["organization"] == sso.corp_name
    path.chmod(0o644)
    capsys.readouterr()
    assert cli.main(["workspace", "list", "--credentials", str(path)]) != 0
    assert "others may read it" in capsys.readouterr().err


def test_the_sign_in_configuration_is_public_and_names_nothing_secret(sso: Sso) -> None:
    answer = requests.get(f"{sso.local.url}/api/v1/sign-in/config", timeout=30)
    assert answer.status_code == 200
    body = answer.json()
    assert body["client_id"] == LOCAL_AUDIENCE
    assert body["authorize_endpoint"] == f"{sso.broker.url}/oauth2/authorize"
    assert all(u.startswith("http://127.0.0.1:") for u in body["redirect_uris"])
    assert "secret" not in answer.text
