"""Remote operations: a stock Terraform 1.0.3 `remote` backend runs `plan` and `apply`
as managed runs in a workspace in remote execution mode, over real HTTP."""

from __future__ import annotations

import gzip
import io
import os
import re
import signal
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from pytfe import TFEClient, TFEConfig

from runplane.local.stack import Credentials, terraform_rc
from runplane.store import run_parts
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local, unique
from tests.e2e.test_cancellation import SLOW_PLAN
from tests.e2e.test_managed_runs import HELLO
from tests.e2e.test_terraform_remote_backend import backend
from tests.engine import engine_env, engine_path

RUN_ID = re.compile(r"/runs/(run-[a-z2-7]{26})")
# The link the remote backend prints to view a run in a browser: the path after the host.
RUN_LINK = re.compile(r"https://[^/\s]+(/app/[^/\s]+/[^/\s]+/runs/run-[a-z2-7]{26})")
# The first line of a plan's log, as the client streams it.
STREAMING = re.compile(r"Initializing the backend")
# What the client prints while its run waits behind others, and at its prompt.
WAITING = re.compile(r"Waiting for \d+ run\(s\) to finish before being queued")
CONFIRMATION = re.compile(r"Do you want to perform these actions")


def tfe(local: Local, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(
        method,
        f"{local.url}/api/v2{path}",
        json=body,
        headers={
            "Authorization": f"Bearer {local.admin_token}",
            "Content-Type": "application/vnd.api+json",
        },
        timeout=30,
    )


def remote_workspace(local: Local, prefix: str) -> tuple[str, str]:
    """A workspace switched to remote execution with the TFE PATCH."""
    name = unique(prefix)
    created = tfe(
        local,
        "POST",
        f"/organizations/{local.organization}/workspaces",
        {"data": {"type": "workspaces", "attributes": {"name": name}}},
    )
    assert created.status_code == 201, created.text
    ws_id = created.json()["data"]["id"]
    patched = tfe(
        local,
        "PATCH",
        f"/workspaces/{ws_id}",
        {"data": {"type": "workspaces", "attributes": {"execution-mode": "remote"}}},
    )
    assert patched.status_code == 200, patched.text
    return name, ws_id


class Client:
    """A Terraform 1.0.3 working directory whose backend is the workspace."""

    def __init__(self, local: Local, tmp_path: Path, workspace: str, text: str) -> None:
        self.directory = tmp_path / "config"
        self.directory.mkdir()
        (self.directory / "main.tf").write_text(backend(local, workspace) + text, "utf-8")
        # Outside the directory: the uploaded configuration must not carry the token.
        rc = tmp_path / "terraform.rc"
        creds = Credentials(local.url, local.organization, local.admin_token)
        rc.write_text(terraform_rc(creds, local.stack.provider_mirror), encoding="utf-8")
        self.env = engine_env(tmp_path, rc)
        init = self.run("init", "-input=false")
        assert init.returncode == 0, init.stdout + init.stderr

    def run(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(engine_path()), *args, "-no-color"],
            cwd=self.directory,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(engine_path()), *args, "-no-color"],
            cwd=self.directory,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Its own process group: an interrupt reaches it as Ctrl-C in a terminal does.
            start_new_session=True,
        )


def hello(local: Local, tmp_path: Path, workspace: str) -> Client:
    text = (HELLO / "main.tf").read_text(encoding="utf-8")
    return Client(local, tmp_path, workspace, text)


def run_of(output: str) -> str:
    found = RUN_ID.search(output)
    assert found, output
    return found[1]


def runs_of(local: Local, ws_id: str) -> list[dict[str, Any]]:
    listed = tfe(local, "GET", f"/workspaces/{ws_id}/runs")
    assert listed.status_code == 200, listed.text
    return listed.json()["data"]  # type: ignore[no-any-return]


def test_plan_streams_the_sandbox_plan_and_never_takes_the_writer(
    local: Local, tmp_path: Path
) -> None:
    # Given a workspace switched to remote execution mode
    name, ws_id = remote_workspace(local, "remote-plan")
    shown = tfe(local, "GET", f"/workspaces/{ws_id}").json()["data"]["attributes"]
    assert (shown["execution-mode"], shown["operations"]) == ("remote", True)
    client = hello(local, tmp_path, name)

    # When `terraform plan` runs through the remote backend
    planned = client.run("plan", "-input=false")

    # Then it ends 0 with the sandbox's plan streamed back, and the policy check shown
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "Plan: 1 to add, 0 to change, 0 to destroy." in planned.stdout
    assert "Runplane policy check: passed" in planned.stdout
    # And it was a speculative managed run that never held the workspace
    run_id = run_of(planned.stdout)
    review = local.client.review(run_id)
    assert (review["kind"], review["status"]) == ("speculative", "succeeded")
    read = tfe(local, "GET", f"/runs/{run_id}?include=plan").json()
    assert read["data"]["attributes"]["status"] == "planned_and_finished"
    assert read["included"][0]["attributes"]["resource-additions"] == 1
    workspace = local.client.workspace(ws_id)
    assert workspace["writer_run_id"] is None
    assert workspace["locked"] is False
    assert run_parts.get(run_id, "approval", reads=IdentityMap()) is None
    # And the link Terraform printed to view the run leads to the run's dashboard page
    link = RUN_LINK.search(planned.stdout)
    assert link is not None, planned.stdout
    assert link[1] == f"/app/{local.organization}/{name}/runs/{run_id}"
    opened = requests.get(f"{local.url}{link[1]}", allow_redirects=False, timeout=30)
    assert (opened.status_code, opened.headers["Location"]) == (302, f"/ui/runs/{run_id}")


def test_apply_confirmed_with_yes_applies_and_moves_the_state_with_provenance(
    local: Local, tmp_path: Path
) -> None:
    # Given a remote workspace and a configuration with one resource
    name, ws_id = remote_workspace(local, "remote-apply")
    client = hello(local, tmp_path, name)

    # When `terraform apply` is confirmed with "yes"
    applied = client.run("apply", "-input=true", stdin="yes\n")

    # Then the run applied through approval, and the state moved with its provenance
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Do you want to perform these actions" in applied.stdout
    run_id = run_of(applied.stdout)
    review = local.client.review(run_id)
    assert (review["status"], review["label"]) == ("succeeded", "Applied")
    assert review["approval"]["status"] == "approved"
    state = tfe(local, "GET", f"/workspaces/{ws_id}/current-state-version").json()["data"]
    assert state["relationships"]["run"]["data"]["id"] == run_id
    # And the TFE views agree
    run = tfe(local, "GET", f"/runs/{run_id}?include=apply").json()
    assert run["data"]["attributes"]["status"] == "applied"
    assert run["included"][0]["attributes"]["status"] == "finished"


def test_answering_no_discards_the_run_and_applies_nothing(local: Local, tmp_path: Path) -> None:
    # Given a remote workspace
    name, ws_id = remote_workspace(local, "remote-discard")
    client = hello(local, tmp_path, name)

    # When the apply's confirmation is answered "no"
    refused = client.run("apply", "-input=true", stdin="no\n")

    # Then the client reports the discard, the run is rejected, and no state exists
    assert refused.returncode != 0
    assert "Apply discarded." in refused.stdout + refused.stderr
    run_id = run_of(refused.stdout)
    review = local.client.review(run_id)
    assert review["status"] == "rejected"
    assert review["apply"]["status"] == "closed"
    assert tfe(local, "GET", f"/runs/{run_id}").json()["data"]["attributes"]["status"] == (
        "discarded"
    )
    assert tfe(local, "GET", f"/workspaces/{ws_id}/current-state-version").status_code == 404


def test_an_apply_behind_another_run_says_how_many_runs_are_ahead_then_plans(
    local: Local, tmp_path: Path
) -> None:
    # Given a remote workspace held by a managed run awaiting approval
    name, ws_id = remote_workspace(local, "remote-queue")
    first = local.client.create_run(ws_id, HELLO)
    local.client.watch(first["id"], until=["awaiting_approval"], timeout=180)
    client = hello(local, tmp_path, name)

    # When `terraform apply` runs there
    process = client.start("apply", "-input=true")
    output = _Output(process)
    try:
        printed = output.until(WAITING, timeout=120)

        # Then it says how many runs its run waits for, which is pending behind the first
        # (Terraform 1.0.3 counts them; it names none)
        assert "Waiting for 1 run(s) to finish before being queued..." in printed
        assert "Waiting for the plan to start" not in printed
        run_id = run_of(printed)
        attributes = tfe(local, "GET", f"/runs/{run_id}").json()["data"]["attributes"]
        assert (attributes["status"], attributes["runplane-waiting-for"]) == (
            "pending",
            first["id"],
        )
        workspace = tfe(local, "GET", f"/workspaces/{ws_id}").json()["data"]
        assert workspace["relationships"]["current-run"]["data"]["id"] == first["id"]

        # When the first run is rejected
        local.client.decide(first["id"], "reject", "making way")

        # Then the apply's run plans and asks for confirmation, and "no" discards it
        output.until(CONFIRMATION, timeout=180)
        printed = output.after_answering(process, "no\n", timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Plan: 1 to add, 0 to change, 0 to destroy." in printed
    assert "Apply discarded." in printed
    assert local.client.review(run_id)["status"] == "rejected"


def test_an_interrupt_while_planning_cancels_the_run(local: Local, tmp_path: Path) -> None:
    # Given `terraform plan` of a slow plan running in a remote workspace
    name, ws_id = remote_workspace(local, "remote-cancel")
    client = Client(local, tmp_path, name, SLOW_PLAN)
    process = client.start("plan", "-input=true")
    # (the client must know its run before the interrupt: interrupted while its
    # create call is still in flight, Terraform stops without canceling anything)
    output = _Output(process)
    run_id = run_of(output.until(RUN_ID, timeout=120))
    assert run_id in {run["id"] for run in runs_of(local, ws_id)}
    # (and must be streaming the plan's log: interrupted while it still polls for the plan
    # to start, a poll in flight ends Terraform 1.0.3 without canceling either)
    output.until(STREAMING, timeout=120)
    attempt = run_parts.get(run_id, "attempt#plan", reads=IdentityMap())
    assert attempt is not None
    assert attempt.state == "started"

    # When the client is interrupted and confirms the cancellation
    os.killpg(process.pid, signal.SIGINT)
    printed = output.after_answering(process, "yes\n", timeout=120)

    # Then the managed run is canceled and the client says so (Terraform 1.0.3 still
    # exits 0: it judges the run by the status it read before canceling)
    status = local.client.review(run_id)["status"]
    assert "The remote operation was successfully cancelled." in printed, (status, printed)
    assert local.client.review(run_id)["status"] == "canceled"
    assert tfe(local, "GET", f"/runs/{run_id}").json()["data"]["attributes"]["status"] == (
        "canceled"
    )


class _Output:
    """A client's output, read as it is printed (on a thread of its own)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        stdout = process.stdout
        assert stdout is not None
        self._lines: list[str] = []
        self._reader = threading.Thread(
            target=lambda: self._lines.extend(iter(stdout.readline, "")), daemon=True
        )
        self._reader.start()

    def until(self, pattern: re.Pattern[str], timeout: float) -> str:
        """What was printed up to the first match of ``pattern``."""
        deadline = time.monotonic() + timeout
        while not pattern.search(printed := "".join(self._lines)):
            assert self._reader.is_alive(), f"the client ended first: {printed}"
            assert time.monotonic() < deadline, printed
            time.sleep(0.1)
        return printed

    def after_answering(self, process: subprocess.Popen[str], answer: str, timeout: float) -> str:
        """Everything printed, once ``answer`` was typed and the client ended."""
        assert process.stdin is not None
        process.stdin.write(answer)
        process.stdin.close()
        process.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return "".join(self._lines)


def _archive() -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        data = b'output "x" { value = 1 }\n'
        info = tarfile.TarInfo("main.tf")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def launches_denied(local: Local) -> Any:
    local.client.set_launch_controls("organization", launches_enabled=False)
    try:
        yield local
    finally:
        local.client.set_launch_controls("organization")


def test_a_denied_launch_is_503_with_retry_after_and_creates_no_run(
    launches_denied: Local, tmp_path: Path
) -> None:
    local = launches_denied
    # Given a remote workspace with an uploaded configuration version, launches denied
    name, ws_id = remote_workspace(local, "remote-denied")
    created = tfe(
        local,
        "POST",
        f"/workspaces/{ws_id}/configuration-versions",
        {"data": {"type": "configuration-versions", "attributes": {"auto-queue-runs": False}}},
    )
    assert created.status_code == 201, created.text
    cv = created.json()["data"]
    upload = requests.put(cv["attributes"]["upload-url"], data=_archive(), timeout=30)
    assert upload.status_code == 200, upload.text

    # When a run is created over the API, and by `terraform plan`
    refused = tfe(
        local,
        "POST",
        "/runs",
        {
            "data": {
                "type": "runs",
                "relationships": {
                    "workspace": {"data": {"type": "workspaces", "id": ws_id}},
                    "configuration-version": {
                        "data": {"type": "configuration-versions", "id": cv["id"]}
                    },
                },
            }
        },
    )
    # (Terraform 1.0.3 retries a 5xx with a growing pause for about six minutes before
    # it gives up: once it says it is retrying, it is interrupted.)
    process = hello(local, tmp_path, name).start("plan", "-input=false")
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if "restore the connection" in line:
            break
    os.killpg(process.pid, signal.SIGINT)
    rest, _ = process.communicate(timeout=120)
    planned = "".join(seen) + rest

    # Then both are refused with the 503, and no run exists
    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"] == "60"
    assert "not being launched" in refused.json()["errors"][0]["detail"]
    assert "restore the connection" in planned
    assert process.returncode != 0, planned
    assert runs_of(local, ws_id) == []


def test_pytfe_reads_runs_plans_and_applies(local: Local, tmp_path: Path) -> None:
    # Given a remote workspace with an applied run
    name, ws_id = remote_workspace(local, "remote-pytfe")
    applied = hello(local, tmp_path, name).run("apply", "-auto-approve", "-input=false")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    run_id = run_of(applied.stdout)

    # When pytfe reads the workspace's runs, the run, its plan and its apply
    client = TFEClient(
        TFEConfig(address=local.url, token=local.admin_token, max_retries=0, ca_bundle=None)
    )
    try:
        listed = list(client.runs.list(ws_id))
        run = client.runs.read(run_id)
        assert run.plan is not None
        assert run.apply is not None
        plan = client.plans.read(run.plan.id)
        apply = client.applies.read(run.apply.id)
    finally:
        client.close()

    # Then they tell the run's story
    assert [r.id for r in listed] == [run_id]
    assert run.status is not None
    assert run.status.value == "applied"
    assert run.has_changes is True
    assert plan.status is not None
    assert plan.status.value == "finished"
    assert plan.resource_additions == 1
    assert apply.status is not None
    assert apply.status.value == "finished"
    assert apply.resource_additions == 1

    # And the listing pages with JSON:API's pagination meta (the run reader's paging)
    second = tfe(local, "GET", f"/workspaces/{ws_id}/runs?page%5Bnumber%5D=2&page%5Bsize%5D=1")
    assert second.status_code == 200, second.text
    assert second.json()["data"] == []
    assert second.json()["meta"]["pagination"] == {
        "current-page": 2,
        "page-size": 1,
        "prev-page": 1,
        "next-page": None,
        "total-pages": 1,
        "total-count": 1,
    }
    refused = tfe(local, "GET", f"/workspaces/{ws_id}/runs?page%5Bsize%5D=101")
    assert refused.status_code == 422, refused.text


def _new_version(local: Local, ws_id: str) -> dict[str, Any]:
    created = tfe(
        local,
        "POST",
        f"/workspaces/{ws_id}/configuration-versions",
        {"data": {"type": "configuration-versions", "attributes": {"auto-queue-runs": False}}},
    )
    assert created.status_code == 201, created.text
    return created.json()["data"]  # type: ignore[no-any-return]


def _run_body(ws_id: str, cv_id: str, **attributes: Any) -> dict[str, Any]:
    return {
        "data": {
            "type": "runs",
            "attributes": attributes,
            "relationships": {
                "workspace": {"data": {"type": "workspaces", "id": ws_id}},
                "configuration-version": {"data": {"type": "configuration-versions", "id": cv_id}},
            },
        }
    }


def test_a_configuration_upload_url_works_once_and_only_as_issued(local: Local) -> None:
    # Given a new configuration version of a remote workspace
    _, ws_id = remote_workspace(local, "remote-upload")
    cv = _new_version(local, ws_id)
    url = cv["attributes"]["upload-url"]
    assert cv["attributes"]["status"] == "pending"

    # When its URL is tampered with, then used, then used again
    forged = requests.put(url[:-4] + "AAAA", data=_archive(), timeout=30)
    first = requests.put(url, data=_archive(), timeout=30)
    again = requests.put(url, data=_archive(), timeout=30)

    # Then only the issued URL's first use stored the archive
    assert forged.status_code == 404, forged.text
    assert first.status_code == 200, first.text
    assert again.status_code == 409, again.text
    assert "create a new configuration version" in again.json()["errors"][0]["detail"]
    read = tfe(local, "GET", f"/configuration-versions/{cv['id']}").json()["data"]
    assert read["attributes"]["status"] == "uploaded"
    assert "upload-url" not in read["attributes"]


def test_unsupported_run_options_are_refused_and_create_nothing(local: Local) -> None:
    # Given an uploaded configuration version of a remote workspace
    _, ws_id = remote_workspace(local, "remote-refused")
    cv = _new_version(local, ws_id)
    assert requests.put(cv["attributes"]["upload-url"], data=_archive(), timeout=30).ok

    # When runs are asked for that managed runs do not do
    refusals = {
        field: tfe(local, "POST", "/runs", _run_body(ws_id, cv["id"], **{field: value}))
        for field, value in (
            ("target-addrs", ["not an address"]),
            ("refresh", False),
            ("auto-apply", True),
        )
    }

    # Then each is a 422 naming the attribute, and no run exists
    for field, refused in refusals.items():
        assert refused.status_code == 422, refused.text
        pointer = refused.json()["errors"][0]["source"]["pointer"]
        assert pointer.startswith(f"/data/attributes/{field}"), pointer
    assert runs_of(local, ws_id) == []


def test_a_local_workspace_takes_no_remote_operation(local: Local) -> None:
    # Given a workspace in the default (local) execution mode
    name = unique("still-local")
    created = tfe(
        local,
        "POST",
        f"/organizations/{local.organization}/workspaces",
        {"data": {"type": "workspaces", "attributes": {"name": name}}},
    )
    ws_id = created.json()["data"]["id"]
    assert created.json()["data"]["attributes"]["operations"] is False

    # When a configuration version is created for it, or it is set to an unknown mode
    refused = tfe(local, "POST", f"/workspaces/{ws_id}/configuration-versions", None)
    unknown = tfe(
        local,
        "PATCH",
        f"/workspaces/{ws_id}",
        {"data": {"type": "workspaces", "attributes": {"execution-mode": "agent"}}},
    )

    # Then both are refused and the workspace stays local
    assert refused.status_code == 409, refused.text
    assert "execution-mode" in refused.json()["errors"][0]["detail"]
    assert unknown.status_code == 422, unknown.text
    shown = tfe(local, "GET", f"/workspaces/{ws_id}").json()["data"]["attributes"]
    assert (shown["execution-mode"], shown["operations"]) == ("local", False)


def test_a_log_read_url_reads_only_the_log_it_was_issued_for(local: Local, tmp_path: Path) -> None:
    # Given a speculative remote plan that finished
    name, _ws_id = remote_workspace(local, "remote-logs")
    planned = hello(local, tmp_path, name).run("plan", "-input=false")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    run_id = run_of(planned.stdout)
    plan = tfe(local, "GET", f"/runs/{run_id}/plan").json()["data"]
    url = plan["attributes"]["log-read-url"]

    # When the URL is read whole with no Authorization, and altered to read elsewhere
    whole = requests.get(url, params={"offset": 0, "limit": 65536}, timeout=30)
    later = requests.get(url, params={"offset": 1, "limit": 65536}, timeout=30)
    other_phase = requests.get(url.replace("/plan/", "/apply/"), timeout=30)
    other_expiry = requests.get(re.sub(r"/(\d+)/", lambda m: f"/{int(m[1]) + 1}/", url), timeout=30)

    # Then it streams the plan log framed by STX and ETX, and nothing else
    assert whole.status_code == 200
    assert whole.text.startswith("\x02")
    assert whole.text.endswith("\x03")
    assert "Plan: 1 to add" in whole.text
    assert later.text == whole.text[1:]
    assert other_phase.status_code == 404
    assert other_expiry.status_code == 404
