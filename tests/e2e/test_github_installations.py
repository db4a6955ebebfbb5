"""Which organization holds a GitHub App installation: only one whose signed-in admin
connected it while GitHub showed them administering the installation's account.
Two organizations, real HTTP through the dashboard, the run API, the CLI and a fake
GitHub that checks the App's client secret and the PKCE verifier."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
import requests

from runplane.client import ApiError, Client
from tests.e2e.conftest import Local, unique
from tests.e2e.github_connect import (
    client_of,
    connect,
    organization_id,
)
from tests.e2e.test_dashboard import form_fields, signed_in, signed_in_as
from tests.e2e.test_github import (
    eventually,
    main_tf,
    post_webhook,
    push,
    sha_of,
    table_items,
)
from tests.github_fake import USER_HEADER, FakeGitHub


def _number() -> int:
    return 600_000 + uuid.uuid4().int % 300_000


def _held(local: Local, client: Client | None = None) -> dict[int, dict[str, Any]]:
    listed = (client or local.client).github_installations()
    return {int(entry["installation_id"]): entry for entry in listed}


def _push_to(repository: str, installation_id: int, sha: str) -> dict[str, Any]:
    body: dict[str, Any] = push(repository, sha)
    body["installation"] = {"id": installation_id}
    return body


def test_an_organization_cannot_claim_an_installation_its_people_do_not_administer(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given organization A's GitHub organization with the App installed, and organization B
    number = _number()
    account = f"acme-a-{number}"
    fake_github.organization(account, owners=("alice",), members=("mallory-member",))
    fake_github.install(number, account)
    fake_github.user("mallory")
    b_name, b_token = local.other_organization(unique("org-b"))
    b = client_of(local, b_name, b_token)
    b_admin = signed_in(local, organization_id(local, b_name))
    b_workspace = str(b.create_workspace("squatter")["id"])

    # When B binds a workspace to A's repository with A's installation ID, as before
    with pytest.raises(ApiError) as bound:
        b.bind_github(
            b_workspace, repository=f"{account}/app", branch="main", installation_id=number
        )
    # Then it is refused: B holds no such installation, and nothing is bound
    assert (bound.value.status, bound.value.code) == (409, "GITHUB_INSTALLATION_TAKEN")
    with pytest.raises(ApiError) as nothing:
        b.github_binding(b_workspace)
    assert nothing.value.status == 404

    # When B's admin connects it, signed in to GitHub as someone outside A's organization,
    # or as a plain member of it
    outsider = connect(local, b_admin, github_user="mallory", installation_id=number)
    member = connect(local, b_admin, github_user="mallory-member", installation_id=number)

    # Then both are refused, say why, and B holds nothing
    assert outsider.finished.status_code == 403
    assert "installation_not_yours" in outsider.finished.text
    assert member.finished.status_code == 403
    assert "not_organization_owner" in member.finished.text
    assert number not in _held(local, b)

    # When A's admin connects it, signed in to GitHub as an owner of A's organization
    a_admin = signed_in(local)
    hops = connect(local, a_admin, github_user="alice", installation_id=number)

    # Then A holds it, with who proved it, and the user token was revoked
    assert hops.connected, hops.finished.text
    held = _held(local)[number]
    assert (held["account"], held["account_type"]) == (account, "Organization")
    assert (held["verified_github_user"], held["bindings"]) == ("alice", 0)
    assert fake_github.revoked

    # And even an owner of A's GitHub organization, connecting it for B, is refused: 409
    fake_github.organization(account, owners=("bob-owner",))
    taken = connect(local, b_admin, github_user="bob-owner", installation_id=number)
    assert taken.finished.status_code == 409
    assert "GITHUB_INSTALLATION_TAKEN" in taken.finished.text
    assert number not in _held(local, b)

    # And A's signed pushes reach A's workspace only, even with B bound to the repository
    # through an installation of its own
    own = _number()
    fake_github.organization(f"b-{own}", owners=("bea",))
    fake_github.install(own, f"b-{own}")
    assert connect(local, b_admin, github_user="bea", installation_id=own).connected
    b.bind_github(b_workspace, repository=f"{account}/app", branch="main", installation_id=own)
    a_workspace = str(local.client.create_workspace(unique("gh-owner"))["id"])
    local.client.bind_github(
        a_workspace,
        repository=f"{account}/app",
        branch="main",
        installation_id=number,
        push_run_kind="plan_only",
    )
    sha = sha_of(account + "push")
    fake_github.add_commit(f"{account}/app", sha, {"main.tf": main_tf("a")})
    status, body, _ = post_webhook(local, "push", _push_to(f"{account}/app", number, sha))
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(a_workspace), what="A's run")[0]
    assert local.client.watch(run["id"], timeout=180)["status"] == "succeeded"
    assert b.list_runs(b_workspace) == []


def test_a_connection_finishes_only_in_the_browser_that_started_it_and_only_once(
    local: Local, fake_github: FakeGitHub
) -> None:
    # Given an installation on A's GitHub organization, and B's admin starting a connection
    number = _number()
    account = f"acme-c-{number}"
    fake_github.organization(account, owners=("carol",))
    fake_github.install(number, account)
    b_name, b_token = local.other_organization(unique("org-b"))
    b = client_of(local, b_name, b_token)
    b_admin = signed_in(local, organization_id(local, b_name))
    page = b_admin.get(f"{local.url}/ui/github", timeout=30).text
    fields = {**form_fields(page, "connect-form"), "installation_id": str(number)}
    started = b_admin.post(
        f"{local.url}/ui/github/connect", data=fields, headers={"Origin": local.url}, timeout=30
    )
    assert started.status_code == 200, started.text
    authorize = started.headers["Refresh"].split("url=", 1)[1]

    # When B sends the authorization link to A's owner, who follows it: GitHub signs carol
    # in and sends her browser (which never started this connection) to the callback
    at_github = requests.get(
        authorize, headers={USER_HEADER: "carol"}, allow_redirects=False, timeout=30
    )
    callback = at_github.headers["Location"]
    victim = signed_in(local)
    answered = victim.get(callback, allow_redirects=False, timeout=30)

    # Then it is refused before the code is redeemed, and nobody holds the installation
    assert answered.status_code == 403
    assert "no_flow" in answered.text
    assert number not in _held(local, b)
    assert number not in _held(local)

    # And a connection B's admin finishes as an owner of B's own GitHub organization is
    # used once: the same callback again is refused
    own = _number()
    fake_github.organization(f"bco-{own}", owners=("bianca",))
    fake_github.install(own, f"bco-{own}")
    fields = {**form_fields(b_admin.get(f"{local.url}/ui/github").text, "connect-form")}
    started = b_admin.post(
        f"{local.url}/ui/github/connect",
        data={**fields, "installation_id": str(own)},
        headers={"Origin": local.url},
        timeout=30,
    )
    authorize = started.headers["Refresh"].split("url=", 1)[1]
    callback = requests.get(
        authorize, headers={USER_HEADER: "bianca"}, allow_redirects=False, timeout=30
    ).headers["Location"]
    kept = b_admin.cookies.get("runplane_github_connect")
    assert kept is not None
    first = b_admin.get(callback, allow_redirects=False, timeout=30)
    assert first.status_code == 200, first.text
    # (the answer cleared the cookie; a replay sends it again)
    again = requests.get(
        callback, cookies={"runplane_github_connect": kept}, allow_redirects=False, timeout=30
    )
    assert again.status_code == 403
    assert "flow_used" in again.text
    assert own in _held(local, b)

    # And a setup callback naming A's installation instead of the one GitHub made is
    # checked with GitHub: bianca cannot reach it, so it is refused
    fields = {**form_fields(b_admin.get(f"{local.url}/ui/github").text, "connect-form")}
    started = b_admin.post(
        f"{local.url}/ui/github/connect",
        data={**fields, "installation_id": ""},
        headers={"Origin": local.url},
        timeout=30,
    )
    state = started.headers["Refresh"].split("state=", 1)[1]
    tampered = b_admin.get(
        f"{local.url}/ui/github/callback?installation_id={number}&setup_action=install"
        f"&state={state}",
        allow_redirects=False,
        timeout=30,
    )
    assert tampered.status_code == 303
    callback = requests.get(
        tampered.headers["Location"],
        headers={USER_HEADER: "bianca"},
        allow_redirects=False,
        timeout=30,
    ).headers["Location"]
    refused = b_admin.get(callback, allow_redirects=False, timeout=30)
    assert refused.status_code == 403
    assert "installation_not_yours" in refused.text
    assert number not in _held(local, b)

    # And a callback whose state does not match this browser's flow is refused
    fields = {**form_fields(b_admin.get(f"{local.url}/ui/github").text, "connect-form")}
    b_admin.post(
        f"{local.url}/ui/github/connect",
        data={**fields, "installation_id": str(number)},
        headers={"Origin": local.url},
        timeout=30,
    )
    forged = b_admin.get(
        f"{local.url}/ui/github/callback?code=abc&state=not-the-state",
        allow_redirects=False,
        timeout=30,
    )
    assert forged.status_code == 403
    assert "state_mismatch" in forged.text


def test_installing_the_app_through_the_setup_url_connects_the_new_installation(
    local: Local, fake_github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="runplane")
    # Given an admin who owns a GitHub organization without the App
    number = _number()
    account = f"newco-{number}"
    fake_github.organization(account, owners=("dora",))
    admin = signed_in(local)

    # When they connect without an installation ID: GitHub installs the App, calls the
    # setup URL, and the flow goes on to the user authorization
    hops = connect(local, admin, github_user="dora", new_installation=number, account=account)

    # Then the new installation is held, and no user token is stored or logged
    assert hops.connected, hops.finished.text
    assert _held(local)[number]["account"] == account
    tokens = [token for token in fake_github.revoked if token]
    assert tokens
    everything = json.dumps(table_items(local), default=str) + caplog.text
    assert [t[:8] for t in tokens if t in everything] == []


def test_claims_are_released_with_their_last_binding_and_by_admins_only(
    local: Local, fake_github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.e2e.test_cli import cli
    from tests.e2e.test_cli import connect as cli_connect

    # Given an installation held by the organization and bound by two workspaces
    number, other_number = _number(), _number()
    account = f"acme-r-{number}"
    fake_github.organization(account, owners=("erin",))
    fake_github.install(number, account)
    fake_github.install(other_number, account)
    admin = signed_in(local)
    assert connect(local, admin, github_user="erin", installation_id=number).connected
    assert connect(local, admin, github_user="erin", installation_id=other_number).connected
    first, second = (str(local.client.create_workspace(unique("rel"))["id"]) for _ in "ab")
    for ws in (first, second):
        local.client.bind_github(
            ws, repository=f"{account}/infra", branch="main", installation_id=number
        )
    assert _held(local)[number]["bindings"] == 2

    # When an admin tries to release it while bound: 409, still held
    with pytest.raises(ApiError) as busy:
        local.client.release_github_installation(number)
    assert busy.value.status == 409
    # And a reader and a developer may not release, nor start a connection
    for role in ("reader", "developer"):
        browser = signed_in_as(local, role)
        page = browser.get(f"{local.url}/ui/github", timeout=30)
        assert page.status_code == 200
        assert "connect-form" not in page.text
        assert f"release-{other_number}" not in page.text
    # When one workspace is unbound and the other moves to another installation
    local.client.unbind_github(first)
    assert _held(local)[number]["bindings"] == 1
    local.client.bind_github(
        second, repository=f"{account}/infra", branch="main", installation_id=other_number
    )

    # Then the first installation is released with its last binding, and can be
    # connected by another organization
    held = _held(local)
    assert number not in held
    assert held[other_number]["bindings"] == 1
    b_name, b_token = local.other_organization(unique("org-b"))
    b_admin = signed_in(local, organization_id(local, b_name))
    assert connect(local, b_admin, github_user="erin", installation_id=number).connected
    assert number in _held(local, client_of(local, b_name, b_token))

    # And the CLI lists what is held and releases an unused installation
    local.client.unbind_github(second)
    assert other_number not in _held(local)
    assert connect(local, admin, github_user="erin", installation_id=other_number).connected
    code, out, _ = cli(capsys, "github", "installations", *cli_connect(local))
    assert code == 0
    assert f"{other_number}  {account} (Organization)  confirmed by erin" in out
    code, out, _ = cli(capsys, "github", "release", str(other_number), *cli_connect(local))
    assert (code, out.strip()) == (0, f"{other_number} released")
    assert other_number not in _held(local)
    code, _, err = cli(capsys, "github", "release", str(other_number), *cli_connect(local))
    assert code == 2
    assert "HTTP 404" in err
