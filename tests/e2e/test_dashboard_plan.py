"""The plan view over real HTTP, from a real plan of the real engine: the run page's plan
section and the full plan page show each resource and its diff, never a sensitive value;
a reader may see them, another organization may not."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
import requests

from runplane.cli import main
from runplane.client import ApiError, Client, Connection
from tests.e2e.conftest import Local
from tests.e2e.test_cli import connect
from tests.e2e.test_dashboard import signed_in, signed_in_as
from tests.e2e.test_managed_runs import SECRET_VALUE, config, new_workspace

CONFIGURATION = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
variable "password" {
  type      = string
  sensitive = true
}
resource "test_thing" "db" {
  name    = "db"
  content = var.password
}
resource "test_thing" "web" {
  name    = "web"
  content = "<b>hello</b>"
}
output "password" {
  value     = var.password
  sensitive = true
}
output "web_id" { value = test_thing.web.id }
"""


def words(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def test_the_plan_view_shows_a_real_plans_changes_and_never_its_secret(
    local: Local, tmp_path: Path
) -> None:
    # Given a finished plan whose resource and output take a sensitive variable
    ws = new_workspace(local, "dash-plan")
    directory = config(tmp_path, CONFIGURATION)
    run = local.client.create_run(
        ws, directory, kind="plan_only", variables={"password": SECRET_VALUE}
    )
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "succeeded", done
    admin = signed_in(local)

    # When the admin opens the run page and its full plan page
    run_page = admin.get(f"{local.url}/ui/runs/{run['id']}", timeout=30)
    plan_page = admin.get(f"{local.url}/ui/runs/{run['id']}/plan", timeout=30)

    # Then both show the counts and each resource with its diff, values escaped
    for answer in (run_page, plan_page):
        assert answer.status_code == 200, answer.text
        text = words(answer.text)
        assert "+ 2 to create" in text
        assert "+ create test_thing.db" in text
        assert "content (sensitive)" in text
        assert 'name "db"' in text
        assert "id known after apply" in text
        assert 'content "<b>hello</b>"' in text
        assert "<b>hello</b>" not in answer.text
        assert "password (sensitive)" in text
        assert "web_id known after apply" in text
        # And never the secret value
        assert SECRET_VALUE not in answer.text
    assert f'href="/ui/runs/{run["id"]}/plan" id="full-plan-link"' in run_page.text

    # When a reader opens the plan page
    reader = signed_in_as(local, "reader")
    read = reader.get(f"{local.url}/ui/runs/{run['id']}/plan", timeout=30)

    # Then the reader sees it too, without the secret
    assert read.status_code == 200, read.text
    assert "test_thing.db" in read.text
    assert SECRET_VALUE not in read.text

    # When another organization's admin asks for it
    other, _ = local.other_organization("dash-plan-other")
    assert local.stack.services is not None
    stranger = signed_in(local, local.stack.services.workspaces.organization_id_of(other))
    refused = stranger.get(f"{local.url}/ui/runs/{run['id']}/plan", timeout=30)

    # Then it is not found, exactly like a missing run, and shows nothing of the plan
    missing = stranger.get(f"{local.url}/ui/runs/run-missing/plan", timeout=30)
    assert (refused.status_code, missing.status_code) == (404, 404)
    assert "<strong>NOT_FOUND</strong>" in refused.text
    assert "test_thing" not in refused.text

    # And a page number that is not one is refused
    bad = admin.get(f"{local.url}/ui/runs/{run['id']}/plan?page=x", timeout=30)
    assert bad.status_code == 422, bad.text
    assert "<strong>INVALID_INPUT</strong>" in bad.text


def test_the_run_api_and_the_cli_give_the_same_plan_view_without_the_secret(
    local: Local, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a finished plan whose resource and output take a sensitive variable
    ws = new_workspace(local, "api-plan")
    run = local.client.create_run(
        ws, config(tmp_path, CONFIGURATION), kind="plan_only", variables={"password": SECRET_VALUE}
    )
    assert local.client.watch(run["id"], timeout=180)["status"] == "succeeded"

    # When the run API is asked for the run's plan
    body = local.client.run_plan(run["id"])

    # Then it holds the counts and each change's diff, the sensitive value masked
    assert body["state"] == "shown"
    view = body["view"]
    assert view["counts"]["create"] == 2
    assert view["page"] == {"number": 1, "pages": 1, "size": 100}
    database = next(c for c in view["resource_changes"] if c["address"] == "test_thing.db")
    content = next(row for row in database["attributes"] if row["path"] == "content")
    assert content["after"] == {"text": "(sensitive)", "kind": "sensitive"}
    assert SECRET_VALUE not in json.dumps(body)

    # When the CLI prints it, as text and as JSON
    assert main(["run", "plan", run["id"], *connect(local)]) == 0
    text = capsys.readouterr().out
    assert main(["run", "plan", run["id"], "--json", *connect(local)]) == 0
    printed = json.loads(capsys.readouterr().out)

    # Then the text names each change and its attributes, and the JSON is the API's
    assert text.startswith(f"Plan of {run['id']}: +2 to create")
    assert "  + create test_thing.db\n      content = (sensitive)\n" in text
    assert '      name = "db"\n' in text
    assert "Outputs:\n  + create password\n      password = (sensitive)\n" in text
    assert SECRET_VALUE not in text
    assert printed == body

    # When another organization asks, or a page number is not one
    other, token = local.other_organization("api-plan-other")
    stranger = Client(Connection(local.url, token, other))
    # Then it is not found, and the bad page is refused
    with pytest.raises(ApiError) as refused:
        stranger.run_plan(run["id"])
    assert refused.value.status == 404
    bad = requests.get(
        f"{local.url}/api/v1/runs/{run['id']}/plan?page=0",
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )
    assert (bad.status_code, bad.json()["code"]) == (422, "INVALID_INPUT")
