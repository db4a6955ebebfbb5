"""A native client (Terraform 1.0.3, the offline OpenTofu-compatible engine) uses a
Runplane workspace as its `remote` backend, over real HTTP."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import requests

from runplane.domain.identity import Permission
from tests.e2e.conftest import Local, unique
from tests.engine import engine_env, engine_path

P = Permission
HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello"


def backend(local: Local, workspace: str) -> str:
    host = local.url.split("://", 1)[1]
    return f"""
terraform {{
  backend "remote" {{
    hostname     = "{host}"
    organization = "{local.organization}"
    workspaces {{
      name = "{workspace}"
    }}
  }}
}}
"""


class Engine:
    def __init__(self, directory: Path, cli_config: Path) -> None:
        self.directory = directory
        self.env = engine_env(directory, cli_config)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(engine_path()), *args],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{args} failed:\n{result.stdout}\n{result.stderr}")
        return result


def configuration(
    tmp_path: Path, name: str, text: str, local: Local, token: str | None = None
) -> Engine:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "main.tf").write_text(text, encoding="utf-8")
    return Engine(directory, local.cli_config(directory, token))


def api(local: Local, path: str, token: str | None = None) -> requests.Response:
    return requests.get(
        f"{local.url}/api/v2{path}",
        headers={"Authorization": f"Bearer {token or local.admin_token}"},
        timeout=30,
    )


def workspace_id(local: Local, name: str) -> str:
    found = api(local, f"/organizations/{local.organization}/workspaces/{name}")
    assert found.status_code == 200, found.text
    return str(found.json()["data"]["id"])


def current_state(local: Local, name: str) -> dict:  # type: ignore[type-arg]
    found = api(local, f"/workspaces/{workspace_id(local, name)}/current-state-version")
    assert found.status_code == 200, found.text
    return found.json()["data"]  # type: ignore[no-any-return]


def test_state_lives_in_the_workspace_across_applies_and_configurations(
    local: Local, tmp_path: Path
) -> None:
    # Given a configuration whose state lives in a Runplane workspace
    name = unique("network")
    producer = configuration(
        tmp_path,
        "producer",
        backend(local, name) + 'variable "v" {}\noutput "greeting" { value = "hello ${var.v}" }\n',
        local,
    )

    # When it is applied twice with different values
    producer.run("init", "-input=false")
    producer.run("apply", "-auto-approve", "-input=false", "-var", "v=one")
    first = current_state(local, name)
    producer.run("apply", "-auto-approve", "-input=false", "-var", "v=two")
    second = current_state(local, name)

    # Then the serial moved forward and the lineage stayed
    assert second["attributes"]["serial"] == first["attributes"]["serial"] + 1
    assert second["attributes"]["lineage"] == first["attributes"]["lineage"]
    assert second["id"] != first["id"]

    # And `state pull` returns exactly the stored version
    pulled = producer.run("state", "pull").stdout
    stored = requests.get(
        second["attributes"]["hosted-state-download-url"],
        headers={"Authorization": f"Bearer {local.admin_token}"},
        timeout=30,
    )
    assert json.loads(pulled) == json.loads(stored.content)
    assert json.loads(stored.content)["outputs"]["greeting"]["value"] == "hello two"

    # And another configuration reads its outputs through terraform_remote_state
    host = local.url.split("://", 1)[1]
    consumer = configuration(
        tmp_path,
        "consumer",
        f"""
data "terraform_remote_state" "network" {{
  backend = "remote"
  config = {{
    hostname     = "{host}"
    organization = "{local.organization}"
    workspaces = {{ name = "{name}" }}
  }}
}}
output "seen" {{ value = data.terraform_remote_state.network.outputs.greeting }}
""",
        local,
    )
    consumer.run("init", "-input=false")
    consumer.run("apply", "-auto-approve", "-input=false")
    seen = json.loads(consumer.run("output", "-json").stdout)
    assert seen["seen"]["value"] == "hello two"


def test_a_client_is_blocked_while_another_holds_the_lock(local: Local, tmp_path: Path) -> None:
    # Given a workspace with state, locked by another principal
    name = unique("locked")
    engine = configuration(
        tmp_path, "cfg", backend(local, name) + 'output "x" { value = 1 }\n', local
    )
    engine.run("init", "-input=false")
    engine.run("apply", "-auto-approve", "-input=false")
    other = local.token([P.WORKSPACE_READ, P.WORKSPACE_LOCK], name="colleague")
    ws = workspace_id(local, name)
    locked = requests.post(
        f"{local.url}/api/v2/workspaces/{ws}/actions/lock",
        headers={"Authorization": f"Bearer {other}"},
        json={"reason": "maintenance"},
        timeout=30,
    )
    assert locked.status_code == 200, locked.text
    before = current_state(local, name)["id"]

    # When this client applies
    blocked = engine.run("apply", "-auto-approve", "-input=false", "-lock-timeout=0s", check=False)

    # Then it fails on the lock and the state did not move
    assert blocked.returncode != 0
    assert "lock" in (blocked.stderr + blocked.stdout).lower()
    assert current_state(local, name)["id"] == before


@pytest.mark.parametrize("allowed", [False, True])
def test_force_unlock_needs_the_permission(local: Local, tmp_path: Path, allowed: bool) -> None:
    # Given a workspace locked by a colleague
    name = unique("stuck")
    engine = configuration(
        tmp_path, "cfg", backend(local, name) + 'output "x" { value = 1 }\n', local
    )
    engine.run("init", "-input=false")
    engine.run("apply", "-auto-approve", "-input=false")
    colleague = local.token([P.WORKSPACE_READ, P.WORKSPACE_LOCK], name="colleague")
    ws = workspace_id(local, name)
    requests.post(
        f"{local.url}/api/v2/workspaces/{ws}/actions/lock",
        headers={"Authorization": f"Bearer {colleague}"},
        timeout=30,
    ).raise_for_status()

    # When an operator with or without force-unlock uses the CLI
    permissions = [P.WORKSPACE_READ, P.WORKSPACE_LOCK, P.STATE_READ]
    if allowed:
        permissions.append(P.WORKSPACE_FORCE_UNLOCK)
    operator = configuration(
        tmp_path,
        "operator",
        backend(local, name),
        local,
        token=local.token(permissions, "operator"),
    )
    operator.run("init", "-input=false")
    result = operator.run("force-unlock", "-force", f"{local.organization}/{name}", check=False)

    # Then only the permitted one unlocks the workspace
    still_locked = api(local, f"/workspaces/{ws}").json()["data"]["attributes"]["locked"]
    assert (result.returncode == 0) is allowed, result.stderr
    assert still_locked is not allowed


def test_two_processes_sharing_a_token_cannot_both_hold_the_lock(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace with state, and two working directories using the same token
    name = unique("shared-token")
    text = backend(local, name) + 'variable "v" {}\noutput "who" { value = var.v }\n'
    first = configuration(tmp_path, "first", text, local)
    second = configuration(tmp_path, "second", text, local)
    first.run("init", "-input=false")
    second.run("init", "-input=false")
    first.run("apply", "-auto-approve", "-input=false", "-var", "v=setup")
    before = current_state(local, name)

    # ... and the first process holding the lock, waiting at its approval prompt
    holder = subprocess.Popen(
        [str(engine_path()), "apply", "-var", "v=first"],
        cwd=first.directory,
        env=first.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert holder.stdout is not None
        seen = ""
        while "Enter a value:" not in seen:
            chunk = holder.stdout.read(1)
            assert chunk, f"the first apply ended before its prompt:\n{seen}"
            seen += chunk
        ws = api(local, f"/workspaces/{workspace_id(local, name)}").json()["data"]
        assert ws["attributes"]["locked"] is True

        # When the second process applies with the same token
        blocked = second.run(
            "apply",
            "-auto-approve",
            "-input=false",
            "-lock-timeout=0s",
            "-var",
            "v=second",
            check=False,
        )

        # Then it fails on the lock, and the state did not move
        assert blocked.returncode != 0, blocked.stdout
        assert "workspace already locked" in blocked.stderr + blocked.stdout
        assert current_state(local, name)["id"] == before["id"]

        # When the first process is approved
        rest, _ = holder.communicate("yes\n", timeout=180)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()

    # Then it applies and unlocks: its state is current and the workspace is free
    assert holder.returncode == 0, seen + rest
    after = current_state(local, name)
    assert after["attributes"]["serial"] == before["attributes"]["serial"] + 1
    ws = api(local, f"/workspaces/{workspace_id(local, name)}").json()["data"]
    assert ws["attributes"]["locked"] is False
    assert json.loads(second.run("output", "-json").stdout)["who"]["value"] == "first"


def test_a_workspace_held_by_a_managed_run_blocks_the_lock_and_lock_timeout_waits_it_out(
    local: Local, tmp_path: Path
) -> None:
    # Given a managed run awaiting approval: it holds the workspace's writer reservation
    name = unique("held-by-run")
    ws = str(local.client.create_workspace(name)["id"])
    run = local.client.create_run(ws, HELLO)
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)
    engine = configuration(
        tmp_path, "cfg", backend(local, name) + 'output "x" { value = 1 }\n', local
    )
    engine.run("init", "-input=false")

    # When this client applies without waiting for the lock
    blocked = engine.run(
        "apply", "-auto-approve", "-input=false", "-lock-timeout=0s", "-no-color", check=False
    )

    # Then Terraform 1.0.3 prints only its own words for the 409: the body that names
    # the run is never read (docs/cloud-api.md). Its diagnostics wrap long lines, so the
    # words are compared with the wrapping (and any box drawing) taken out.
    printed = blocked.stdout + blocked.stderr
    words = " ".join(printed.replace("│", " ").split())
    assert blocked.returncode != 0
    assert f'workspace already locked (lock ID: "{local.organization}/{name}")' in words
    assert run["id"] not in printed

    # When it applies again with a lock timeout, and the run is rejected while it waits
    waiting = subprocess.Popen(
        [str(engine_path()), "apply", "-auto-approve", "-input=false", "-lock-timeout=120s"],
        cwd=engine.directory,
        env=engine.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert waiting.stdout is not None
        first = waiting.stdout.readline()
        local.client.decide(run["id"], "reject", "making way")
        rest, _ = waiting.communicate(timeout=180)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()

    # Then it kept retrying the lock and applied once the run had ended
    assert first.startswith("Acquiring state lock"), first + rest
    assert waiting.returncode == 0, first + rest
    assert "Apply complete!" in rest
    assert local.client.review(run["id"])["status"] == "rejected"
    assert json.loads(engine.run("output", "-json").stdout)["x"]["value"] == 1
