"""A hostile configuration against the sandbox's trust boundary, on the embedded stack
with the real engine: what the configuration's code can reach at plan time (the
engine's builtins) and at apply time (a shell of its own, through a provisioner), and
what another organization's concurrent run can see of it.

The configuration is written as an attacker would: it reads every file it can name,
every process it can see, every port the stack listens on, and the runner's routes
with whatever credential it finds. The tests assert the safe outcome of each, not
the absence of one payload.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from runplane.client import Client, Connection
from runplane.store import run_parts
from runplane.store.prefetch import IdentityMap
from tests.e2e.conftest import Local, unique

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="sandbox isolation needs the stack to run as root"
)

PROVIDER = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
"""

# Everything the engine's own functions can reach while it plans.
PLAN_TIME_PROBE = """
variable "data_dir" { type = string }

locals {
  home   = pathexpand("~")
  token  = try(regex("token = \\"([^\\"]+)\\"", file("${local.home}/cli.tfrc"))[0], "unreadable")
  shown  = try(fileset("/proc", "*/cmdline"), [])
  envs   = try(fileset("/proc", "*/environ"), [])
}

output "credentials" {
  value = try(file("${var.data_dir}/credentials.json"), "unreadable")
}
output "issuer" {
  value = try(file("${var.data_dir}/issuer.json"), "unreadable")
}
output "data_listing" {
  value = base64encode(jsonencode(try(fileset(var.data_dir, "**"), [])))
}
output "cli_token_start" {
  value = substr(local.token, 0, 4)
}
output "sandbox_listing" {
  value = base64encode(jsonencode(try(fileset(abspath("${local.home}/.."), "**"), [])))
}
output "tmp_listing" {
  value = base64encode(jsonencode(try(fileset("/tmp", "sbx-*/**"), [])))
}
output "process_cmdlines" {
  value = base64encode(jsonencode([for f in local.shown : try(base64encode(file("/proc/${f}")), "")
  ]))
}
output "process_environments" {
  value = base64encode(jsonencode([for f in local.envs : try(base64encode(file("/proc/${f}")), "")
  ]))
}
"""

# What a process the configuration starts does at apply time: everything it can.
APPLY_TIME_PROBE = r"""
import json, os, re, socket, subprocess, sys, urllib.error, urllib.request

report = {"uid": os.getuid(), "gid": os.getgid()}
data_dir = os.environ["PROBE_DATA_DIR"]


def can_read(path):
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        return True
    except OSError:
        return False


try:
    report["data_dir_entries"] = sorted(os.listdir(data_dir))
except OSError as error:
    report["data_dir_entries"] = type(error).__name__
report["data_dir_readable"] = any(
    can_read(os.path.join(data_dir, name)) for name in ("credentials.json", "issuer.json")
)
processes = [p for p in os.listdir("/proc") if p.isdigit()]
report["cmdlines"] = []
report["environments_with_secrets"] = []
for pid in processes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            report["cmdlines"].append(handle.read().replace(b"\0", b" ").decode("utf-8", "replace"))
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
        if b"RUNPLANE_BOOTSTRAP" in environ or b"rps_" in environ:
            report["environments_with_secrets"].append(pid)
    except OSError:
        pass
report["ports"] = {}
for port in json.loads(os.environ["PROBE_PORTS"]):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        report["ports"][str(port)] = "open"
    except OSError as error:
        report["ports"][str(port)] = type(error).__name__
home = os.environ["HOME"]
report["beside_home"] = sorted(os.listdir(os.path.dirname(home)))
cli = open(os.path.join(home, "cli.tfrc")).read()
token = re.search(r'token = "([^"]+)"', cli).group(1)
relay = re.search(r'"tfe.v2" = "(http://[^"]+?)/api/v2/"', cli).group(1)
report["relay_token_is_a_session"] = token.startswith("rps_")


def call(url, token, method="GET", body=None):
    request = urllib.request.Request(url, data=body, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:
        return type(error).__name__


forged = json.dumps({"outcome": "applied"}).encode()
report["relay_ping"] = call(f"{relay}/api/v2/ping", token)
report["relay_runner_result"] = call(f"{relay}/api/v1/runner/result", token, "POST", forged)
report["relay_escape"] = call(f"{relay}/api/v2/../v1/runner/result", token, "POST", forged)
report["relay_without_secret"] = call(f"{relay}/api/v2/ping", "rps_guess")
# A process of its own that tries to outlive the sandbox.
subprocess.Popen(
    ["sleep", os.environ["PROBE_MARKER"]],
    start_new_session=True,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
print("PROBE-REPORT " + json.dumps(report), flush=True)
"""


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def _outputs(log: str) -> dict[str, Any]:
    """The plan log's ``+ name = "..."`` output lines, decoded (the probe prints its
    lists as base64 of their JSON, so each fits one line)."""
    found: dict[str, Any] = {}
    for match in re.finditer(r'^\s*\+ (\w+)\s*=\s*(".*")\s*$', log, re.MULTILINE):
        value = json.loads(match.group(2))
        try:
            found[match.group(1)] = json.loads(base64.b64decode(value, validate=True))
        except ValueError:
            found[match.group(1)] = value
    return found


def _decoded_blobs(log: str) -> str:
    """Every base64 string in ``log``, decoded: what the configuration smuggled past
    the log's own redaction."""
    decoded = []
    for blob in re.findall(r'"([A-Za-z0-9+/]{8,}={0,2})"', log):
        try:
            decoded.append(base64.b64decode(blob, validate=True).decode("utf-8", "replace"))
        except ValueError:
            continue
    return "\n".join(decoded)


def _sandboxes_in(listing: list[str]) -> set[str]:
    """The sandboxes a listing of /tmp's sandbox directories shows: ``{"its own"}`` when
    every entry is in one sandbox's engine directory (the lister's own), else their
    names."""
    sandboxes = {path.split("/")[0] for path in listing}
    if len(sandboxes) == 1 and all(path.split("/")[1] == "engine" for path in listing):
        return {"its own"}
    return sandboxes


def _stack_ports(local: Local) -> list[int]:
    assert local.stack.services is not None
    endpoint = local.stack.services.settings.aws_endpoint_url or ""
    ports = [urllib.parse.urlsplit(local.url).port, urllib.parse.urlsplit(endpoint).port]
    return [p for p in ports if p]


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def test_at_plan_time_the_configuration_reads_nothing_of_the_stack_the_runner_or_others(
    local: Local, tmp_path: Path
) -> None:
    # Given a plan-only run of a configuration that reads everything it can name: the
    # stack's data directory (its admin token, its signing key), the engine's own CLI
    # configuration, the sandbox around it, /tmp, and every process it can see
    workspace = local.client.create_workspace(unique("hostile-plan"))["id"]
    directory = _write(tmp_path / "probe", {"main.tf": PLAN_TIME_PROBE})
    run = local.client.create_run(
        workspace,
        directory,
        kind="plan_only",
        variables={"data_dir": str(local.stack.data_dir)},
    )

    # When it plans
    done = local.client.watch(run["id"], timeout=180)
    log = local.client.log(run["id"], "plan")

    # Then it planned, and found none of the stack's files
    assert done["status"] == "succeeded", done.get("status_reason")
    outputs = _outputs(log)
    assert outputs["credentials"] == "unreadable"
    assert outputs["issuer"] == "unreadable"
    # (only the provider mirror kept there is shown to the engine, read-only)
    assert [p for p in outputs["data_listing"] if not p.startswith("providers/")] == []
    # And the engine's credentials are a secret of its relay, never the session
    assert outputs["cli_token_start"] not in ("unreadable", "rps_")
    # And it sees only its own directory: not the runner's beside it, no other sandbox
    assert not [p for p in outputs["sandbox_listing"] if p.startswith("runner/")]
    assert _sandboxes_in(outputs["tmp_listing"]) == {"its own"}
    assert outputs["process_cmdlines"], "the probe saw its own processes"
    # And no process it can see is the runner or the stack, nor holds a handle
    seen = "\n".join(
        base64.b64decode(blob).decode("utf-8", "replace")
        for blob in [*outputs["process_cmdlines"], *outputs["process_environments"]]
    )
    for marker in ("runplane.runner", "-m pytest", "RUNPLANE_BOOTSTRAP", "rps_", local.admin_token):
        assert marker not in seen, marker
    assert local.admin_token not in log
    assert "[redacted]" not in log  # no secret of the runner's reached its output


def test_at_apply_time_a_shell_of_the_configurations_reaches_nothing_and_ends_with_the_run(
    local: Local, tmp_path: Path
) -> None:
    # Given an approved run whose resource's provisioner runs a program of the
    # configuration's: it reads files and processes, connects to the stack's ports,
    # calls the runner's routes through the relay with the credential it finds, and
    # leaves a process behind in a session of its own
    marker = f"{int(time.time()) % 9000 + 1000}.{os.getpid()}"
    workspace = local.client.create_workspace(unique("hostile-apply"))["id"]
    main_tf = PROVIDER + (
        'variable "python" { type = string }\n'
        'variable "data_dir" { type = string }\n'
        'variable "ports" { type = string }\n'
        'variable "marker" { type = string }\n'
        'resource "test_thing" "probe" {\n'
        '  name = "probe"\n'
        '  provisioner "local-exec" {\n'
        '    command = "${var.python} ${path.module}/probe.py"\n'
        "    environment = {\n"
        "      PROBE_DATA_DIR = var.data_dir\n"
        "      PROBE_PORTS    = var.ports\n"
        "      PROBE_MARKER   = var.marker\n"
        "    }\n"
        "  }\n"
        "}\n"
    )
    directory = _write(tmp_path / "probe", {"main.tf": main_tf, "probe.py": APPLY_TIME_PROBE})
    run = local.client.create_run(
        workspace,
        directory,
        variables={
            "python": sys.executable,
            "data_dir": str(local.stack.data_dir),
            "ports": json.dumps(_stack_ports(local)),
            "marker": marker,
        },
    )
    local.client.watch(run["id"], until=["awaiting_approval"], timeout=180)

    # When it is approved and applies
    local.client.decide(run["id"], "approve")
    done = local.client.watch(run["id"], timeout=180)
    log = local.client.log(run["id"], "apply")

    # Then the apply itself succeeded (the probe ran)
    assert done["status"] == "succeeded", done.get("status_reason")
    found = re.search(r"PROBE-REPORT (\{.*\})", log)
    assert found is not None, log[-2000:]
    report: dict[str, Any] = json.loads(found.group(1))
    # And it ran as a user of its own, which can read nothing of the stack
    assert report["uid"] != 0
    # (only the provider mirror kept there is shown to the engine, read-only)
    assert report["data_dir_entries"] in (["providers"], "FileNotFoundError")
    assert report["data_dir_readable"] is False
    # And saw no process but its own sandbox's, none holding a handle
    assert report["environments_with_secrets"] == []
    outside = ("runplane.runner", "-m pytest", "runplane.local", "runplane local")
    assert not [c for c in report["cmdlines"] if any(o in c for o in outside)], report
    # And could connect to none of the stack's servers
    assert report["ports"], report
    assert "open" not in report["ports"].values(), report["ports"]
    # And the relay, its only way out, serves the Cloud API with its secret alone:
    # the runner's routes and a way around the prefix are refused, a guess is refused
    assert report["relay_token_is_a_session"] is False
    assert report["relay_ping"] in (200, 204)
    assert report["relay_runner_result"] == 404
    assert report["relay_escape"] == 404
    assert report["relay_without_secret"] == 401
    # And the runner's directory is not beside its home
    assert "runner" not in report["beside_home"]
    # And the process it left behind ended with the sandbox
    deadline = time.monotonic() + 30
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_with(marker) == []


def test_two_organizations_concurrent_sandboxes_see_nothing_of_each_other(
    local: Local, tmp_path: Path
) -> None:
    # Given organization A planning slowly with a secret value in its variables
    secret = f"a-secret-{os.getpid()}-{time.time_ns()}"
    slow = PROVIDER + (
        'variable "password" {\n  type = string\n  sensitive = true\n}\n'
        'resource "test_thing" "slow" {\n'
        '  name = "slow"\n'
        "  plan_sleep_seconds = 8\n"
        "}\n"
    )
    a_workspace = local.client.create_workspace(unique("tenant-a"))["id"]
    a_run = local.client.create_run(
        a_workspace,
        _write(tmp_path / "a", {"main.tf": slow}),
        kind="plan_only",
        variables={"password": secret},
    )
    # And organization B, at the same time, running the probe of everything it can read
    b_name, b_token = local.other_organization(unique("tenant-b"))
    b_client = Client(Connection(local.url, b_token, b_name))
    b_workspace = b_client.create_workspace(unique("prober"))["id"]
    local.client.watch(a_run["id"], until=["planning"], timeout=120)
    b_runs: list[dict[str, Any]] = []

    def probe() -> None:
        b_runs.append(
            b_client.create_run(
                b_workspace,
                _write(tmp_path / "b", {"main.tf": PLAN_TIME_PROBE}),
                kind="plan_only",
                variables={"data_dir": str(local.stack.data_dir)},
            )
        )

    prober = threading.Thread(target=probe)
    prober.start()
    prober.join(timeout=60)

    # When both have planned
    b_done = b_client.watch(b_runs[0]["id"], timeout=180)
    a_done = local.client.watch(a_run["id"], timeout=180)
    b_log = b_client.log(b_runs[0]["id"], "plan")

    # Then each succeeded, and B's probe found nothing of A: no file, process or value
    assert (a_done["status"], b_done["status"]) == ("succeeded", "succeeded")
    everything = b_log + _decoded_blobs(b_log)
    assert secret not in everything
    assert a_run["id"] not in everything
    assert _sandboxes_in(_outputs(b_log)["tmp_listing"]) == {"its own"}
    # And A's log never shows its own secret either
    assert secret not in local.client.log(a_run["id"], "plan")


def test_an_engine_printing_a_harmless_plan_json_for_a_harmful_plan_fails_the_run(
    local: Local, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an engine that lies: its saved plan creates test_thing.evil, and its
    # show -json says test_thing.victim (as a hostile provider or a compromised engine
    # on the sandbox's untrusted side could)
    launcher = local.stack.launcher
    assert launcher is not None
    real = launcher._engine
    assert real is not None
    lying = tmp_path / "engine" / "terraform"
    lying.parent.mkdir()
    lying.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "show" ]; then\n'
        f'  "{real}" "$@" | sed "s/evil/victim/g"\n'
        "  exit 0\n"
        "fi\n"
        f'exec "{real}" "$@"\n',
        encoding="utf-8",
    )
    lying.chmod(0o755)
    workspace = local.client.create_workspace(unique("lying-engine"))["id"]
    directory = _write(
        tmp_path / "evil",
        {"main.tf": PROVIDER + 'resource "test_thing" "evil" {\n  name = "evil"\n}\n'},
    )
    monkeypatch.setattr(launcher, "_engine", str(lying))

    # When a run of it plans
    run = local.client.create_run(workspace, directory)
    done = local.client.watch(run["id"], timeout=180)

    # Then the runner refused the JSON: the run failed naming the difference, and no
    # plan was recorded for policy, approval or apply
    assert done["status"] == "plan_failed"
    reason = done.get("status_reason") or ""
    assert "does not describe its saved plan" in reason, local.client.log(run["id"], "plan")
    assert "test_thing.victim" in reason
    assert "test_thing.evil" in reason
    assert run_parts.get(run["id"], "plan", reads=IdentityMap()) is None
    assert run_parts.get(run["id"], "approval", reads=IdentityMap()) is None


def _spellings(value: str) -> list[str]:
    raw = value.encode()
    return [
        value,
        value.upper(),
        value.lower(),
        value[::-1],
        base64.b64encode(raw).decode(),
        raw.hex(),
    ]


@pytest.mark.parametrize(
    ("configuration", "outcome"),
    [
        # the engine refuses a plain output derived from a sensitive variable
        ('output "shout" {\n  value = upper(var.token)\n}\n', "plan_failed"),
        # and masks what derives from it in a resource
        (
            PROVIDER + 'resource "test_thing" "t" {\n'
            '  name    = "t"\n'
            '  content = join("/", [base64encode(var.token), upper(var.token),'
            ' join("", reverse(split("", var.token)))])\n'
            "}\n",
            "succeeded",
        ),
        # and an error on it does not quote it
        ('output "n" {\n  value = tonumber(lower(var.token))\n}\n', "plan_failed"),
    ],
)
def test_a_sensitive_workspace_variable_stays_secret_whatever_the_configuration_does_to_it(
    local: Local, tmp_path: Path, configuration: str, outcome: str
) -> None:
    # Given a workspace with a sensitive variable, and a configuration that declares it
    # without saying it is sensitive, then transforms it
    value = f"Tr0ub4dor-{time.time_ns()}"
    workspace = local.client.create_workspace(unique("sensitive"))["id"]
    local.client.set_variable(workspace, "token", value, sensitive=True)
    directory = _write(
        tmp_path / "cfg", {"main.tf": 'variable "token" {\n  type = string\n}\n' + configuration}
    )

    # When a run of it plans
    run = local.client.create_run(workspace, directory, kind="plan_only")
    done = local.client.watch(run["id"], timeout=180)

    # Then it ends as the engine decides, and no spelling of the value is in its log,
    # its review or its reason
    assert done["status"] == outcome, done.get("status_reason")
    shown = "\n".join(
        [
            local.client.log(run["id"], "plan"),
            json.dumps(local.client.review(run["id"])),
            json.dumps(done),
        ]
    )
    for spelling in _spellings(value):
        assert spelling not in shown, spelling
