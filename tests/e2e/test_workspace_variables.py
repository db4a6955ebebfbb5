"""Workspace variables end to end: set through the CLI, a GitHub push's run planning
with them in the real engine, and a sensitive value nowhere it could leak."""

from __future__ import annotations

import io
import json
import logging
import uuid

import boto3
import pytest

from tests.e2e.conftest import Local
from tests.e2e.test_cli import cli, cli_json, connect
from tests.e2e.test_dashboard import signed_in
from tests.e2e.test_github import (
    bound_workspace,
    eventually,
    post_webhook,
    push,
    sha_of,
    table_items,
)
from tests.github_fake import FakeGitHub

SECRET = f"tok-{uuid.uuid4().hex}"

CONFIGURATION = """
variable "region" {
  type = string
}
variable "token" {
  type      = string
  sensitive = true
}
output "region" {
  value = var.region
}
output "shout" {
  value = "${upper(var.region)}!"
}
output "token" {
  value     = var.token
  sensitive = true
}
"""


def histories(local: Local) -> list[str]:
    assert local.stack.services is not None
    settings = local.stack.services.settings
    sfn = boto3.client(
        "stepfunctions", region_name=settings.region, endpoint_url=settings.aws_endpoint_url
    )
    found = []
    for arn in (settings.source_state_machine_arn, settings.state_machine_arn):
        for execution in sfn.list_executions(stateMachineArn=str(arn))["executions"]:
            events = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
            found.append(json.dumps(events, default=str))
    return found


def test_a_push_plans_with_the_workspace_variables_and_the_sensitive_one_never_shows(
    local: Local,
    fake_github: FakeGitHub,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="runplane")
    # Given a workspace bound to a repository whose configuration needs two variables
    repository = f"acme/vars-{uuid.uuid4().hex[:6]}"
    ws = bound_workspace(local, repository, "main", "", "plan_only")
    sha = sha_of(repository)
    fake_github.add_commit(repository, sha, {"main.tf": CONFIGURATION})
    # ... and their values set with the CLI, the secret from stdin
    region = cli_json(
        capsys, "workspace", "vars", "set", ws, "region", "--value", "eu-west-3", *connect(local)
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    token = cli_json(
        capsys,
        "workspace",
        "vars",
        "set",
        ws,
        "token",
        "--sensitive",
        "--description",
        "API token",
        *connect(local),
    )
    assert (region["value"], token["value"], token["sensitive"]) == ("eu-west-3", None, True)
    code, listed, _ = cli(capsys, "workspace", "vars", "list", ws, *connect(local))
    assert code == 0
    assert listed.splitlines() == ['region = "eu-west-3"', "token = (sensitive)  # API token"]

    # When GitHub delivers a push
    status, body, _ = post_webhook(local, "push", push(repository, sha))

    # Then its run plans with the workspace's values (the engine refuses a missing one)
    assert status == 202, body
    run = eventually(lambda: local.client.list_runs(ws), what="the push's run")[0]
    done = local.client.watch(run["id"], timeout=180)
    assert done["status"] == "succeeded", done
    assert done["plan"]["summary"]["output_changes"] == {
        "region": "create",
        "shout": "create",
        "token": "create",
    }
    log = local.client.log(run["id"], "plan")
    # (the runner redacts variable values from logs; a value derived from one shows)
    assert 'shout  = "EU-WEST-3!"' in log
    # And the review names both as the workspace's, with no value
    plain = {"category": "terraform", "source": "workspace", "variable_set": None}
    assert done["input"]["variables"] == [
        {"name": "region", "sensitive": False, **plain},
        {"name": "token", "sensitive": True, **plain},
    ]
    # And the run page names them with their source
    page = signed_in(local).get(f"{local.url}/ui/runs/{run['id']}", timeout=30)
    shown = page.text.split('id="run-variables"', 1)[1].split("</dd>", 1)[0]
    assert "<code>region</code>" in shown
    assert "<code>token</code>" in shown
    assert shown.count("(workspace)") == 2
    # And the secret is in no API read, review, run page, log, table item, workflow
    # history or log line
    reads = [
        page.text,
        json.dumps(local.client.list_variables(ws)),
        json.dumps(local.client.review(run["id"])),
        log,
        json.dumps(table_items(local), default=str),
        *histories(local),
        caplog.text,
        capsys.readouterr().out,
    ]
    assert [n for n, text in enumerate(reads) if SECRET in text] == []

    # When the sensitive variable is deleted with the CLI
    deleted = cli_json(capsys, "workspace", "vars", "delete", ws, "token", *connect(local))
    # Then only the plain one remains
    assert deleted == {
        "workspace_id": ws,
        "name": "token",
        "category": "terraform",
        "deleted": True,
    }
    assert [v["name"] for v in local.client.list_variables(ws)] == ["region"]
