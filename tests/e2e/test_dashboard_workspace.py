"""The workspace page and the workspace list over real HTTP: a workspace's current state
after a real applied run (outputs with the sensitive one withheld), its history and
download, its lock and settings forms, and the list's cost in DynamoDB requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from runplane.domain.identity import ROLES, Permission
from tests.e2e.conftest import Local
from tests.e2e.dashboard_listing import every_listing_page
from tests.e2e.test_dashboard import form_fields, signed_in, signed_in_as
from tests.e2e.test_dashboard_cloud import page_of
from tests.e2e.test_managed_runs import config, new_workspace
from tests.integration.dynamodb_requests import DynamoDBRequests

SECRET = "pw-never-on-a-page-5c1e"
OUTPUTS = f"""
terraform {{
  required_providers {{
    test = {{ source = "runplane/test", version = "0.1.0" }}
  }}
}}
resource "test_thing" "a" {{ name = "a" }}
resource "test_thing" "b" {{ name = "b" }}
output "endpoint" {{ value = "https://example.test/a" }}
output "db_password" {{
  value     = "{SECRET}"
  sensitive = true
}}
"""


def applied_workspace(local: Local, tmp_path: Path, prefix: str) -> tuple[str, str]:
    """A workspace whose run of ``OUTPUTS`` was approved and applied by the real engine."""
    ws = new_workspace(local, prefix)
    run = local.client.create_run(ws, config(tmp_path, OUTPUTS, name=prefix))
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    local.client.decide(run["id"], "approve")
    assert local.client.watch(run["id"], timeout=180)["status"] == "succeeded"
    return ws, run["id"]


def signed_in_with(local: Local, permissions: frozenset[Permission]) -> requests.Session:
    """A browser of the stack's organization holding exactly ``permissions``."""
    services = local.stack.services
    assert services is not None
    organization_id = services.workspaces.organization_id_of(local.organization)
    code = services.web_sessions.issue_login_code(
        organization_id, "custom", permissions, created_by="tests"
    )
    browser = requests.Session()
    answer = browser.get(f"{local.url}/ui/login?code={code}", allow_redirects=False, timeout=30)
    assert answer.status_code == 303, answer.text
    return browser


def post(
    browser: requests.Session, local: Local, path: str, data: dict[str, str]
) -> requests.Response:
    """A form posted as a browser on the page would, from this origin."""
    return browser.post(
        f"{local.url}{path}",
        data=data,
        headers={"Origin": local.url},
        allow_redirects=False,
        timeout=30,
    )


def test_the_page_shows_the_current_state_without_sensitive_values_and_downloads_it(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace a real run applied, with a plain and a sensitive output
    ws, run_id = applied_workspace(local, tmp_path, "dash-state")
    current = local.client.workspace(ws)["current_state_version_id"]

    # When an admin opens its page
    admin = signed_in(local)
    page = page_of(admin, local, ws)

    # Then the current state is shown: its version, serial, the run that published it,
    # its two resources and both outputs, the sensitive one masked
    assert f'<code id="state-version">{current}</code>' in page
    assert f'<a href="/ui/runs/{run_id}" id="state-run">' in page
    assert '<dd id="state-resources">2</dd>' in page
    assert "<code>endpoint</code>" in page
    assert "https://example.test/a" in page
    assert "<code>db_password</code>" in page
    assert '<span class="sensitive">(sensitive)</span>' in page
    # And the sensitive value is nowhere on the page
    assert SECRET not in page
    # And the latest run is the applied one, with its badge
    assert f'id="latest-run-link"><code>{run_id}</code></a>' in page
    assert 'data-status="succeeded"' in page
    # And the history lists the version with a download link
    download = f"/ui/workspaces/{ws}/state-versions/{current}/download"
    assert 'id="state-history"' in page
    assert f'href="{download}"' in page

    # When the admin downloads it
    answer = admin.get(f"{local.url}{download}", timeout=30)

    # Then it is the state file, as an attachment named after the workspace and serial
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    state = json.loads(answer.text)
    name = local.client.workspace(ws)["name"]
    disposition = answer.headers["Content-Disposition"]
    assert disposition == f'attachment; filename="{name}-{state["serial"]}.tfstate"'
    assert answer.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert {r["name"] for r in state["resources"]} == {"a", "b"}

    # When someone who may read the workspace but not its state opens the page, and
    # follows the download link anyway
    no_state = signed_in_with(local, ROLES["reader"] - {Permission.STATE_READ})
    their_page = page_of(no_state, local, ws)
    refused = no_state.get(f"{local.url}{download}", timeout=30)

    # Then the page shows no state and no link, and the download is refused
    assert 'id="state-not-permitted"' in their_page
    assert "/download" not in their_page
    assert SECRET not in their_page
    assert refused.status_code == 403, refused.text
    assert "<strong>FORBIDDEN</strong>" in refused.text
    assert "state:read" in refused.text

    # When another organization's admin asks for the page or the download
    other, _ = local.other_organization("dash-state-other")
    assert local.stack.services is not None
    stranger = signed_in(local, local.stack.services.workspaces.organization_id_of(other))
    answers = [
        stranger.get(f"{local.url}/ui/workspaces/{ws}", timeout=30),
        stranger.get(f"{local.url}{download}", timeout=30),
    ]

    # Then each is not found, and nothing of the state is in either
    for refused_answer in answers:
        assert refused_answer.status_code == 404, refused_answer.text
        assert "NOT_FOUND" in refused_answer.text
        assert SECRET not in refused_answer.text
        assert "lineage" not in refused_answer.text

    # When a version of another workspace is asked for under this workspace's path
    other_ws, _ = applied_workspace(local, tmp_path, "dash-state-b")
    theirs = local.client.workspace(other_ws)["current_state_version_id"]
    crossed = admin.get(
        f"{local.url}/ui/workspaces/{ws}/state-versions/{theirs}/download", timeout=30
    )

    # Then it is not found either
    assert crossed.status_code == 404, crossed.text

    # And the workspace list shows the workspace's latest run and its resources
    listing = every_listing_page(admin, local.url)
    row = listing[listing.index(f'id="ws-{ws}"') :]
    row = row[: row.index("</tr>")]
    assert 'data-status="succeeded"' in row
    assert '<td data-label="Resources">2</td>' in row


def test_the_lock_forms_lock_and_unlock_and_refusals_change_nothing(local: Local) -> None:
    # Given an unlocked workspace and an admin on its page
    ws = new_workspace(local, "dash-lock")
    admin = signed_in(local)
    page = page_of(admin, local, ws)
    fields = form_fields(page, "lock-form")

    # When the lock form is sent without its CSRF token
    without = post(admin, local, f"/ui/workspaces/{ws}/lock", {"reason": "maintenance"})

    # Then it is refused and the workspace stays unlocked
    assert without.status_code == 403, without.text
    assert "<strong>CSRF_REFUSED</strong>" in without.text
    assert local.client.workspace(ws)["locked"] is False

    # When a reader, who may not lock, forges the form with their own token
    reader = signed_in_as(local, "reader")
    reader_page = page_of(reader, local, ws)
    assert 'id="lock-form"' not in reader_page
    token = form_fields(reader_page, "logout-form")["csrf"]
    forged = post(reader, local, f"/ui/workspaces/{ws}/lock", {"csrf": token})

    # Then the service refuses it, naming the permission, and nothing is locked
    assert forged.status_code == 403, forged.text
    assert "workspace:lock" in forged.text
    assert local.client.workspace(ws)["locked"] is False

    # When the admin locks it with a reason
    locked = post(admin, local, f"/ui/workspaces/{ws}/lock", {**fields, "reason": "<b>db move</b>"})

    # Then it is locked, and the page says by whom and why (escaped), with Unlock
    assert locked.status_code == 303, locked.text
    assert locked.headers["Location"] == f"/ui/workspaces/{ws}#lock"
    assert local.client.workspace(ws)["locked"] is True
    page = page_of(admin, local, ws)
    assert "Locked by" in page
    assert '<span class="person" title="user:' in page
    assert "&lt;b&gt;db move&lt;/b&gt;" in page
    assert "<b>db move</b>" not in page
    unlock = form_fields(page, "unlock-form")

    # When the lock form is sent again (it is already locked)
    again = post(admin, local, f"/ui/workspaces/{ws}/lock", fields)

    # Then it is refused as a conflict
    assert again.status_code == 409, again.text

    # When the admin presses Unlock
    unlocked = post(admin, local, f"/ui/workspaces/{ws}/unlock", unlock)

    # Then it is unlocked
    assert unlocked.status_code == 303, unlocked.text
    assert local.client.workspace(ws)["locked"] is False


def test_the_settings_form_changes_the_settings_and_refuses_invalid_or_stale_ones(
    local: Local,
) -> None:
    # Given a workspace and an admin on its page, holding the settings form
    ws = new_workspace(local, "dash-settings")
    admin = signed_in(local)
    page = page_of(admin, local, ws)
    fields = form_fields(page, "settings-form")
    assert fields["expected_settings_version"] == "0"
    before = local.client.workspace(ws)
    path = f"/ui/workspaces/{ws}/settings"
    valid = {
        **fields,
        "description": "payments <core>",
        "execution_mode": "remote",
        "terraform_version": "1.0.3",
        "approval_window_seconds": "3600",
        "tags": "team:payments, prod",
        "destroy_runs": "yes",
        "destroys_over": "5",
    }

    # When invalid settings are sent: a window out of range, a bad tag, an unknown mode
    invalid = [
        {**valid, "approval_window_seconds": "0"},
        {**valid, "tags": "Not A Tag"},
        {**valid, "execution_mode": "agent"},
        {**valid, "destroys_over": "-1"},
        {**valid, "description": "x" * 1001},
    ]
    answers = [post(admin, local, path, data) for data in invalid]

    # Then each is refused with the typed error page, and nothing was written
    for answer in answers:
        assert answer.status_code == 422, answer.text
        assert "<strong>INVALID_INPUT</strong>" in answer.text
    assert local.client.workspace(ws) == before

    # When they are sent without the CSRF token, or by a reader
    without = post(admin, local, path, {k: v for k, v in valid.items() if k != "csrf"})
    reader = signed_in_as(local, "reader")
    reader_page = page_of(reader, local, ws)
    assert 'id="settings-form"' not in reader_page
    token = form_fields(reader_page, "logout-form")["csrf"]
    forged = post(reader, local, path, {**valid, "csrf": token})

    # Then both are refused and nothing was written
    assert without.status_code == 403, without.text
    assert forged.status_code == 403, forged.text
    assert "workspace:update" in forged.text
    assert local.client.workspace(ws) == before

    # When the valid settings are sent
    saved = post(admin, local, path, valid)

    # Then they are the workspace's, as the API reads them
    assert saved.status_code == 303, saved.text
    assert saved.headers["Location"] == f"/ui/workspaces/{ws}#settings"
    after = local.client.workspace(ws)
    assert after["description"] == "payments <core>"
    assert after["terraform_version"] == "1.0.3"
    assert after["approval_window_seconds"] == 3600
    assert after["tags"] == ["team:payments", "prod"]
    assert after["second_approval"] == {
        "destroy_runs": True,
        "destroys_over": 5,
        "separation_of_duties": False,
    }
    page = page_of(admin, local, ws)
    assert "payments &lt;core&gt;" in page
    assert form_fields(page, "settings-form")["expected_settings_version"] == "1"

    # When the form shown before that change is sent again
    stale = post(admin, local, path, {**valid, "description": "stale"})

    # Then it is refused as stale, and nothing was written
    assert stale.status_code == 409, stale.text
    assert "<strong>CONCURRENT_CHANGE</strong>" in stale.text
    assert local.client.workspace(ws) == after


@pytest.mark.parametrize("count", [50])
def test_the_workspace_list_reads_a_bounded_number_of_items(
    local: Local, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    # Given an organization of 50 workspaces and its admin signed in
    services = local.stack.services
    assert services is not None
    org = services.tenancy.create_organization("dash-fifty")
    for index in range(count):
        services.tenancy.create_workspace(org.id, f"ws-{index:02d}")
    browser = signed_in(local, org.id)
    assert browser.get(f"{local.url}/", timeout=30).status_code == 200

    # When the list is read, counting the DynamoDB requests it sends
    requests_sent = DynamoDBRequests(monkeypatch)
    answer = browser.get(f"{local.url}/", timeout=30)

    # Then it shows every workspace
    assert answer.status_code == 200, answer.text
    assert answer.text.count('<tr id="ws-') == count
    # And reads the drift records in one batch and each workspace's runs in one small
    # query: no single reads per workspace (the header's attention count adds two
    # queries and a batch read, whatever the page)
    operations = requests_sent.operations
    print(f"DynamoDB requests for {count} workspaces: {len(operations)} {operations}")
    assert operations.count("BatchGetItem") <= 3
    assert operations.count("Query") <= count + 4
    assert operations.count("GetItem") <= 3
