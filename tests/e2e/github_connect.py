"""Connecting a GitHub App installation as a person does: a signed-in dashboard admin
sends the connect form, their browser goes to (fake) GitHub signed in as a GitHub
user, and comes back to the callback. Every hop is real HTTP."""

from __future__ import annotations

from dataclasses import dataclass

import requests

from runplane.client import Client, Connection
from tests.e2e.conftest import Local
from tests.e2e.test_dashboard import form_fields, signed_in
from tests.github_fake import INSTALL_HEADER, USER_HEADER, FakeGitHub


@dataclass
class Hops:
    """What the browser saw: the connect form's answer and the last callback's."""

    started: requests.Response
    finished: requests.Response

    @property
    def connected(self) -> bool:
        return self.finished.status_code == 200 and "connected-notice" in self.finished.text


def organization_id(local: Local, name: str | None = None) -> str:
    services = local.stack.services
    assert services is not None
    return services.workspaces.organization_id_of(name or local.organization)


def connect(
    local: Local,
    browser: requests.Session,
    *,
    github_user: str,
    installation_id: int | None = None,
    new_installation: int | None = None,
    account: str | None = None,
) -> Hops:
    """Run the connect flow in ``browser`` (signed in to the dashboard) as ``github_user``
    on GitHub: for an existing installation, or (``new_installation``) installing the
    App on ``account`` (default: the user's own account)."""
    page = browser.get(f"{local.url}/ui/github", timeout=30)
    assert page.status_code == 200, page.text
    fields = form_fields(page.text, "connect-form")
    fields["installation_id"] = "" if installation_id is None else str(installation_id)
    started = browser.post(
        f"{local.url}/ui/github/connect",
        data=fields,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )
    if started.status_code != 200:
        return Hops(started, started)
    location = started.headers["Refresh"].split("url=", 1)[1]
    github_headers = {USER_HEADER: github_user}
    if new_installation is not None:
        github_headers[INSTALL_HEADER] = str(new_installation)
        if account is not None:
            github_headers["X-Fake-GitHub-Account"] = account
    for _ in range(4):
        # On GitHub's site: no Runplane cookie goes there.
        at_github = requests.get(
            location, headers=github_headers, allow_redirects=False, timeout=30
        )
        assert at_github.status_code == 302, at_github.text
        back = browser.get(at_github.headers["Location"], allow_redirects=False, timeout=30)
        if back.status_code == 303 and "/login/oauth/authorize" in back.headers["Location"]:
            location = back.headers["Location"]  # the setup callback moves on to authorize
            continue
        return Hops(started, back)
    raise AssertionError("the connect flow did not finish")


def ensure_held(
    local: Local,
    fake: FakeGitHub,
    installation_id: int,
    *,
    account: str,
    organization: str | None = None,
) -> None:
    """Make the organization (default: the stack's) hold ``installation_id`` on the
    GitHub organization ``account``, connected by that account's owner."""
    owner = f"{account}-owner"
    fake.organization(account, owners=(owner,))
    fake.install(installation_id, account)
    browser = signed_in(local, organization_id(local, organization))
    hops = connect(local, browser, github_user=owner, installation_id=installation_id)
    assert hops.connected, hops.finished.text


def client_of(local: Local, organization: str, token: str) -> Client:
    return Client(Connection(local.url, token, organization))


def held_once(
    local: Local, installation_id: int, *, account: str, organization: str | None = None
) -> None:
    """``ensure_held`` unless the organization holds the installation now (a test that
    removes its last binding releases it, so a record of an earlier connect is no proof)."""
    from tests.e2e.conftest import _SharedStack

    services = local.stack.services
    assert services is not None
    holder = services.github_installations.holder_of(installation_id)
    if holder == organization_id(local, organization):
        return
    assert _SharedStack.github is not None
    ensure_held(
        local, _SharedStack.github, installation_id, account=account, organization=organization
    )
