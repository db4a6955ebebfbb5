"""Variable sets and environment variables end to end: every command through
``runplane.cli.main`` against the embedded stack over real HTTP, a run planned by the
real engine (Terraform 1.0.3) in the sandbox with a set applied to its workspace, a
workspace variable over it, a run variable over both, environment variables reaching
the engine's process, and a sensitive value in no log, review or table item."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest

from runplane.domain.identity import ROLES
from tests.e2e.conftest import Local
from tests.e2e.test_cli import Capture, cli, cli_json, connect, one_error_line, workspace
from tests.e2e.test_dashboard import signed_in
from tests.e2e.test_github import table_items
from tests.e2e.test_workspace_variables import histories

SECRET = f"tok-{uuid.uuid4().hex}"
CREDENTIAL = f"cred-{uuid.uuid4().hex}"

# ``token`` is set only by the environment variable TF_VAR_token (the engine fails a
# plan missing a required variable), and ``require_credentials`` fails the plan unless
# the engine's environment holds TEST_PROVIDER_CREDENTIALS: a successful plan proves
# both reached the engine's process. ``nonsensitive`` fails on a value the engine does
# not hold sensitive, so the plan also proves the sensitive TF_VAR_token made variable
# ``token`` sensitive to the engine; the output then prints the value, which the
# runner's log must redact.
CONFIGURATION = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
variable "region" { type = string }
variable "owner" { type = string }
variable "zone" { type = string }
variable "token" { type = string }
resource "test_thing" "x" {
  name                = "x"
  require_credentials = true
}
output "shout" {
  value = "${upper(var.region)}/${upper(var.owner)}/${upper(var.zone)}"
}
output "leak" {
  value = nonsensitive(var.token)
}
"""


def stdin(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(value + "\n"))


def test_a_set_a_workspace_and_a_run_give_the_engine_its_variables_and_environment(
    local: Local, capsys: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace and a configuration needing four variables and a credential
    ws_id, ws_name = workspace(local, capsys, "varsets")
    directory = tmp_path / "config"
    directory.mkdir()
    (directory / "main.tf").write_text(CONFIGURATION, encoding="utf-8")
    creds = f"creds-{uuid.uuid4().hex[:8]}"

    # When an admin creates a set with the CLI, gives it variables of both categories
    # (the secrets from stdin) and applies it to the workspace
    made = cli_json(capsys, "varset", "create", creds, "--description", "CI", *connect(local))
    assert (made["name"], made["global"], made["variable_count"]) == (creds, False, 0)
    for name, value in (("region", "set-region"), ("owner", "set-owner"), ("zone", "set-zone")):
        cli_json(capsys, "varset", "vars", "set", creds, name, "--value", value, *connect(local))
    for name, value in (("TF_VAR_token", SECRET), ("TEST_PROVIDER_CREDENTIALS", CREDENTIAL)):
        stdin(monkeypatch, value)
        stored = cli_json(
            capsys,
            "varset",
            "vars",
            "set",
            creds,
            name,
            "--category",
            "env",
            "--sensitive",
            *connect(local),
        )
        assert (stored["category"], stored["sensitive"], stored["value"]) == ("env", True, None)
    code, out, _ = cli(capsys, "varset", "apply", creds, "--workspace", ws_name, *connect(local))
    assert (code, out.strip()) == (0, f"{creds} applied to {ws_id}")
    # ... the workspace overrides two of them and has an environment variable of its own
    for name, value in (("region", "workspace-region"), ("owner", "workspace-owner")):
        cli_json(
            capsys, "workspace", "vars", "set", ws_name, name, "--value", value, *connect(local)
        )
    cli_json(
        capsys,
        "workspace",
        "vars",
        "set",
        ws_name,
        "AWS_REGION",
        "--category",
        "env",
        "--value",
        "eu-west-3",
        *connect(local),
    )

    # Then the set shows where it applies and its variables, never a sensitive value
    code, shown, _ = cli(capsys, "varset", "show", creds, *connect(local))
    assert code == 0
    assert shown.splitlines() == [
        f"{creds}  {made['id']}  1 workspace(s)  5 variable(s)  # CI",
        f"  applied to {ws_id}",
        '  owner = "set-owner"',
        '  region = "set-region"',
        '  zone = "set-zone"',
        "  env TEST_PROVIDER_CREDENTIALS = (sensitive)",
        "  env TF_VAR_token = (sensitive)",
    ]
    listed = cli_json(capsys, "varset", "list", *connect(local))
    assert [s["id"] for s in listed if s["name"] == creds] == [made["id"]]
    code, text, _ = cli(capsys, "workspace", "vars", "list", ws_name, *connect(local))
    assert text.splitlines() == [
        'owner = "workspace-owner"',
        'region = "workspace-region"',
        'env AWS_REGION = "eu-west-3"',
    ]

    # When a plan-only run is created with its own owner and watched to the end
    code, out, err = cli(
        capsys,
        "run",
        "create",
        "--workspace",
        ws_name,
        "--dir",
        str(directory),
        "--kind",
        "plan_only",
        "--var",
        "owner=run-owner",
        *connect(local),
    )
    assert code == 0, err
    run_id = out.strip()
    code, watched, _ = cli(capsys, "run", "watch", run_id, "--timeout", "180", *connect(local))

    # Then the engine planned with the run's owner, the workspace's region, the set's
    # zone, TF_VAR_token and the credential from its environment
    assert code == 0, watched
    code, log, _ = cli(capsys, "run", "logs", run_id, *connect(local))
    assert code == 0
    assert 'shout = "WORKSPACE-REGION/RUN-OWNER/SET-ZONE"' in log
    # And the sensitive value the configuration printed is redacted from the log
    assert 'leak  = "[redacted]"' in log
    # And the review lists every variable with its category and source, "(sensitive)"
    # in place of a sensitive one's value
    code, review_text, _ = cli(capsys, "run", "show", run_id, *connect(local))
    assert code == 0
    assert "variables 6" in review_text
    assert [line.strip() for line in review_text.splitlines() if line.startswith("    ")] == [
        "owner  terraform  from run",
        "region  terraform  from workspace",
        f"zone  terraform  from variable set {creds}",
        "AWS_REGION  env  from workspace",
        f"TEST_PROVIDER_CREDENTIALS  env  from variable set {creds}  (sensitive)",
        f"TF_VAR_token  env  from variable set {creds}  (sensitive)",
    ]
    review = cli_json(capsys, "run", "show", run_id, *connect(local))
    assert [
        (v["name"], v["category"], v["source"], v["sensitive"])
        for v in review["input"]["variables"]
    ] == [
        ("owner", "terraform", "run", False),
        ("region", "terraform", "workspace", False),
        ("zone", "terraform", "variable_set", False),
        ("AWS_REGION", "env", "workspace", False),
        ("TEST_PROVIDER_CREDENTIALS", "env", "variable_set", True),
        ("TF_VAR_token", "env", "variable_set", True),
    ]
    assert review["input"]["variables"][2]["variable_set"] == {"id": made["id"], "name": creds}
    # And the run page names them the same way
    page = signed_in(local).get(f"{local.url}/ui/runs/{run_id}", timeout=30)
    shown_vars = page.text.split('id="run-variables"', 1)[1].split("</dd>", 1)[0]
    assert f'<code>zone</code> <span class="note">(variable set {creds})</span>' in shown_vars
    assert (
        '<span class="note">env</span> <code>TF_VAR_token</code> '
        f'<span class="note">(variable set {creds})</span> <span class="note">sensitive</span>'
    ) in shown_vars

    # And neither secret is in the log, the review, a table item or a workflow history
    reads = [
        log,
        page.text,
        review_text,
        json.dumps(review),
        json.dumps(table_items(local), default=str),
        *histories(local),
        capsys.readouterr().out,
    ]
    for secret in (SECRET, CREDENTIAL):
        assert [n for n, read in enumerate(reads) if secret in read] == []

    # When the set stops applying to the workspace, a new run lacks the credential
    code, out, _ = cli(capsys, "varset", "unapply", creds, "--workspace", ws_id, *connect(local))
    assert (code, out.strip()) == (0, f"{creds} no longer applied to {ws_id}")
    code, out, err = cli(
        capsys,
        "run",
        "create",
        "--workspace",
        ws_name,
        "--dir",
        str(directory),
        "--kind",
        "plan_only",
        # (values of a few letters: the log redacts every value as written)
        "--var",
        "owner=second-owner",
        "--var",
        "zone=second-zone",
        "--var",
        "token=second-token",
        *connect(local),
    )
    assert code == 0, err
    # Then its plan ends asking for credentials: the engine's environment lacks them
    done = local.client.watch(out.strip(), timeout=180)
    assert done["status"] == "plan_credentials_required", done["failure"]
    assert [(v["name"], v["source"]) for v in done["input"]["variables"]] == [
        ("owner", "run"),
        ("region", "workspace"),
        ("token", "run"),
        ("zone", "run"),
        ("AWS_REGION", "workspace"),
    ]


def test_sets_stay_in_their_organization_need_the_admin_permission_and_refuse_owned_names(
    local: Local, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a set of this organization applied to a workspace, with a variable
    ws_id, ws_name = workspace(local, capsys, "varsets-orgs")
    name = f"shared-{uuid.uuid4().hex[:8]}"
    made = cli_json(capsys, "varset", "create", name, "--global", *connect(local))
    cli_json(
        capsys, "varset", "vars", "set", made["id"], "region", "--value", "eu", *connect(local)
    )
    cli_json(capsys, "varset", "apply", made["id"], "--workspace", ws_id, *connect(local))
    other_org, other_token = local.other_organization(f"globex-{uuid.uuid4().hex[:6]}")
    other = connect(local, other_token, other_org)
    reader = connect(local, local.token(ROLES["reader"], "reader"))
    developer = connect(local, local.token(ROLES["developer"], "developer"))

    # When another organization's admin lists, shows, changes, applies or deletes it
    # Then it is not there: an empty list, and 404 for each (exit 2), never 403
    assert cli_json(capsys, "varset", "list", *other) == []
    for argv in (
        ("varset", "show", made["id"]),
        ("varset", "vars", "set", made["id"], "region", "--value", "x"),
        ("varset", "vars", "delete", made["id"], "region"),
        ("varset", "unapply", made["id"], "--workspace", ws_id),
        ("varset", "delete", made["id"]),
        ("varset", "show", name),
    ):
        code, _, err = cli(capsys, *argv, *other)
        assert code == 2, argv
        assert "(HTTP 404 NOT_FOUND)" in one_error_line(err), argv
    # ... and applying it to their own workspace too
    their_ws = cli_json(capsys, "workspace", "create", f"theirs-{uuid.uuid4().hex[:6]}", *other)
    code, _, err = cli(capsys, "varset", "apply", made["id"], "--workspace", their_ws["id"], *other)
    assert (code, "(HTTP 404 NOT_FOUND)" in err) == (2, True)
    code, _, err = cli(
        capsys, "varset", "apply", made["id"], "--workspace", their_ws["id"], *connect(local)
    )
    assert (code, "(HTTP 404 NOT_FOUND)" in err) == (2, True)

    # When a reader and a developer of the organization use it
    # Then they may read it, and every change is 403
    for who in (reader, developer):
        assert cli_json(capsys, "varset", "show", made["id"], *who)["variable_count"] == 1
        code, _, err = cli(capsys, "varset", "create", f"x-{uuid.uuid4().hex[:6]}", *who)
        assert (code, "(HTTP 403" in err) == (2, True)
        code, _, err = cli(capsys, "varset", "delete", made["id"], *who)
        assert (code, "(HTTP 403" in err) == (2, True)

    # When a variable the runner owns is set, in a set or a workspace
    # Then it is refused with the reason, and nothing is stored
    code, _, err = cli(
        capsys, "varset", "vars", "set", name, "TF_CLI_ARGS_plan", "--category", "env",
        "--value=-var-file=/etc/passwd", *connect(local),
    )  # fmt: skip
    assert code == 2
    assert one_error_line(err).endswith("(HTTP 422 VARIABLE_NAME_RESERVED)")
    assert "reserved: it would add arguments" in err
    code, _, err = cli(
        capsys, "workspace", "vars", "set", ws_name, "PATH", "--category", "env",
        "--value", "/evil", *connect(local),
    )  # fmt: skip
    assert code == 2
    assert "environment variable PATH is reserved" in one_error_line(err)
    assert cli_json(capsys, "varset", "show", name, *connect(local))["variable_count"] == 1
    assert cli_json(capsys, "workspace", "vars", "list", ws_name, *connect(local)) == []

    # When an environment variable of the workspace and the set's variable are deleted,
    # and then the set
    stdin(monkeypatch, "s3cr3t")
    cli_json(
        capsys, "workspace", "vars", "set", ws_name, "API_KEY", "--category", "env",
        "--sensitive", *connect(local),
    )  # fmt: skip
    gone = cli_json(
        capsys, "workspace", "vars", "delete", ws_name, "API_KEY", "--category", "env",
        *connect(local),
    )  # fmt: skip
    assert gone == {"workspace_id": ws_id, "name": "API_KEY", "category": "env", "deleted": True}
    code, out, _ = cli(capsys, "varset", "vars", "delete", name, "region", *connect(local))
    assert (code, out.strip()) == (0, "region deleted")
    code, out, _ = cli(capsys, "varset", "delete", name, *connect(local))
    assert (code, out.strip()) == (0, f"{name} deleted")
    # Then the set is gone for its own organization too
    code, _, err = cli(capsys, "varset", "show", made["id"], *connect(local))
    assert (code, "(HTTP 404 NOT_FOUND)" in err) == (2, True)
    assert name not in [s["name"] for s in cli_json(capsys, "varset", "list", *connect(local))]
