"""The attention inbox over real HTTP: the dashboard's page and header count, the API and
the CLI, each showing an organization only its own runs awaiting approval; a reader
sees it, a browser without a session is sent to sign in; and the header's count costs
a fixed few DynamoDB requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.client
import pytest
import requests

from runplane.cli import main
from runplane.client import Client, Connection
from runplane.domain.identity import ROLES, Permission, Principal, PrincipalKind
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO


def _organization(local: Local, prefix: str) -> tuple[str, str, Client]:
    """A new organization: its ID, an admin token and a client of it."""
    name, token = local.other_organization(unique(prefix))
    assert local.stack.services is not None
    org_id = local.stack.services.workspaces.organization_id_of(name)
    return org_id, token, Client(Connection(local.url, token, name))


def _awaiting(client: Client, workspace: str) -> dict[str, Any]:
    ws = client.create_workspace(workspace)["id"]
    run = client.create_run(ws, HELLO)
    return client.watch(run["id"], until=["awaiting_approval"], timeout=180)


def _browser(local: Local, org_id: str, role: str) -> requests.Session:
    assert local.stack.services is not None
    code = local.stack.services.web_sessions.issue_login_code(
        org_id, role, ROLES[role], created_by="tests"
    )
    browser = requests.Session()
    answer = browser.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    assert answer.status_code == 303, answer.text
    return browser


@contextmanager
def dynamodb_requests() -> Iterator[list[str]]:
    """The DynamoDB operations this thread sends inside the block (the stack's own
    threads keep working meanwhile; their requests are not counted)."""
    sent: list[str] = []
    me = threading.get_ident()
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def counted(client: Any, operation: str, params: Any) -> Any:
        if client.meta.service_model.service_name == "dynamodb" and threading.get_ident() == me:
            sent.append(operation)
        return original(client, operation, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.client.BaseClient, "_make_api_call", counted)
        yield sent


def test_the_inbox_lists_an_organizations_own_approvals_on_the_page_api_and_cli(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two organizations, each with a run awaiting approval
    acme_id, acme_token, acme = _organization(local, "attn-acme")
    _, _, other = _organization(local, "attn-other")
    mine = _awaiting(acme, "attn-network")
    theirs = _awaiting(other, "attn-theirs")

    # When an admin of the first opens the attention page
    admin = _browser(local, acme_id, "admin")
    page = admin.get(f"{local.url}/ui/attention", timeout=30)

    # Then it lists the run awaiting approval with its workspace, deadline, time left
    # and plan counts, and the header counts one item, saying what the number means
    assert page.status_code == 200, page.text
    text = page.text
    assert f'<a href="/ui/runs/{mine["id"]}">Run {mine["id"]}</a>' in text
    assert "attn-network" in text
    assert "1 to add, 0 to change, 0 to destroy" in text
    assert 'class="time-left">6d 23h left<' in text
    assert '<span class="count">1</span><span class="count-meaning"> item needs a person' in text
    # And nothing of the other organization
    assert theirs["id"] not in text
    assert "attn-theirs" not in text
    # And every other page carries the same count in its header
    assert '<span class="count">1</span>' in admin.get(f"{local.url}/", timeout=30).text

    # When a reader of the organization opens it
    reader = _browser(local, acme_id, "reader")
    # Then they see the same run
    read = reader.get(f"{local.url}/ui/attention", timeout=30)
    assert read.status_code == 200, read.text
    assert mine["id"] in read.text

    # When a browser without a session asks for it
    anonymous = requests.get(f"{local.url}/ui/attention", allow_redirects=False, timeout=30)
    # Then it is sent to sign in
    assert (anonymous.status_code, anonymous.headers["Location"]) == (303, "/ui/sign-in")

    # When each organization asks the API
    acme_view, other_view = acme.attention(), other.attention()
    # Then each sees its own run only
    assert [i["run_id"] for i in acme_view["awaiting_approval"]] == [mine["id"]]
    assert [i["run_id"] for i in other_view["awaiting_approval"]] == [theirs["id"]]
    assert acme_view["awaiting_approval"][0]["plan_summary"]["adds"] == 1
    assert acme_view["count"] == 1

    # When the CLI lists it
    code = main(["attention", "--url", local.url, "--token", acme_token])
    # Then it prints the run with its workspace and time left
    out = capsys.readouterr().out
    assert code == 0
    assert "1 item(s) need a person" in out
    assert f"{mine['id']}  attn-network  awaiting_approval" in out
    assert "6d 23h left" in out

    # When the approval is decided
    acme.cancel(mine["id"])
    other.cancel(theirs["id"])
    acme.watch(mine["id"], timeout=180)
    # Then the inbox is empty again
    assert acme.attention()["count"] == 0
    assert "Nothing needs you right now." in admin.get(f"{local.url}/ui/attention", timeout=30).text


def test_a_token_without_run_read_is_refused_by_the_api(local: Local) -> None:
    # Given a token that may read workspaces but not runs
    token = local.token({Permission.WORKSPACE_READ, Permission.ORGANIZATION_READ})
    # When it asks for the inbox
    answer = requests.get(
        f"{local.url}/api/v1/attention", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    # Then it is refused, naming the permission
    assert answer.status_code == 403, answer.text
    assert "run:read" in answer.text


def test_the_header_count_costs_two_queries_and_one_batch_read(local: Local) -> None:
    # Given an organization with a few workspaces, one of them awaiting approval
    org_id, _, client = _organization(local, "attn-cost")
    for n in range(3):
        client.create_workspace(f"attn-cost-{n}")
    run = _awaiting(client, "attn-cost-waiting")
    assert local.stack.services is not None
    admin = Principal(
        kind=PrincipalKind.USER,
        id="ada",
        organization_id=org_id,
        permissions=frozenset(Permission),
        display="ada",
    )

    # When the header's count is computed, as every page does
    with dynamodb_requests() as sent:
        count = local.stack.services.attention.count(admin)

    # Then it is one, read with the workspaces' query, the attention index's query and
    # one batch read of the drift records
    assert count == 1
    assert sorted(sent) == ["BatchGetItem", "Query", "Query"]
    client.cancel(run["id"])
