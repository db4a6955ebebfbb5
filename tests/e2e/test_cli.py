"""The ``runplane`` CLI as a person runs it: ``main([...])`` against the embedded stack
over real HTTP, checking what it prints, its exit code, and what it wrote."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from runplane.cli import main, parser
from runplane.domain.identity import Permission
from runplane.local.stack import free_port
from runplane.store import run_parts
from tests.e2e.conftest import Local, unique
from tests.e2e.test_launch_controls import _artifact_count
from tests.e2e.test_local_up import local_up_banner
from tests.e2e.test_managed_runs import HELLO
from tests.e2e.test_policy import soft_review_policy
from tests.e2e.test_test_provider import PROVIDER_BLOCK, linux_amd64, thing
from tests.engine import engine_env, engine_path
from tests.unit.test_policy_cli import saved_plan

P = Permission
Capture = pytest.CaptureFixture[str]


def connect(local: Local, token: str | None = None, organization: str | None = None) -> list[str]:
    return [
        "--url",
        local.url,
        "--token",
        token or local.admin_token,
        "--organization",
        organization or local.organization,
    ]


def cli(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    """Run the CLI; return its exit code, stdout and stderr."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: Capture, *argv: str) -> Any:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def one_error_line(err: str) -> str:
    """A user error is exactly one ``error: ...`` line, never a traceback."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return lines[0]


def workspace(local: Local, capsys: Capture, prefix: str = "cli") -> tuple[str, str]:
    name = unique(prefix)
    created = cli_json(capsys, "workspace", "create", name, *connect(local))
    return created["id"], name


def variables_of(local: Local, run_id: str) -> dict[str, str]:
    """The variables a run was created with, decrypted from its stored artifact."""
    services = local.stack.services
    assert services is not None
    snapshot = run_parts.require(run_id, "input").body
    org_id = services.workspaces.organization_id_of(local.organization)
    stored = services.artifacts.read(org_id, snapshot["variables_artifact_id"])
    return dict(json.loads(stored))


# --------------------------------------------------------------------------- the parser


def _walk(command: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(_walk(sub, f"{path} {name}"))
        elif not isinstance(action, argparse._HelpAction):
            found.append((path, action))
    return found


def test_every_flag_and_argument_has_help_text() -> None:
    # Given every command of the CLI / Then each flag and argument says what it is for
    missing = [
        f"{path} {action.option_strings or action.dest}"
        for path, action in _walk(parser(), "runplane")
        if not action.help
    ]
    assert missing == []


def test_every_command_that_calls_the_api_offers_json() -> None:
    # Given the commands that talk to the control plane / Then each one takes --json
    # (and each test below proves the output parses)
    leaves: dict[str, set[str]] = {}
    for path, action in _walk(parser(), "runplane"):
        leaves.setdefault(path, set()).update(action.option_strings)
    # Signing in and out prints where the credential went, for a person at a terminal.
    offline = {"runplane local up", "runplane login", "runplane logout"}
    assert [p for p, flags in leaves.items() if p not in offline and "--json" not in flags] == []


# --------------------------------------------------------------------------- workspaces


def test_workspace_create_list_show_and_update(local: Local, capsys: Capture) -> None:
    # Given a workspace created through the CLI
    ws_id, name = workspace(local, capsys)

    # When it is listed and shown by name and by ID
    listed = cli_json(capsys, "workspace", "list", *connect(local))
    by_name = cli_json(capsys, "workspace", "show", name, *connect(local))
    code, text, _ = cli(capsys, "workspace", "show", ws_id, *connect(local))

    # Then the listing has it and both shows describe it, on the deployment's window
    assert {"id": ws_id, "name": name} in [{"id": w["id"], "name": w["name"]} for w in listed]
    assert (by_name["id"], by_name["approval_window_seconds"]) == (ws_id, None)
    assert code == 0
    assert text.startswith(f"{ws_id}  {name}\n")
    assert "approval window  deployment default" in text
    assert "  auto-destroy     not set\n" in text

    # When its approval window is set to 72h, then to 7d
    updated = cli_json(
        capsys, "workspace", "update", name, "--approval-window", "72h", *connect(local)
    )
    code, text, _ = cli(
        capsys, "workspace", "update", ws_id, "--approval-window", "7d", *connect(local)
    )

    # Then each one is stored in seconds, as a show reads it back
    assert updated["approval_window_seconds"] == 72 * 3600
    assert code == 0
    assert "approval window  7d (604800 s)" in text
    shown = cli_json(capsys, "workspace", "show", ws_id, *connect(local))
    assert shown["approval_window_seconds"] == 7 * 86400


def test_workspace_tags_are_set_replaced_and_cleared_and_bad_ones_change_nothing(
    local: Local, capsys: Capture
) -> None:
    # Given a workspace created with two tags
    name = unique("tagged")
    created = cli_json(
        capsys, "workspace", "create", name, "--tag", "aws", "--tag", "env:prod", *connect(local)
    )
    assert created["tags"] == ["aws", "env:prod"]

    # When its tags are replaced together with its window, then a bad tag is given
    replaced = cli_json(
        capsys, "workspace", "update", name, "--tag", "gcp", "--approval-window", "2h",
        *connect(local),
    )  # fmt: skip
    refused = cli(capsys, "workspace", "update", name, "--tag", "Not A Tag", *connect(local))

    # Then the first is one change of both; the second is the API's 422, changing nothing
    assert (replaced["tags"], replaced["approval_window_seconds"]) == (["gcp"], 7200)
    assert refused[0] == 2
    assert "tag 'Not A Tag' must be" in one_error_line(refused[2])
    assert "(HTTP 422" in refused[2]
    code, text, _ = cli(capsys, "workspace", "show", name, *connect(local))
    assert (code, "tags             gcp" in text) == (0, True)

    # When they are cleared / Then none is left
    cleared = cli_json(capsys, "workspace", "update", name, "--clear-tags", *connect(local))
    assert cleared["tags"] == []
    both = cli(capsys, "workspace", "update", name, "--tag", "a", "--clear-tags", *connect(local))
    assert both[0] == 3


def test_workspace_update_refuses_bad_windows_and_changes_nothing(
    local: Local, capsys: Capture
) -> None:
    # Given a workspace with a 1h window
    ws_id, _ = workspace(local, capsys)
    assert main(["workspace", "update", ws_id, "--approval-window", "3600", *connect(local)]) == 0

    # When a window that is no duration, none at all, or one the API refuses is given
    not_a_duration = cli(
        capsys, "workspace", "update", ws_id, "--approval-window", "3 days", *connect(local)
    )
    nothing = cli(capsys, "workspace", "update", ws_id, *connect(local))
    too_long = cli(
        capsys, "workspace", "update", ws_id, "--approval-window", "31d", *connect(local)
    )

    # Then the first two are local errors, the third the API's 422, each on one line
    assert not_a_duration[0] == 3
    assert "'3 days' is not a duration" in one_error_line(not_a_duration[2])
    assert nothing[0] == 3
    assert one_error_line(nothing[2]) == (
        "error: nothing to update: pass --approval-window, --tag, --clear-tags, "
        "--second-approver-for-destroy, --second-approver-over or --separation-of-duties"
    )
    assert too_long[0] == 2
    assert "(HTTP 422 INVALID_INPUT)" in one_error_line(too_long[2])
    # And the window is still 1h
    shown = cli_json(capsys, "workspace", "show", ws_id, *connect(local))
    assert shown["approval_window_seconds"] == 3600


def test_workspace_reads_stay_in_the_callers_organization(local: Local, capsys: Capture) -> None:
    # Given a workspace of another organization, and one of ours
    org, other_token = local.other_organization(unique("cli-org"))
    theirs = cli_json(capsys, "workspace", "create", "theirs", *connect(local, other_token, org))
    ours, _ = workspace(local, capsys)

    # When we list and show workspaces
    listed = cli_json(capsys, "workspace", "list", *connect(local))
    code, _, err = cli(capsys, "workspace", "show", theirs["id"], *connect(local))

    # Then theirs is neither listed nor shown (404), and they list only theirs
    assert theirs["id"] not in {w["id"] for w in listed}
    assert ours in {w["id"] for w in listed}
    assert code == 2
    assert "(HTTP 404 NOT_FOUND)" in one_error_line(err)
    assert [
        w["id"] for w in cli_json(capsys, "workspace", "list", *connect(local, other_token, org))
    ] == [theirs["id"]]

    # And a token without workspace:read is refused
    runs_only = local.token({P.RUN_READ})
    code, _, err = cli(capsys, "workspace", "list", *connect(local, runs_only))
    assert code == 2
    assert "(HTTP 403 FORBIDDEN)" in one_error_line(err)


# --------------------------------------------------------------------------- runs


def test_a_plan_only_run_created_listed_shown_watched_and_its_log_read(
    local: Local, capsys: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace, the example declaring two more variables, a variable file,
    # and a secret in the environment
    ws_id, name = workspace(local, capsys)
    directory = tmp_path / "config"
    directory.mkdir()
    (directory / "main.tf").write_text((HELLO / "main.tf").read_text())
    (directory / "variables.tf").write_text(
        'variable "region" {}\nvariable "token" {\n  sensitive = true\n}\n'
    )
    var_file = tmp_path / "vars.tfvars"
    var_file.write_text(
        '# greeting for the demo\ngreeting = "hi \\"there\\""  // quoted\nregion = "eu"\n'
    )
    monkeypatch.setenv("TF_VAR_token", "from-the-environment")

    # When a plan-only run is created by name with the file, the variable from the
    # environment and one given inline (which overrides the file)
    code, out, err = cli(
        capsys,
        "run",
        "create",
        "--workspace",
        name,
        "--dir",
        str(directory),
        "--kind",
        "plan_only",
        "--var-file",
        str(var_file),
        "--var",
        "token",
        "--var",
        "region=us",
        *connect(local),
    )
    assert code == 0, err
    run_id = out.strip()

    # Then it runs with exactly those values
    assert run_id.startswith("run-")
    assert variables_of(local, run_id) == {
        "greeting": 'hi "there"',
        "region": "us",
        "token": "from-the-environment",
    }

    # When it is watched to the end
    code, out, _ = cli(capsys, "run", "watch", run_id, "--timeout", "180", *connect(local))

    # Then it succeeded (exit 0) and the last lines are the review
    assert code == 0
    assert f"{run_id}  plan_only  Plan completed (succeeded)" in out

    # And show (text and JSON), list and the plan log agree
    code, shown, _ = cli(capsys, "run", "show", run_id, *connect(local))
    assert code == 0
    assert shown.startswith(f"{run_id}  plan_only  Plan completed (succeeded)")
    assert "variables 3" in shown
    assert "    greeting  terraform  from run\n" in shown
    assert "    token  terraform  from run\n" in shown
    review = cli_json(capsys, "run", "show", run_id, *connect(local))
    assert (review["id"], review["status"]) == (run_id, "succeeded")
    listed = cli_json(capsys, "run", "list", "--workspace", ws_id, *connect(local))
    assert [(r["id"], r["kind"], r["status"]) for r in listed] == [
        (run_id, "plan_only", "succeeded")
    ]
    code, text, _ = cli(capsys, "run", "list", "--workspace", name, *connect(local))
    assert text.split()[:3] == [run_id, "plan_only", "succeeded"]
    code, log, _ = cli(capsys, "run", "logs", run_id, *connect(local))
    assert code == 0
    assert "Plan: 1 to add, 0 to change, 0 to destroy." in log
    # (the runner redacts variable values from its log)
    assert "from-the-environment" not in log
    as_json = cli_json(capsys, "run", "logs", run_id, "--phase", "plan", *connect(local))
    assert (as_json["run_id"], as_json["phase"], as_json["log"]) == (run_id, "plan", log)

    # And a plan-only run has no apply log: 404, exit 2
    code, _, err = cli(capsys, "run", "logs", run_id, "--phase", "apply", *connect(local))
    assert code == 2
    assert one_error_line(err) == (
        f"error: apply log of run {run_id} was not found (HTTP 404 NOT_FOUND)"
    )


def test_approve_applies_and_the_apply_log_is_read(local: Local, capsys: Capture) -> None:
    # Given a run awaiting approval (watch --until exits 0 there)
    ws_id, _ = workspace(local, capsys)
    run = cli_json(
        capsys, "run", "create", "--workspace", ws_id, "--dir", str(HELLO), *connect(local)
    )
    waiting = cli_json(
        capsys, "run", "watch", run["id"], "--until", "awaiting_approval", *connect(local)
    )
    assert waiting["status"] == "awaiting_approval"

    # When it is approved with a comment and watched to the end
    approved = cli_json(capsys, "run", "approve", run["id"], "--comment", "ok", *connect(local))
    code, out, _ = cli(capsys, "run", "watch", run["id"], "--timeout", "180", *connect(local))

    # Then it applied, with the decision recorded, and its apply log is there
    assert approved["approval"]["decision"] == "approve"
    assert approved["approval"]["comment"] == "ok"
    assert code == 0
    assert "Applied (succeeded)" in out
    code, log, _ = cli(capsys, "run", "logs", run["id"], "--phase", "apply", *connect(local))
    assert code == 0
    assert "Apply complete! Resources: 1 added" in log


def test_reject_and_cancel_end_runs_and_watch_exits_1(local: Local, capsys: Capture) -> None:
    # Given two runs awaiting approval in two workspaces
    runs = []
    for _ in range(2):
        ws_id, _ = workspace(local, capsys)
        created = cli_json(
            capsys, "run", "create", "--workspace", ws_id, "--dir", str(HELLO), *connect(local)
        )
        runs.append(created["id"])
    for run_id in runs:
        assert main(["run", "watch", run_id, "--until", "awaiting_approval", *connect(local)]) == 0
    rejected_id, canceled_id = runs

    # When watching one gives up before it ends
    code, _, err = cli(capsys, "run", "watch", rejected_id, "--timeout", "0", *connect(local))

    # Then that is a local error, on one line
    assert code == 3
    assert f"run {rejected_id} is still awaiting_approval" in one_error_line(err)

    # When one is rejected and the other canceled
    rejected = cli_json(capsys, "run", "reject", rejected_id, "--comment", "no", *connect(local))
    code, canceled, _ = cli(capsys, "run", "cancel", canceled_id, *connect(local))

    # Then they ended so, and watching an unsuccessful run exits 1
    assert rejected["status"] == "rejected"
    assert code == 0
    assert f"{canceled_id}  plan_and_apply" in canceled
    assert "(canceled)" in canceled.splitlines()[0]
    assert cli(capsys, "run", "watch", rejected_id, *connect(local))[0] == 1
    assert cli(capsys, "run", "watch", canceled_id, "--json", *connect(local))[0] == 1

    # And deciding an ended run is the API's 409 on one line
    code, _, err = cli(capsys, "run", "approve", rejected_id, *connect(local))
    assert code == 2
    assert "(HTTP 409" in one_error_line(err)


def test_override_clears_a_soft_policy_failure(local: Local, capsys: Capture) -> None:
    # Given a soft-mandatory policy, attached, and a run it soft-fails
    ws_id, _ = workspace(local, capsys)
    soft = local.client.publish_policy_set(soft_review_policy(unique("cli-review")))
    attached = cli_json(
        capsys, "policy", "attach", soft["name"], "--workspace", ws_id, *connect(local)
    )
    assert attached["attached_workspaces"] == [ws_id]
    run = local.client.create_run(ws_id, HELLO)
    waiting = local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    assert waiting["policy"]["status"] == "soft_failed"

    # When it is overridden with a reason
    code, out, _ = cli(
        capsys, "run", "override", run["id"], "--reason", "reviewed in CHG-1", *connect(local)
    )

    # Then the policy reads overridden, by whom and why
    assert code == 0
    assert "policy     overridden" in out
    assert "reviewed in CHG-1" in out
    assert local.client.review(run["id"])["policy"]["override"]["reason"] == "reviewed in CHG-1"
    local.client.cancel(run["id"])


def test_run_create_refuses_what_cannot_be_planned_and_writes_nothing(
    local: Local, capsys: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workspace, and directories that hold no configuration
    ws_id, _ = workspace(local, capsys)
    a_file = tmp_path / "main.tf"
    a_file.write_text(PROVIDER_BLOCK)
    empty = tmp_path / "empty"
    empty.mkdir()
    only_state = tmp_path / "only-state"
    (only_state / ".terraform").mkdir(parents=True)
    (only_state / ".terraform" / "x.tf").write_text("")
    (only_state / "README.md").write_text("no configuration here")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"greeting": 3}')
    bad_tfvars = tmp_path / "bad.tfvars"
    bad_tfvars.write_text("greeting = hello\n")
    monkeypatch.delenv("TF_VAR_absent", raising=False)
    artifacts = _artifact_count(local)

    # When runs are created from each
    cases = {
        str(tmp_path / "nonexistent"): "no such directory",
        str(a_file): "not a directory",
        str(empty): "no configuration files",
        str(only_state): "no configuration files",
    }
    for directory, message in cases.items():
        code, _, err = cli(
            capsys, "run", "create", "--workspace", ws_id, "--dir", directory, *connect(local)
        )
        # Then each is refused locally (exit 3) with one line saying why
        assert code == 3, directory
        assert message in one_error_line(err)

    # And so are variables it cannot use
    for flags, message in (
        (["--var", "absent"], "TF_VAR_absent is not set"),
        (["--var", "bad name=x"], "a variable name is"),
        (["--var-file", str(bad_json)], "greeting must be a string"),
        (["--var-file", str(bad_tfvars)], 'line 1: expected NAME = "value"'),
        (["--var-file", str(tmp_path / "missing")], "no such file"),
    ):
        code, _, err = cli(
            capsys,
            "run",
            "create",
            "--workspace",
            ws_id,
            "--dir",
            str(HELLO),
            *flags,
            *connect(local),
        )
        assert code == 3, flags
        assert message in one_error_line(err)

    # And nothing was uploaded or created
    assert cli_json(capsys, "run", "list", "--workspace", ws_id, *connect(local)) == []
    assert _artifact_count(local) == artifacts


# --------------------------------------------------------------------------- errors


def test_user_errors_are_one_line_never_a_traceback(
    local: Local, capsys: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a directory with no credentials file
    monkeypatch.chdir(tmp_path)

    # When the CLI runs without credentials, with a bad token, against nothing
    # listening, or for a run that does not exist
    no_credentials = cli(capsys, "workspace", "list")
    (tmp_path / "broken.json").write_text("{not json")
    broken = cli(capsys, "run", "list", "--workspace", "x", "--credentials", "broken.json")
    bad_token = cli(capsys, "run", "show", "run-x", "--url", local.url, "--token", "nope")
    down = cli(
        capsys, "workspace", "list", "--url", f"http://127.0.0.1:{free_port()}", "--token", "t"
    )
    missing = cli(capsys, "run", "show", "run-doesnotexist", *connect(local))

    # Then each is one error line with its exit code
    assert no_credentials[0] == 3
    assert "no credentials: pass --url and --token" in one_error_line(no_credentials[2])
    assert broken[0] == 3
    assert "broken.json: cannot read credentials" in one_error_line(broken[2])
    assert bad_token[0] == 2
    assert one_error_line(bad_token[2]) == "error: missing or invalid credentials (HTTP 401)"
    assert down[0] == 3
    assert "cannot reach the control plane" in one_error_line(down[2])
    assert missing[0] == 2
    assert one_error_line(missing[2]) == (
        "error: run run-doesnotexist was not found (HTTP 404 NOT_FOUND)"
    )


def test_a_control_plane_url_that_is_no_http_url_is_one_error_line(
    capsys: Capture, tmp_path: Path
) -> None:
    # Given a credentials file whose url is not an HTTP URL
    saved = tmp_path / "credentials.json"
    saved.write_text(json.dumps({"url": "ftp://example.invalid", "token": "t"}))

    # When the CLI is given such a URL by flag or by file
    flag = cli(capsys, "workspace", "list", "--url", "notaurl", "--token", "t")
    file = cli(capsys, "run", "show", "run-x", "--credentials", str(saved))

    # Then each is one line naming the URL, exit 3, and no traceback
    for code, out, err in (flag, file):
        assert code == 3
        assert out == ""
        assert "Traceback" not in err
    assert one_error_line(flag[2]).startswith("error: --url 'notaurl' is not an http(s) URL")
    assert f"{saved}: url 'ftp://example.invalid' is not an http(s) URL" in file[2]


def test_logs_need_run_read_and_stay_in_the_organization(local: Local, capsys: Capture) -> None:
    # Given a planned run
    ws_id, _ = workspace(local, capsys)
    run = local.client.create_run(ws_id, HELLO, kind="plan_only")
    local.client.watch(run["id"], timeout=180)
    url = f"{local.url}/api/v1/runs/{run['id']}/logs/plan"

    # When its log is read with run:read, without it, and from another organization
    reader = requests.get(
        url, headers={"Authorization": f"Bearer {local.token({P.RUN_READ})}"}, timeout=30
    )
    no_read = requests.get(
        url, headers={"Authorization": f"Bearer {local.token({P.WORKSPACE_READ})}"}, timeout=30
    )
    _, other_token = local.other_organization(unique("cli-logs"))
    other = requests.get(url, headers={"Authorization": f"Bearer {other_token}"}, timeout=30)
    bad_phase = requests.get(
        url.replace("/plan", "/destroy"),
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )

    # Then the reader gets the text, the others a typed 403, 404 and 422
    assert reader.status_code == 200
    assert reader.headers["Content-Type"].startswith("text/plain")
    assert "Plan: 1 to add" in reader.text
    assert (no_read.status_code, no_read.json()["code"]) == (403, "FORBIDDEN")
    assert (other.status_code, other.json()["code"]) == (404, "NOT_FOUND")
    assert bad_phase.status_code == 422


# ----------------------------------------------------------------- tokens, policy, controls


def test_token_create_and_revoke(local: Local, capsys: Capture) -> None:
    # When a reader token is issued and revoked through the CLI
    issued = cli_json(capsys, "token", "create", unique("ci"), "--role", "reader", *connect(local))
    workspaces = cli(capsys, "workspace", "list", *connect(local, issued["token"]))
    revoked = cli_json(capsys, "token", "revoke", issued["id"], *connect(local))
    after = cli(capsys, "workspace", "list", *connect(local, issued["token"]))

    # Then it worked until it was revoked
    assert issued["role"] == "reader"
    assert workspaces[0] == 0
    assert revoked == {"id": issued["id"], "revoked": True}
    assert after[0] == 2
    assert "HTTP 401" in one_error_line(after[2])


def test_policy_publish_and_controls_in_json(local: Local, capsys: Capture, tmp_path: Path) -> None:
    # Given an organization of its own (its controls touch no other test)
    org, token = local.other_organization(unique("cli-controls"))
    conn = connect(local, token, org)
    policies = Path(__file__).resolve().parents[2] / "examples" / "policies"
    plan = saved_plan(tmp_path, ["update"])

    # When a policy set is published, listed and tested, and the controls are read and changed
    published = cli_json(capsys, "policy", "publish", str(policies / "deny-delete"), *conn)
    listed = cli_json(capsys, "policy", "list", *conn)
    tested = cli_json(capsys, "policy", "test", str(policies / "deny-delete"), "--plan", str(plan))
    shown = cli_json(capsys, "controls", "show", *conn)
    changed = cli_json(capsys, "controls", "set", "--max-sandboxes", "3", *conn)

    # Then each printed JSON that says so
    assert (published["name"], published["version"]) == ("deny-delete", 1)
    assert [entry["digest"] for entry in listed] == [published["digest"]]
    assert tested["outcome"] == "passed"
    assert shown["max_sandboxes"] is None
    assert changed["max_sandboxes"] == 3


# --------------------------------------------------------------------------- local up


def test_local_up_without_any_engine_fails_at_start_saying_how_to_get_one(
    tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no --engine, no pinned binary (here or in this environment), nothing on PATH
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(empty))

    # When the stack is started
    code, out, err = cli(capsys, "local", "up", "--data-dir", str(tmp_path / "data"))

    # Then it refuses at once, says how to get an engine, and started nothing
    assert code == 3
    line = one_error_line(err)
    assert "no engine found" in line
    assert "--engine" in line
    assert "make engine" in line
    assert out == ""
    assert not (tmp_path / "data").exists()

    # And an --engine that is not there is refused the same way
    code, _, err = cli(capsys, "local", "up", "--engine", str(tmp_path / "nope"))
    assert code == 3
    assert "not an executable file" in one_error_line(err)


def test_local_up_outside_the_clone_finds_the_environments_engine(tmp_path: Path) -> None:
    # Given this environment's pinned engine, a directory outside the clone, and a PATH
    # with no engine on it
    pinned = Path(sys.prefix) / "engine" / "terraform"
    if not pinned.is_file():
        pytest.skip("this environment has no pinned engine (make engine)")
    path = os.pathsep.join(
        d
        for d in ("/usr/bin", "/bin")
        if not any((Path(d) / n).exists() for n in ("tofu", "terraform"))
    )
    port = free_port()

    # When `runplane local up` starts there
    process = subprocess.Popen(
        [sys.executable, "-m", "runplane.cli", "local", "up", "--port", str(port)],
        cwd=tmp_path,
        env={**os.environ, "PATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        text = local_up_banner(process)

        # Then it is up, running the environment's engine
        assert f"http://127.0.0.1:{port}" in text, text
        assert f"engine:       {pinned.resolve()}" in text
        assert (tmp_path / ".runplane" / "credentials.json").exists()
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output


@linux_amd64
def test_the_stacks_terraform_rc_installs_the_providers_runs_use(
    local: Local, tmp_path: Path
) -> None:
    # Given the terraform.rc the stack wrote, and a configuration using its test provider
    rc = local.stack.data_dir / "terraform.rc"
    work = tmp_path / "work"
    work.mkdir()
    (work / "main.tf").write_text(PROVIDER_BLOCK + thing("a", "alpha"), encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()

    def engine(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(engine_path()), *args, "-no-color"],
            cwd=work,
            env=engine_env(home, rc),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    # When a native client initialises and plans it with that file
    init = engine("init", "-input=false")
    plan = engine("plan", "-input=false")

    # Then the provider came from the stack's mirror and plans the resource
    assert init.returncode == 0, init.stdout + init.stderr
    assert "Installing runplane/test v0.1.0" in init.stdout
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "Plan: 1 to add" in plan.stdout
