"""Run options end to end: destroy, targeted, replace and refresh-only runs created with
the CLI (``runplane.cli.main``) and with stock Terraform through the ``remote`` backend,
planned by the real engine in the sandbox, approved and applied under the fenced lock."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from runplane.client import Client as RunplaneClient
from runplane.client import Connection
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cli import Capture, cli, cli_json, connect, one_error_line, workspace
from tests.e2e.test_managed_runs import HELLO
from tests.e2e.test_native_remote_runs import (
    Client,
    _archive,
    _new_version,
    _run_body,
    remote_workspace,
    run_of,
    runs_of,
    tfe,
)
from tests.e2e.test_test_provider import thing

pytestmark = pytest.mark.e2e

PROVIDERS = """\
terraform {
  required_providers {
    test = {
      source  = "runplane/test"
      version = "0.1.0"
    }
  }
}
"""


def configuration(
    tmp_path: Path, *labels: str, name: str = "cfg", contents: dict[str, str] | None = None
) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    given = contents or {}
    text = PROVIDERS + "".join(
        thing(label, label, **({"content": given[label]} if label in given else {}))
        for label in labels
    )
    (directory / "main.tf").write_text(text, encoding="utf-8")
    return directory


def applied(local: Local, capsys: Capture, ws_id: str, directory: Path, *options: str) -> Any:
    """Create a run with ``options``, approve it once it waits, and watch it end."""
    run = cli_json(
        capsys, "run", "create", "--workspace", ws_id, "--dir", str(directory), *options,
        *connect(local),
    )  # fmt: skip
    waiting = cli_json(
        capsys, "run", "watch", run["id"], "--until", "awaiting_approval", *connect(local)
    )
    assert waiting["status"] == "awaiting_approval", waiting
    cli_json(capsys, "run", "approve", run["id"], *connect(local))
    code, _, _ = cli(capsys, "run", "watch", run["id"], "--timeout", "180", *connect(local))
    ended = cli_json(capsys, "run", "show", run["id"], *connect(local))
    if code != 0:
        _, log, _ = cli(capsys, "run", "logs", run["id"], "--phase", "apply", *connect(local))
        raise AssertionError((ended["status"], ended["status_reason"], ended.get("apply"), log))
    return ended


def managed(local: Local, ws_id: str) -> list[str]:
    """The addresses of the managed resources in the workspace's current state."""
    current = tfe(local, "GET", f"/workspaces/{ws_id}/current-state-version")
    if current.status_code == 404:
        return []
    url = current.json()["data"]["attributes"]["hosted-state-download-url"]
    state = requests.get(
        url, headers={"Authorization": f"Bearer {local.admin_token}"}, timeout=30
    ).json()
    return sorted(
        f"{r['type']}.{r['name']}" for r in state["resources"] if r.get("mode") == "managed"
    )


def test_targeted_replace_and_destroy_runs_through_the_cli(
    local: Local, capsys: Capture, tmp_path: Path
) -> None:
    # Given a workspace that manages test_thing.a and test_thing.b
    ws_id, _ = workspace(local, capsys, "options")
    first = applied(local, capsys, ws_id, configuration(tmp_path, "a", "b"))
    assert first["input"]["options"] == {
        "destroy": False,
        "refresh_only": False,
        "targets": [],
        "replacements": [],
    }
    assert managed(local, ws_id) == ["test_thing.a", "test_thing.b"]

    # When a configuration adding c and d is applied with --target test_thing.c
    grown = configuration(tmp_path, "a", "b", "c", "d", name="grown")
    targeted = applied(local, capsys, ws_id, grown, "--target", "test_thing.c")

    # Then only c was added, and the review says what was targeted
    assert targeted["input"]["options"]["targets"] == ["test_thing.c"]
    assert targeted["plan"]["summary"]["adds"] == 1
    assert managed(local, ws_id) == ["test_thing.a", "test_thing.b", "test_thing.c"]

    # When test_thing.a's content changes (an in-place update) with --replace
    same = configuration(tmp_path, "a", "b", "c", name="same", contents={"a": "v2"})
    replaced = applied(local, capsys, ws_id, same, "--replace", "test_thing.a")

    # Then the plan replaced it instead of updating it
    summary = replaced["plan"]["summary"]
    assert (summary["adds"], summary["changes"], summary["destroys"]) == (1, 0, 1)
    assert replaced["input"]["options"]["replacements"] == ["test_thing.a"]

    # When the workspace requires a second approver for destroys, and a destroy run is
    # created and shown
    rule = cli_json(
        capsys, "workspace", "update", ws_id, "--second-approver-for-destroy", "yes",
        *connect(local),
    )  # fmt: skip
    assert rule["second_approval"] == {
        "destroy_runs": True,
        "destroys_over": None,
        "separation_of_duties": False,
    }
    run = cli_json(
        capsys, "run", "create", "--workspace", ws_id, "--dir", str(same), "--destroy",
        *connect(local),
    )  # fmt: skip
    cli_json(capsys, "run", "watch", run["id"], "--until", "awaiting_approval", *connect(local))
    code, shown, _ = cli(capsys, "run", "show", run["id"], *connect(local))

    # Then the review says DESTROY on its second line, and that two approvers are needed
    assert code == 0
    assert shown.splitlines()[1].startswith("  DESTROY")
    assert "two approvers needed (none yet)" in shown

    # When the admin approves, then approves again
    first = cli_json(capsys, "run", "approve", run["id"], *connect(local))
    code, _, err = cli(capsys, "run", "approve", run["id"], *connect(local))

    # Then the run still waits for another person, and the second try is refused
    assert (first["status"], first["approval"]["status"]) == ("awaiting_approval", "waiting_second")
    assert "HTTP 403" in one_error_line(err)
    assert "second approver" in err

    # When another person (an operator's token) approves, the destroy is applied
    other = cli_json(
        capsys, "token", "create", unique("second"), "--role", "operator", *connect(local)
    )
    cli_json(capsys, "run", "approve", run["id"], *connect(local, other["token"]))
    code, _, err = cli(capsys, "run", "watch", run["id"], "--timeout", "180", *connect(local))
    assert code == 0, err
    destroyed = cli_json(capsys, "run", "show", run["id"], *connect(local))
    assert destroyed["plan"]["summary"]["destroys"] == 3
    # And the workspace manages nothing any more
    assert managed(local, ws_id) == []


def test_bad_options_are_one_error_line_and_create_no_run(
    local: Local, capsys: Capture, tmp_path: Path
) -> None:
    # Given a workspace and a configuration
    ws_id, _ = workspace(local, capsys, "bad-options")
    directory = configuration(tmp_path, "a")

    # When runs are asked with options that cannot be carried out
    asked = [
        ("--target", "test_thing"),
        ("--target=-destroy",),
        ("--replace", "module.app"),
        ("--replace", "data.test_thing.a"),
        ("--destroy", "--refresh-only"),
        ("--destroy", "--replace", "test_thing.a"),
    ]
    errors = []
    for options in asked:
        code, _, err = cli(
            capsys, "run", "create", "--workspace", ws_id, "--dir", str(directory), *options,
            *connect(local),
        )  # fmt: skip
        assert code != 0, options
        errors.append(one_error_line(err))

    # Then each says what is wrong, and no run exists
    assert "is not a valid address" in errors[0]
    assert "a replacement names one managed resource instance" in errors[2]
    assert "either destroys or only refreshes" in errors[4]
    assert cli_json(capsys, "run", "list", "--workspace", ws_id, *connect(local)) == []


def test_the_run_api_refuses_too_many_addresses_with_a_pointer(local: Local) -> None:
    # Given a workspace and an uploaded configuration version
    ws_id = local.client.create_workspace(unique("too-many-targets"))["id"]
    version = local.client.upload_configuration(ws_id, HELLO)

    # When a run names 101 targets, or a target with a space
    too_many = {f"test_thing.t{i}" for i in range(101)}
    replies = [
        requests.post(
            f"{local.url}/api/v1/workspaces/{ws_id}/runs",
            json={
                "kind": "plan_and_apply",
                "configuration_version_id": version["id"],
                **body,
            },
            headers={"Authorization": f"Bearer {local.admin_token}"},
            timeout=30,
        )
        for body in ({"targets": sorted(too_many)}, {"targets": ["test_thing.a", "a b"]})
    ]

    # Then both are 422 with a pointer into the request, and no run exists
    assert [r.status_code for r in replies] == [422, 422], [r.text for r in replies]
    assert replies[1].json()["pointer"] == "/targets/1"
    assert local.client.list_runs(ws_id) == []


# -- stock Terraform through the remote backend ----------------------------------------------


def _waiting_second(local: Local, ws_id: str) -> str:
    """The workspace's run whose first approval (the client's "yes") is recorded."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for run in local.client.list_runs(ws_id):
            approval = local.client.review(run["id"]).get("approval") or {}
            if approval.get("status") == "waiting_second":
                return str(run["id"])
        time.sleep(0.5)
    raise AssertionError(f"no run of {ws_id} got its first approval")


def remote_client(local: Local, tmp_path: Path, prefix: str, *labels: str) -> tuple[Client, str]:
    name, ws_id = remote_workspace(local, prefix)
    text = PROVIDERS + "".join(thing(label, label) for label in labels)
    return Client(local, tmp_path, name, text), ws_id


def test_terraform_destroy_through_the_remote_backend(local: Local, tmp_path: Path) -> None:
    # Given a remote workspace whose configuration was applied
    client, ws_id = remote_client(local, tmp_path, "remote-destroy", "a", "b")
    done = client.run("apply", "-input=true", stdin="yes\n")
    assert done.returncode == 0, done.stdout + done.stderr

    # When `terraform destroy` is answered "no"
    kept = client.run("destroy", "-input=true", stdin="no\n")

    # Then it was discarded and changed nothing
    assert kept.returncode != 0
    assert "Destroy discarded." in kept.stdout + kept.stderr
    assert local.client.review(run_of(kept.stdout))["status"] == "rejected"

    # When the workspace requires a second approver for destroys, and `terraform
    # destroy` is answered "yes"
    local.client.update_workspace(ws_id, second_approval={"destroy_runs": True})
    destroying = client.start("destroy", "-input=true")
    assert destroying.stdin is not None
    assert destroying.stdout is not None
    destroying.stdin.write("yes\n")
    destroying.stdin.flush()
    run_id = _waiting_second(local, ws_id)

    # Then the client waits for another person, and applies once one approves
    time.sleep(2)
    assert destroying.poll() is None, "the client stopped before the second approval"
    token = local.client.create_token(unique("second-approver"), "operator")["token"]
    second = RunplaneClient(Connection(local.url, token, local.organization))
    second.decide(run_id, "approve", "second pair of eyes")
    output, _ = destroying.communicate(timeout=180)
    assert destroying.returncode == 0, output
    assert "Plan: 0 to add, 0 to change, 2 to destroy." in output
    read = tfe(local, "GET", f"/runs/{run_id}").json()["data"]["attributes"]
    assert (read["is-destroy"], read["status"]) == (True, "applied")
    assert local.client.review(run_id)["input"]["options"]["destroy"] is True
    assert managed(local, ws_id) == []


def test_targeted_replace_and_refresh_only_applies_through_the_remote_backend(
    local: Local, tmp_path: Path
) -> None:
    # Given a remote workspace managing a and b
    client, ws_id = remote_client(local, tmp_path, "remote-target", "a", "b")
    done = client.run("apply", "-input=true", stdin="yes\n")
    assert done.returncode == 0, done.stdout + done.stderr

    # When c is added to the configuration and applied with -target
    main_tf = client.directory / "main.tf"
    main_tf.write_text(main_tf.read_text("utf-8") + thing("c", "c") + thing("d", "d"), "utf-8")
    targeted = client.run("apply", "-input=true", "-target=test_thing.c", stdin="yes\n")

    # Then only c was added, and the run says what it targeted
    assert targeted.returncode == 0, targeted.stdout + targeted.stderr
    read = tfe(local, "GET", f"/runs/{run_of(targeted.stdout)}").json()["data"]["attributes"]
    assert (read["status"], read["target-addrs"]) == ("applied", ["test_thing.c"])
    assert managed(local, ws_id) == ["test_thing.a", "test_thing.b", "test_thing.c"]

    # When a's content changes (an in-place update) and it is applied with -replace,
    # then a refresh-only apply is confirmed
    text = main_tf.read_text("utf-8")
    main_tf.write_text(text.replace(thing("a", "a"), thing("a", "a", content="v2")), "utf-8")
    replaced = client.run(
        "apply", "-input=true", "-replace=test_thing.a", "-target=test_thing.a", stdin="yes\n"
    )
    refreshed = client.run("apply", "-input=true", "-refresh-only", stdin="yes\n")

    # Then the replace destroyed and created a, and the refresh-only run applied nothing
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    assert "Plan: 1 to add, 0 to change, 1 to destroy." in replaced.stdout
    replace_run = local.client.review(run_of(replaced.stdout))
    assert replace_run["status"] == "succeeded"
    assert replace_run["input"]["options"]["replacements"] == ["test_thing.a"]
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    refresh_run = tfe(local, "GET", f"/runs/{run_of(refreshed.stdout)}").json()["data"]
    assert refresh_run["attributes"]["refresh-only"] is True
    assert managed(local, ws_id) == ["test_thing.a", "test_thing.b", "test_thing.c"]


def test_a_bad_target_through_the_cloud_api_is_refused_with_what_to_do(local: Local) -> None:
    # Given a remote workspace
    _, ws_id = remote_workspace(local, "remote-bad-target")
    cv = _new_version(local, ws_id)
    assert requests.put(cv["attributes"]["upload-url"], data=_archive(), timeout=30).ok

    # When a run targets something that is not an address, or destroys and replaces
    refused = [
        tfe(local, "POST", "/runs", _run_body(ws_id, cv["id"], **attributes))
        for attributes in (
            {"target-addrs": ["test_thing.x", "not an address"]},
            {"is-destroy": True, "replace-addrs": ["test_thing.x"]},
        )
    ]

    # Then each is a 422 pointing at the attribute, and no run exists
    assert [r.status_code for r in refused] == [422, 422], [r.text for r in refused]
    pointers = [r.json()["errors"][0]["source"]["pointer"] for r in refused]
    assert pointers == ["/data/attributes/target-addrs/1", "/data/attributes/replace-addrs"]
    assert "is not a valid address" in json.dumps(refused[0].json())
    assert runs_of(local, ws_id) == []
