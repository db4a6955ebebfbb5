"""The runner's engine driver against the real pinned engine (and fake binaries).

The engine tests need the linux_amd64 Terraform 1.0.3 binary from tests/engine.py. The
pure parts of runplane.runner.engine (BoundedLog, resolve_engine, credentials_missing)
are tested here too, next to the engine runs that use them.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import socket
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.domain.plan_summary import summarize
from runplane.runner.bounded_log import BoundedLog
from runplane.runner.engine import Engine, resolve_engine
from runplane.runner.engine_classify import credentials_missing, missing_credentials_provider
from runplane.runner.engine_config import (
    BACKEND_OVERRIDE_NAME,
    write_backend_config,
    write_backend_override,
    write_cli_config,
    write_var_file,
)
from runplane.runner.engine_errors import (
    EngineCommandFailed,
    EngineError,
    EngineNotFound,
    EngineOutputTooLarge,
    EngineTimeout,
)
from runplane.runner.refusal import Refused
from tests.engine import engine_env, engine_path

linux_amd64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}),
    reason="the pinned engine binary is linux_amd64",
)
posix = pytest.mark.skipif(os.name != "posix", reason="fake engines are shell scripts")

GREETING = """\
terraform {
  backend "local" {
    path = "terraform.tfstate"
  }
}

output "greeting" { value = "hello" }
"""

ECHO_SECRET = """\
variable "secret" {
  type = string
}

output "echo" { value = var.secret }
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean engine environment with an empty CLI configuration."""
    home = tmp_path / "home"
    home.mkdir()
    cli_config = tmp_path / "cli.tfrc"
    cli_config.write_text("disable_checkpoint = true\n")
    return engine_env(home, cli_config)


def workdir(tmp_path: Path, config: str) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "main.tf").write_text(config)
    return work


def engine(work: Path, env: dict[str, str], log: BoundedLog | None = None) -> Engine:
    return Engine(engine_path(), work, env, log or BoundedLog(), timeout_seconds=120)


def closed_port() -> int:
    """A loopback port nothing listens on (it was just bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def executable(path: Path, script: str) -> Path:
    path.write_text(textwrap.dedent(script))
    path.chmod(0o755)
    return path


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie awaiting a non-reaping init counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in {"Z", "X"}


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


# --------------------------------------------------------------------------- the real engine


@linux_amd64
def test_plan_show_apply_lifecycle_with_a_local_backend(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Given a configuration with a new output and a local backend
    work = workdir(tmp_path, GREETING)
    log = BoundedLog()
    tf = engine(work, env, log)
    plan_file = work / "run.tfplan"

    # When it is initialised, planned, shown and applied
    assert tf.version() == "1.0.3"
    init = tf.init()
    plan = tf.plan(plan_file, lock=True)
    document = tf.show_json(plan_file)
    apply = tf.apply(plan_file)

    # Then each step succeeded, the plan had changes and its summary is the new output
    assert init.exit_code == 0
    assert (plan.exit_code, plan.has_changes, plan.succeeded) == (2, True, True)
    assert "-detailed-exitcode" in plan.command
    summary = summarize(document)
    assert summary.output_changes == {"greeting": "create"}
    assert summary.has_changes is True
    assert (apply.exit_code, apply.succeeded) == (0, True)
    assert 'greeting = "hello"' in log.text()
    assert json.loads((work / "terraform.tfstate").read_text())["outputs"]["greeting"] == {
        "value": "hello",
        "type": "string",
    }

    # ... and a second, unlocked plan has nothing to do
    again = tf.plan(work / "again.tfplan", lock=False)
    assert (again.exit_code, again.has_changes) == (0, False)
    assert "-lock=false" in again.command
    assert summarize(tf.show_json(work / "again.tfplan")).has_changes is False


@linux_amd64
def test_init_without_lock_on_an_engine_whose_init_has_no_lock_option(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Given Terraform 1.0.3, whose init rejects -lock
    work = workdir(tmp_path, GREETING)

    # When init is asked not to lock
    result = engine(work, env).init(lock=False)

    # Then it succeeds without passing the flag
    assert result.exit_code == 0
    assert "-lock=false" not in result.command


@linux_amd64
def test_a_syntax_error_fails_the_plan_and_is_in_the_log(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Given an initialised configuration that then gets a syntax error
    work = workdir(tmp_path, GREETING)
    log = BoundedLog()
    tf = engine(work, env, log)
    assert tf.init().exit_code == 0
    (work / "main.tf").write_text('output "greeting" { value = \n')

    # When it is planned
    result = tf.plan(work / "run.tfplan", lock=True)

    # Then the plan fails without raising, and the log holds the engine's diagnostic
    assert (result.exit_code, result.has_changes, result.succeeded) == (1, None, False)
    assert "Error: Invalid expression" in log.text()
    assert "on main.tf line 1" in log.text()
    assert not (work / "run.tfplan").exists()


@linux_amd64
def test_show_json_of_a_missing_plan_raises(tmp_path: Path, env: dict[str, str]) -> None:
    work = workdir(tmp_path, GREETING)
    log = BoundedLog()

    with pytest.raises(EngineCommandFailed) as failure:
        engine(work, env, log).show_json(work / "missing.tfplan")

    # Then the log names the step and keeps the engine's own error, and the error names
    # the step in words (the command line is the sandbox's)
    assert failure.value.exit_code == 1
    assert log.text().startswith("==> Reading the saved plan\n")
    assert "Error: " in log.text()
    assert str(failure.value) == "Reading the saved plan failed: the engine exited with 1"


@linux_amd64
def test_show_json_refuses_a_document_over_the_limit(tmp_path: Path, env: dict[str, str]) -> None:
    # Given a saved plan and a driver that accepts at most 64 bytes of JSON
    work = workdir(tmp_path, GREETING)
    tf = engine(work, env)
    tf.init()
    tf.plan(work / "run.tfplan", lock=False)
    small = Engine(engine_path(), work, env, BoundedLog(), max_json_bytes=64)

    # When the plan is shown
    # Then the document is refused with a typed error
    with pytest.raises(EngineOutputTooLarge, match="64 byte"):
        small.show_json(work / "run.tfplan")


@linux_amd64
def test_a_tiny_cap_keeps_head_and_tail_of_a_real_run(tmp_path: Path, env: dict[str, str]) -> None:
    # Given a log capped at 256 bytes
    work = workdir(tmp_path, GREETING)
    log = BoundedLog(cap_bytes=256)
    tf = engine(work, env, log)

    # When the engine initialises and plans (far more than 256 bytes of output)
    tf.init()
    tf.plan(work / "run.tfplan", lock=True)

    # Then the first and last 128 bytes are kept around one truncation marker
    dropped = log.total_bytes - 256
    marker = f"\n[... {dropped} bytes truncated ...]\n"
    assert log.truncated is True
    assert dropped > 0
    text = log.text()
    assert text.startswith("==> Initializing the working directory\n")
    assert text.count("bytes truncated") == 1
    assert marker in text
    assert len(log.bytes()) == 256 + len(marker.encode())
    assert text.rstrip().endswith("without changing any real infrastructure.")


@linux_amd64
def test_a_secret_variable_echoed_by_the_engine_never_reaches_the_log(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Given a configuration that prints a variable in a non-sensitive output
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    work = workdir(tmp_path, ECHO_SECRET)
    log = BoundedLog(secrets=[secret])
    tf = engine(work, env, log)
    plan_file = work / "run.tfplan"
    var_file = write_var_file(tmp_path / "runplane.tfvars.json", {"secret": secret})

    # When it is planned with the secret as the variable's value, and applied
    tf.init()
    plan = tf.plan(plan_file, lock=True, var_file=var_file)
    document = tf.show_json(plan_file)
    apply = tf.apply(plan_file)

    # Then the engine did print the value (plan and apply) ...
    assert (plan.exit_code, apply.exit_code) == (2, 0)
    assert document["planned_values"]["outputs"]["echo"]["value"] == secret
    text = log.text()
    assert '+ echo = "[redacted]"' in text
    assert 'echo = "[redacted]"' in text.split("Apply complete!")[1]
    # ... but the log holds neither it nor a command line with it
    assert secret not in text
    assert secret.encode() not in log.bytes()
    assert f"-var-file={var_file}" in plan.command
    assert secret not in " ".join(plan.command)


@linux_amd64
def test_run_variables_win_over_the_configurations_tfvars_and_stay_literal(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Given a configuration whose own terraform.tfvars sets the variables too
    work = workdir(
        tmp_path,
        'variable "s" {\n  type = string\n}\nvariable "n" {\n  type = number\n}\n'
        'variable "b" {\n  type = bool\n}\noutput "all" { value = [var.s, var.n, var.b] }\n',
    )
    (work / "terraform.tfvars").write_text('s = "from-config"\nn = 1\nb = false\n')
    var_file = write_var_file(
        tmp_path / "runplane.tfvars.json",
        {"s": '${upper("x")} %{if true}y%{endif}', "n": "3", "b": "true"},
    )
    tf = engine(work, env)

    # When it is planned with the run's variables
    tf.init()
    plan = tf.plan(work / "run.tfplan", lock=True, var_file=var_file)

    # Then the run's values win, strings are taken literally and numbers and bools convert
    assert plan.exit_code == 2
    outputs = tf.show_json(work / "run.tfplan")["planned_values"]["outputs"]
    assert outputs["all"]["value"] == ['${upper("x")} %{if true}y%{endif}', 3, True]


@linux_amd64
def test_the_backend_override_replaces_a_local_backend(tmp_path: Path, env: dict[str, str]) -> None:
    # Given a configuration with a local backend and Runplane's override beside it
    work = workdir(tmp_path, GREETING)
    port = closed_port()
    path = write_backend_override(
        work, hostname=f"127.0.0.1:{port}", organization="acme", workspace="prod"
    )
    assert path == work / BACKEND_OVERRIDE_NAME
    binary = str(engine_path())

    # When the engine checks the configuration without a backend
    for args in (
        ["init", "-backend=false", "-input=false", "-no-color"],
        ["validate", "-no-color"],
    ):
        checked = subprocess.run(
            [binary, *args], cwd=work, env=env, capture_output=True, text=True, timeout=120
        )
        # Then the merged configuration is valid
        assert checked.returncode == 0, checked.stdout + checked.stderr

    # When it initialises the backend
    log = BoundedLog()
    result = engine(work, env, log).init()

    # Then it tries the remote backend at our host (https discovery), not the local one
    assert result.exit_code == 1
    text = log.text()
    assert f"https://127.0.0.1:{port}/.well-known/terraform.json" in text
    assert BACKEND_OVERRIDE_NAME in text
    assert not (work / ".terraform" / "terraform.tfstate").exists()
    assert not (work / "terraform.tfstate").exists()


@linux_amd64
@pytest.mark.parametrize(
    "later_override",
    [
        'terraform {\n  backend "local" {}\n}\n',
        'terraform {\n  backend "remote" {\n    hostname = "evil.example:1"\n'
        '    organization = "evil"\n    workspaces {\n      prefix = "x-"\n    }\n  }\n}\n',
    ],
    ids=["local", "remote-elsewhere"],
)
def test_the_backend_config_wins_over_a_backend_that_sorts_after_the_override(
    tmp_path: Path, env: dict[str, str], later_override: str
) -> None:
    # Given Runplane's override and backend config, and a user override sorting after it
    work = workdir(tmp_path, 'output "a" { value = 1 }\n')
    port = closed_port()
    names = {"hostname": f"127.0.0.1:{port}", "organization": "acme", "workspace": "prod"}
    write_backend_override(work, **names)
    backend_config = write_backend_config(tmp_path / "backend.hcl", **names)
    assert stat.S_IMODE(backend_config.stat().st_mode) == 0o600
    (work / "zz_override.tf").write_text(later_override)

    # When the engine initialises with the backend config
    log = BoundedLog()
    result = engine(work, env, log).init(backend_config=backend_config)

    # Then it never uses the user's backend: it fails on our arguments, or calls our host
    assert result.exit_code == 1
    assert f"-backend-config={backend_config}" in result.command
    text = log.text()
    assert "evil.example" not in text
    assert (
        'An argument named "hostname" is not expected here' in text
        or f"https://127.0.0.1:{port}/.well-known/terraform.json" in text
    )
    assert not (work / "terraform.tfstate").exists()
    assert not (work / ".terraform" / "terraform.tfstate").exists()


@linux_amd64
def test_the_cli_config_declares_the_services_and_credentials(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Given the override and a CLI configuration declaring our services over plain http
    work = workdir(tmp_path, GREETING)
    port = closed_port()
    host = f"127.0.0.1:{port}"
    api = f"http://{host}/api/v2/"
    write_backend_override(work, hostname=host, organization="acme", workspace="prod")
    cli_config = write_cli_config(tmp_path / "runner.tfrc", host=host, api_url=api, token="t.k-1")

    # Then the file is private and names all three TFE service versions
    assert stat.S_IMODE(cli_config.stat().st_mode) == 0o600
    content = cli_config.read_text()
    for service in ("tfe.v2", "tfe.v2.1", "tfe.v2.2"):
        assert f'"{service}" = "{api}"' in content
    assert f'credentials "{host}" {{\n  token = "t.k-1"\n}}' in content

    # When the engine initialises with it
    log = BoundedLog(secrets=["t.k-1"])
    result = engine(work, {**env, "TF_CLI_CONFIG_FILE": str(cli_config)}, log).init()

    # Then it skips discovery and calls the declared API directly
    assert result.exit_code == 1
    assert f"{api}ping" in log.text()
    assert ".well-known" not in log.text()


# --------------------------------------------------------------------------- fake engines


@posix
@pytest.mark.parametrize("ignores_sigterm", [False, True], ids=["stops", "ignores-sigterm"])
def test_a_timeout_kills_the_whole_process_group(tmp_path: Path, ignores_sigterm: bool) -> None:
    # Given a fake engine whose child would outlive it, optionally deaf to SIGTERM
    pid_file = tmp_path / "child.pid"
    fake = executable(
        tmp_path / "terraform",
        f"""\
        #!/bin/sh
        {"trap '' TERM" if ignores_sigterm else ""}
        sleep 300 &
        echo $! > "$PID_FILE"
        echo started
        wait
        """,
    )
    log = BoundedLog()
    env = {"PATH": os.defpath, "PID_FILE": str(pid_file)}
    tf = Engine(fake, tmp_path, env, log, timeout_seconds=0.5, kill_grace_seconds=0.3)

    # When a command runs past its timeout
    started = time.monotonic()
    with pytest.raises(EngineTimeout) as timeout:
        tf.init()

    # Then it raised promptly, the log says so, and the child is dead too
    assert time.monotonic() - started < 5
    assert timeout.value.timeout_seconds == 0.5
    assert "started" in log.text()
    assert "[runner] Initializing the working directory did not finish within 0.5 s" in log.text()
    assert wait_gone(int(pid_file.read_text()))


@posix
def test_a_stray_child_holding_the_pipe_does_not_hang_the_driver(tmp_path: Path) -> None:
    # Given a fake engine that exits 3 while a background child keeps its stdout open
    pid_file = tmp_path / "child.pid"
    fake = executable(
        tmp_path / "terraform",
        """\
        #!/bin/sh
        echo leader
        sleep 300 &
        echo $! > "$PID_FILE"
        exit 3
        """,
    )
    log = BoundedLog()
    tf = Engine(fake, tmp_path, {"PID_FILE": str(pid_file)}, log, timeout_seconds=60)

    # When a command runs
    started = time.monotonic()
    result = tf.apply(tmp_path / "plan")

    # Then the engine's exit status is returned soon after it exits, and the stray is killed
    assert time.monotonic() - started < 15
    assert result.exit_code == 3
    assert result.succeeded is False
    assert "leader" in log.text()
    assert wait_gone(int(pid_file.read_text()))


@posix
def test_the_engine_environment_is_exactly_the_given_one_plus_automation_defaults(
    tmp_path: Path,
) -> None:
    # Given a fake engine that prints its environment and the parent has AWS variables set
    fake = executable(tmp_path / "tofu", "#!/bin/sh\nenv | sort\n")
    assert "AWS_ACCESS_KEY_ID" in os.environ
    log = BoundedLog()

    # When it runs with a minimal environment that also tries to set the persist interval
    given = {"PATH": os.defpath, "TF_INPUT": "1", "TF_STATE_PERSIST_INTERVAL": "1"}
    Engine(fake, tmp_path, given, log).init()

    # Then only that environment, plus the automation defaults it did not override, is
    # seen, and the platform-reserved persist interval is the platform's
    lines = set(log.text().splitlines())
    assert {"TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_INPUT=1"} <= lines
    assert "TF_STATE_PERSIST_INTERVAL=20" in lines
    assert not any(line.startswith("AWS_") for line in lines)


@posix
def test_variable_values_never_reach_the_engines_command_line(tmp_path: Path) -> None:
    # Given a fake engine that records its arguments, and a var file with a secret value
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    argv_file = tmp_path / "argv"
    fake = executable(tmp_path / "tofu", '#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGV_FILE"\n')
    var_file = write_var_file(tmp_path / "runplane.tfvars.json", {"secret": secret, "n": "1"})

    # When a plan runs with it
    result = Engine(fake, tmp_path, {"ARGV_FILE": str(argv_file)}, BoundedLog()).plan(
        tmp_path / "plan", lock=False, var_file=var_file
    )

    # Then the engine's argv names the private var file, never a value
    argv = argv_file.read_text().splitlines()
    assert f"-var-file={var_file}" in argv
    assert not any(secret in arg for arg in argv)
    assert "-var" not in argv
    assert secret not in " ".join(result.command)
    assert stat.S_IMODE(var_file.stat().st_mode) == 0o600
    assert json.loads(var_file.read_text()) == {"secret": secret, "n": "1"}


@pytest.mark.parametrize("name", ["count", "1x", "a b", "for_each"])
def test_a_var_file_refuses_names_the_engine_rejects(tmp_path: Path, name: str) -> None:
    with pytest.raises(Refused, match=re.escape(repr(name))):
        write_var_file(tmp_path / "v.json", {name: "value"})
    assert not (tmp_path / "v.json").exists()


def test_an_engine_that_cannot_start_is_a_typed_error(tmp_path: Path) -> None:
    tf = Engine(tmp_path / "missing", tmp_path, {}, BoundedLog())

    with pytest.raises(EngineError, match="cannot start the engine"):
        tf.init()


# --------------------------------------------------------------------------- resolve_engine


@posix
def test_resolve_engine_prefers_pinned_then_tofu_then_terraform(tmp_path: Path) -> None:
    # Given a PATH with terraform in its first directory and tofu in its second
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    terraform = executable(first / "terraform", "#!/bin/sh\n")
    tofu = executable(second / "tofu", "#!/bin/sh\n")
    pinned = executable(tmp_path / "engine-1.8.0", "#!/bin/sh\n")
    environ = {"PATH": f"{first}{os.pathsep}{second}"}

    # Then a pinned binary wins, then tofu (wherever it is on PATH), then terraform
    assert resolve_engine(str(pinned), environ) == pinned
    assert resolve_engine(pinned, environ) == pinned
    assert resolve_engine(None, environ) == tofu
    tofu.chmod(0o644)  # not executable: skipped
    assert resolve_engine(None, environ) == terraform
    assert resolve_engine(None, {"PATH": str(first)}) == terraform


@posix
def test_resolve_engine_fails_clearly(tmp_path: Path) -> None:
    not_executable = tmp_path / "tofu"
    not_executable.write_text("#!/bin/sh\n")
    empty = tmp_path / "empty"
    empty.mkdir()

    with pytest.raises(EngineNotFound, match="does not exist"):
        resolve_engine(str(tmp_path / "missing"), {"PATH": os.defpath})
    with pytest.raises(EngineNotFound, match="not executable"):
        resolve_engine(str(not_executable), {"PATH": os.defpath})
    with pytest.raises(EngineNotFound, match="neither 'tofu' nor 'terraform'"):
        resolve_engine(None, {"PATH": str(empty)})
    # A pinned binary is not looked for on PATH
    with pytest.raises(EngineNotFound):
        resolve_engine("tofu", {"PATH": str(tmp_path)})


@linux_amd64
def test_resolve_engine_finds_the_real_engine_on_path(tmp_path: Path) -> None:
    binary = engine_path()

    assert resolve_engine(None, {"PATH": str(binary.parent)}) == binary


# --------------------------------------------------------------------------- written files


@pytest.mark.parametrize(
    ("hostname", "organization", "workspace"),
    [
        ('evil" }\nterraform {', "acme", "prod"),
        ("app.runplane.dev", "ac me", "prod"),
        ("app.runplane.dev", "acme", '${file("/etc/passwd")}'),
    ],
)
def test_backend_override_refuses_names_it_cannot_quote(
    tmp_path: Path, hostname: str, organization: str, workspace: str
) -> None:
    with pytest.raises(ValueError, match="not a"):
        write_backend_override(
            tmp_path, hostname=hostname, organization=organization, workspace=workspace
        )
    assert not (tmp_path / BACKEND_OVERRIDE_NAME).exists()


def test_cli_config_refuses_values_it_cannot_quote(tmp_path: Path) -> None:
    path = tmp_path / "cli.tfrc"
    with pytest.raises(ValueError, match="token"):
        write_cli_config(path, host="h", api_url="http://h/api/v2/", token='a"b')
    with pytest.raises(ValueError, match="URL"):
        write_cli_config(path, host="h", api_url="ftp://h/", token="t")
    with pytest.raises(ValueError, match="hostname"):
        write_cli_config(path, host="h/x", api_url="http://h/api/v2/", token="t")
    assert not path.exists()


@posix
def test_cli_config_tightens_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "cli.tfrc"
    path.write_text("old")
    path.chmod(0o644)

    write_cli_config(path, host="app.runplane.dev", api_url="https://a/api/v2/", token="t")

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "old" not in path.read_text()


# --------------------------------------------------------------------------- credentials_missing

AWS_V5 = """\
Planning failed. Terraform encountered an error while generating this plan.

Error: No valid credential sources found

  with provider["registry.terraform.io/hashicorp/aws"],
  on main.tf line 1, in provider "aws":
   1: provider "aws" {

Please see https://registry.terraform.io/providers/hashicorp/aws
for more information about providing credentials.

Error: failed to refresh cached credentials, no EC2 IMDS role found, operation
error ec2imds: GetMetadata, request canceled, context deadline exceeded
"""
AWS_V3 = """\
Error: error configuring Terraform AWS Provider: no valid credential sources for
Terraform AWS Provider found.
"""
AWS_SDK = "Error: NoCredentialProviders: no valid providers in chain. Deprecated."
GOOGLE = """\
Error: Attempted to load application default credentials since neither
`credentials` nor `access_token` was set in the provider block.  No credentials
loaded. To use your gcloud credentials, run 'gcloud auth application-default
login'.  Original error: google: could not find default credentials. See
https://developers.google.com/accounts/docs/application-default-credentials for
more information.
"""
AZURE_SP = (
    "Error: building AzureRM Client: Authenticating using the Azure CLI is only supported "
    "as a User (not a Service Principal)."
)
AZURE_LOGIN = "Error: building AzureRM Client: obtain subscription() from Azure CLI: " + (
    "Please run 'az login' to setup account."
)
AZURE_NO_CLI = (
    "Error: building AzureRM Client: please ensure you have installed Azure CLI version "
    "2.0.79 or newer. Error parsing json result from the Azure CLI: launching Azure CLI: "
    'exec: "az": executable file not found in $PATH.'
)


@pytest.mark.parametrize(
    ("log_text", "provider"),
    [
        (AWS_V5, "aws"),
        (AWS_V3, "aws"),
        (AWS_SDK, "aws"),
        (GOOGLE, "google"),
        (AZURE_SP, "azurerm"),
        (AZURE_LOGIN, "azurerm"),
        (AZURE_NO_CLI, "azurerm"),
        (textwrap.fill(AZURE_SP, 30), "azurerm"),
        (AWS_V5.upper(), "aws"),
        ("Error: Invalid expression\n\nExpected the start of an expression.", None),
        ("Error: InvalidClientTokenId: The security token included is invalid.", None),
        ("Error: ExpiredToken: The security token included in the request is expired", None),
        ("Apply complete! Resources: 0 added, 0 changed, 0 destroyed.", None),
        ("", None),
    ],
    ids=[
        "aws-v5",
        "aws-v3-wrapped",
        "aws-sdk-chain",
        "google-adc",
        "azure-service-principal",
        "azure-login",
        "azure-no-cli",
        "wrapped",
        "case",
        "syntax-error",
        "invalid-credentials",
        "expired-credentials",
        "success",
        "empty",
    ],
)
def test_credentials_missing_recognises_missing_cloud_credentials(
    log_text: str, provider: str | None
) -> None:
    assert missing_credentials_provider(log_text) == provider
    assert credentials_missing(log_text) is (provider is not None)


# --------------------------------------------------------------------------- BoundedLog

MARK = b"[redacted]"


def reference_redaction(data: bytes, secrets: list[bytes]) -> bytes:
    """Every byte inside any occurrence of a secret is covered; each covered run is one mark."""
    covered = [False] * len(data)
    for secret in secrets:
        for at in range(len(data) - len(secret) + 1):
            if data[at : at + len(secret)] == secret:
                covered[at : at + len(secret)] = [True] * len(secret)
    out = bytearray()
    at = 0
    while at < len(data):
        if covered[at]:
            out += MARK
            while at < len(data) and covered[at]:
                at += 1
        else:
            out.append(data[at])
            at += 1
    return bytes(out)


def reference_log(data: bytes, secrets: list[bytes], cap: int) -> bytes:
    redacted = reference_redaction(data, secrets)
    if len(redacted) <= cap:
        return redacted
    head, tail = cap // 2, cap - cap // 2
    marker = f"\n[... {len(redacted) - cap} bytes truncated ...]\n".encode()
    return redacted[:head] + marker + redacted[len(redacted) - tail :]


def write_in_pieces(log: BoundedLog, data: bytes, cuts: list[int]) -> None:
    edges = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    for start, end in itertools.pairwise(edges):
        log.write(data[start:end])


@settings(max_examples=400)
@given(
    data=st.binary(max_size=80).map(lambda b: bytes(ord("a") + x % 3 for x in b)),
    secrets=st.lists(st.text("abc", min_size=1, max_size=5), max_size=3),
    cuts=st.lists(st.integers(0, 80), max_size=20),
    cap=st.integers(2, 120),
)
def test_log_equals_redacting_then_truncating_the_whole_stream(
    data: bytes, secrets: list[str], cuts: list[int], cap: int
) -> None:
    # Given output written in arbitrary pieces, secrets possibly split across them
    log = BoundedLog(cap_bytes=cap, secrets=secrets)

    # When it is written
    write_in_pieces(log, data, cuts)

    # Then the log is what redacting, then truncating, the whole stream gives
    expected = reference_log(data, [s.encode() for s in secrets], cap)
    assert log.bytes() == expected
    assert log.total_bytes == len(data)
    assert log.truncated is (b"bytes truncated" in expected)
    # ... and reading it does not change it
    assert log.bytes() == expected


def test_a_secret_split_byte_by_byte_is_redacted() -> None:
    secret = "hunter2-🔑"
    log = BoundedLog(secrets=[secret])
    for byte in f"password: {secret}!\n".encode():
        log.write(bytes([byte]))
    assert log.text() == "password: [redacted]!\n"


def test_a_secret_across_the_internal_chunk_boundary_of_one_write_is_redacted() -> None:
    secret = "0123456789abcdef"
    log = BoundedLog(cap_bytes=4 * 65536, secrets=[secret])
    data = b"x" * (65536 - 7) + secret.encode() + b"y"

    log.write(data)

    assert log.bytes() == b"x" * (65536 - 7) + b"[redacted]y"


def test_escaped_and_multiline_forms_of_a_secret_are_redacted() -> None:
    secret = 'pa"ss\\word<&>\nsecond-line'
    log = BoundedLog(secrets=[secret, ""])
    log.write(f"raw={secret}\n")
    log.write(f"json={json.dumps(secret)}\n")
    log.write('go={"v":"pa\\"ss\\\\word\\u003c\\u0026\\u003e\\nsecond-line"}\n')
    log.write('hcl="pa\\"ss\\\\word<&>\\nsecond-line"\n')
    log.write('heredoc=<<-EOT\n      pa"ss\\word<&>\n      second-line\n  EOT\n')

    text = log.text()
    assert "second-line" not in text
    assert "word" not in text
    assert re.findall(r"\w+=", text) == ["raw=", "json=", "go=", "hcl=", "heredoc="]


def test_no_secrets_and_no_truncation_keeps_output_verbatim() -> None:
    log = BoundedLog(cap_bytes=100)
    log.write(b"x" * 60)
    log.write("é" * 20)
    assert log.bytes() == b"x" * 60 + "é".encode() * 20
    assert log.truncated is False
    assert log.total_bytes == 100


def test_a_cap_below_two_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        BoundedLog(cap_bytes=1)


# Measured in a process of its own: tracemalloc counts every thread's allocations, and
# this test's process may be serving an embedded stack.
_MEMORY_PROBE = """
import json, tracemalloc
from runplane.runner.bounded_log import BoundedLog

secret = "s3cr3t-value"
chunk = (b"line of engine output " * 2978)[:65000] + secret.encode() + b"\\n"
log = BoundedLog(secrets=[secret])
tracemalloc.start()
for _ in range(48 * 1024 * 1024 // len(chunk)):
    log.write(chunk)
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
kept = log.bytes()
print(json.dumps({
    "peak": peak,
    "truncated": log.truncated,
    "kept": len(kept),
    "secret_kept": secret.encode() in kept,
}))
"""


def test_memory_stays_near_the_cap_whatever_the_output_size() -> None:
    # Given a 1 MiB log with a secret, and a 64 KiB chunk of output containing it
    # When 48 MiB of output is written (in a clean process)
    probe = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE], capture_output=True, text=True, check=True
    )
    measured = json.loads(probe.stdout)

    # Then at most the cap plus a few chunks was ever held
    assert measured["peak"] < 1024 * 1024 + 8 * 65536
    assert measured["truncated"] is True
    assert measured["kept"] < 1024 * 1024 + 100
    assert measured["secret_kept"] is False
