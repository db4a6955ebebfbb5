"""The ``runplane/test`` provider (examples/providers) planned and applied by the real engine.

The provider is a Python test double built with the ``tf`` package and installed offline
through a filesystem mirror; see docs/test-provider.md. The engine tests need the
linux_amd64 Terraform 1.0.3 binary from tests/engine.py and ``tf`` in this interpreter
(the project's ``dev`` extra).
"""

from __future__ import annotations

import importlib.util
import json
import platform
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.providers import install
from examples.providers.install import install_mirror, provider_installation_block
from runplane.runner.engine_classify import credentials_missing
from runplane.runner.engine_config import write_cli_config
from tests.engine import engine_env, engine_path

linux_amd64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}),
    reason="the pinned engine binary is linux_amd64",
)

PROVIDER_BLOCK = """\
terraform {
  backend "local" {
    path = "terraform.tfstate"
  }
  required_providers {
    test = {
      source  = "runplane/test"
      version = "0.1.0"
    }
  }
}
"""


def thing(label: str, name: str, **attributes: str | bool) -> str:
    """A ``test_thing`` resource block."""
    lines = [f'resource "test_thing" "{label}" {{', f'  name = "{name}"']
    for key, value in attributes.items():
        rendered = str(value).lower() if isinstance(value, bool) else json.dumps(value)
        lines.append(f"  {key} = {rendered}")
    lines.append("}")
    return "\n".join(lines) + "\n"


class Workdir:
    """A configuration directory and the engine, run in a clean environment."""

    def __init__(self, tmp_path: Path, cli_config: Path) -> None:
        self.path = tmp_path / "work"
        self.path.mkdir()
        home = tmp_path / "home"
        home.mkdir()
        self.env = engine_env(home, cli_config)
        self.engine = str(engine_path())

    def write(self, *blocks: str) -> None:
        (self.path / "main.tf").write_text(PROVIDER_BLOCK + "".join(blocks), encoding="utf-8")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.engine, *args, "-no-color"],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = self.run(*args)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    def init(self) -> None:
        self.ok("init", "-input=false")

    def apply(self) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-auto-approve", "-input=false")

    def plan_json(self) -> tuple[int, dict[str, Any]]:
        """Plan into a file; return the exit code (``-detailed-exitcode``) and its JSON."""
        result = self.run("plan", "-input=false", "-detailed-exitcode", "-out=tfplan")
        assert result.returncode in (0, 2), result.stdout + result.stderr
        shown = self.ok("show", "-json", "tfplan")
        return result.returncode, json.loads(shown.stdout)

    def resources(self) -> dict[str, dict[str, Any]]:
        """The managed resources of the local state file, by address, as stored."""
        state_file = self.path / "terraform.tfstate"
        if not state_file.exists():
            return {}
        state = json.loads(state_file.read_text(encoding="utf-8"))
        return {
            f"{resource['type']}.{resource['name']}": instance
            for resource in state["resources"]
            if resource["mode"] == "managed"
            for instance in resource["instances"]
        }


def actions(plan: dict[str, Any]) -> dict[str, list[str]]:
    return {change["address"]: change["change"]["actions"] for change in plan["resource_changes"]}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert importlib.util.find_spec("tf") is not None, (
        "the runplane/test provider needs the 'tf' package: pip install -e '.[dev]'"
    )
    return install_mirror(tmp_path_factory.mktemp("provider-mirror"))


@pytest.fixture
def work(tmp_path: Path, mirror: Path) -> Workdir:
    cli_config = tmp_path / "cli.tfrc"
    cli_config.write_text(
        "disable_checkpoint = true\n\n" + provider_installation_block(mirror), encoding="utf-8"
    )
    return Workdir(tmp_path, cli_config)


# --------------------------------------------------------------------------- installer


def test_install_mirror_lays_out_an_executable_wrapper(tmp_path: Path) -> None:
    # Given an empty destination
    dest = tmp_path / "mirror"

    # When the provider is installed into it (twice: installing is idempotent)
    install_mirror(dest, python="/opt/py thon/bin/python3")
    returned = install_mirror(dest, python="/opt/py thon/bin/python3")

    # Then the unpacked mirror layout holds an executable wrapper that execs that Python
    package = dest / "registry.terraform.io/runplane/test/0.1.0/linux_amd64"
    wrapper = package / "terraform-provider-test_v0.1.0"
    assert returned == dest.absolute()
    assert wrapper.stat().st_mode & stat.S_IXUSR
    text = wrapper.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert f"exec '/opt/py thon/bin/python3' -I {package / 'provider.py'} \"$@\"" in text
    assert (package / "provider.py").read_bytes() == install.SOURCE.read_bytes()


def test_installer_and_provider_agree_on_name_and_version() -> None:
    # Given the provider module (it needs tf) and the installer
    pytest.importorskip("tf")
    from examples.providers.runplane_test import provider

    # Then they name the same provider and version
    installed = (f"{install.HOSTNAME}/{install.NAMESPACE}/{install.TYPE}", install.VERSION)
    assert installed == (provider.FULL_NAME, provider.VERSION)


def test_installer_runs_as_a_module(tmp_path: Path) -> None:
    # When the installer runs as `python -m examples.providers.install DEST`
    result = subprocess.run(
        [sys.executable, "-m", "examples.providers.install", str(tmp_path / "m")],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )

    # Then the mirror exists and the CLI-config block is printed
    assert (tmp_path / "m/registry.terraform.io/runplane/test/0.1.0/linux_amd64").is_dir()
    assert provider_installation_block(tmp_path / "m") in result.stdout


def test_provider_installation_block_refuses_paths_it_cannot_quote(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mirror path"):
        provider_installation_block(tmp_path / 'a"b')
    with pytest.raises(ValueError, match="mirror path"):
        provider_installation_block(tmp_path / "${x}")


# --------------------------------------------------------------------------- write_cli_config


def test_cli_config_carries_the_same_provider_installation_block(tmp_path: Path) -> None:
    # When a CLI configuration is written with a provider mirror
    path = write_cli_config(
        tmp_path / "cli.tfrc",
        host="app.runplane.test",
        api_url="http://127.0.0.1:9/api/v2/",
        token="t",
        provider_mirror=tmp_path / "mirror",
    )

    # Then it ends with the installer's block, after the host and credentials blocks
    text = path.read_text()
    assert text.endswith("\n" + provider_installation_block(tmp_path / "mirror"))
    assert text.index('credentials "app.runplane.test"') < text.index("provider_installation")


def test_cli_config_without_a_mirror_installs_providers_from_their_registry_only(
    tmp_path: Path,
) -> None:
    # Given a CLI configuration written without a mirror
    path = write_cli_config(tmp_path / "cli.tfrc", host="h", api_url="http://h/api/v2/", token="t")
    # Then its provider installation is explicit, direct only: no implied local mirror
    # (terraform.d/plugins beside a configuration) is ever consulted
    text = path.read_text()
    assert text.count("provider_installation {") == 1
    assert "direct {}" in text
    assert "filesystem_mirror" not in text


def test_cli_config_refuses_mirror_paths_it_cannot_use(tmp_path: Path) -> None:
    path = tmp_path / "cli.tfrc"
    for mirror in (Path("relative/mirror"), tmp_path / 'a"b', tmp_path / "a\nb", tmp_path / "%{x}"):
        with pytest.raises(ValueError, match="provider_mirror"):
            write_cli_config(
                path, host="h", api_url="http://h/api/v2/", token="t", provider_mirror=mirror
            )
    assert not path.exists()


@linux_amd64
def test_engine_installs_the_provider_with_write_cli_config(tmp_path: Path, mirror: Path) -> None:
    # Given a CLI configuration from write_cli_config with the mirror (its host and
    # credentials blocks name an API that is not running) and a local-backend config
    cli_config = write_cli_config(
        tmp_path / "runner.tfrc",
        host="app.runplane.test",
        api_url="http://127.0.0.1:9/api/v2/",
        token="t.k-1",
        provider_mirror=mirror,
    )
    work = Workdir(tmp_path, cli_config)
    work.write(thing("a", "alpha"))

    # When it is initialised and planned
    result = work.run("init", "-input=false")
    assert result.returncode == 0, result.stdout + result.stderr
    code, plan = work.plan_json()

    # Then the provider came from the mirror and plans the resource
    assert "Installing runplane/test v0.1.0" in result.stdout
    assert code == 2
    assert actions(plan) == {"test_thing.a": ["create"]}


# --------------------------------------------------------------------------- lifecycle


@linux_amd64
def test_create_update_and_destroy_a_thing(work: Workdir) -> None:
    # Given a configuration with one thing
    work.write(thing("a", "alpha", content="one"))
    work.init()

    # When it is applied
    work.ok("apply", "-auto-approve", "-input=false")

    # Then the state holds it, with its computed attributes
    created = work.resources()["test_thing.a"]["attributes"]
    assert created["name"] == "alpha"
    assert created["content"] == "one"
    assert created["id"].startswith("thing-")
    assert created["revision"] == 1

    # When its content changes
    work.write(thing("a", "alpha", content="two"))
    code, plan = work.plan_json()

    # Then the plan updates it in place, with the revision unknown until apply
    assert code == 2
    assert actions(plan) == {"test_thing.a": ["update"]}
    change = plan["resource_changes"][0]["change"]
    assert change["after"]["content"] == "two"
    assert change["after_unknown"].get("revision") is True

    # When that plan is applied
    work.ok("apply", "-input=false", "tfplan")

    # Then the state holds the new content, the same id and the next revision
    updated = work.resources()["test_thing.a"]["attributes"]
    assert updated["content"] == "two"
    assert updated["id"] == created["id"]
    assert updated["revision"] == 2
    assert work.plan_json()[0] == 0  # nothing left to do

    # When it is destroyed
    work.ok("destroy", "-auto-approve", "-input=false")

    # Then the state holds nothing
    assert work.resources() == {}


@linux_amd64
def test_a_failing_resource_leaves_partial_state(work: Workdir) -> None:
    # Given two things, one of which fails on apply
    work.write(thing("good", "good"), thing("bad", "bad", fail_on_apply=True))
    work.init()

    # When they are applied
    result = work.apply()

    # Then the engine fails with the provider's error, and the local state file holds
    # the thing that was created (partial state) but not the failed one
    assert result.returncode != 0
    assert "test_thing bad: failing on demand" in result.stdout + result.stderr
    assert set(work.resources()) == {"test_thing.good"}

    # When planning again
    code, plan = work.plan_json()

    # Then only the failed thing is still to create
    assert code == 2
    assert actions(plan) == {"test_thing.good": ["no-op"], "test_thing.bad": ["create"]}


@linux_amd64
def test_a_failing_update_keeps_the_prior_state(work: Workdir) -> None:
    # Given an applied thing
    work.write(thing("a", "alpha", content="one"))
    work.init()
    work.ok("apply", "-auto-approve", "-input=false")

    # When an update that fails on demand is applied
    work.write(thing("a", "alpha", content="two", fail_on_apply=True))
    result = work.apply()

    # Then the engine fails and the state keeps the prior values
    assert result.returncode != 0
    attributes = work.resources()["test_thing.a"]["attributes"]
    assert (attributes["content"], attributes["revision"]) == ("one", 1)


@linux_amd64
def test_fail_after_partial_records_a_tainted_thing(work: Workdir) -> None:
    # Given a thing that fails after its create is recorded
    work.write(thing("half", "half", fail_after_partial=True))
    work.init()

    # When it is applied
    result = work.apply()

    # Then the engine fails, yet the state holds the thing, tainted
    assert result.returncode != 0
    assert "test_thing half: failing after a partial apply" in result.stdout + result.stderr
    instance = work.resources()["test_thing.half"]
    assert instance["status"] == "tainted"

    # And the next plan replaces it
    code, plan = work.plan_json()
    assert code == 2
    assert actions(plan) == {"test_thing.half": ["delete", "create"]}


# ---------------------------------------------------------------- test_caller_identity

CALLER = """\
data "test_caller_identity" "me" {}

output "arn" {
  value = data.test_caller_identity.me.arn
}
"""


@pytest.fixture(scope="module")
def sts_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def _assumed(endpoint: str, role: str) -> dict[str, str]:
    import boto3

    sts = boto3.client(
        "sts",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    issued = sts.assume_role_with_web_identity(
        RoleArn=f"arn:aws:iam::123456789012:role/{role}",
        RoleSessionName="run-test",
        WebIdentityToken="a.b.c",
    )["Credentials"]
    return {
        "AWS_ACCESS_KEY_ID": issued["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": issued["SecretAccessKey"],
        "AWS_SESSION_TOKEN": issued["SessionToken"],
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }


@linux_amd64
def test_caller_identity_reports_the_role_of_the_engines_credentials(
    work: Workdir, sts_endpoint: str
) -> None:
    # Given credentials of role "plan-role" in the engine's environment only
    work.env.update(_assumed(sts_endpoint, "plan-role"))
    work.write(CALLER)
    work.init()

    # When the engine applies a configuration reading the caller's identity
    work.ok("apply", "-auto-approve", "-input=false")

    # Then the data source saw the assumed role
    shown = json.loads(work.ok("output", "-json").stdout)
    assert shown["arn"]["value"] == "arn:aws:sts::123456789012:assumed-role/plan-role/run-test"


@linux_amd64
def test_caller_identity_without_credentials_fails_the_way_cloud_providers_do(
    work: Workdir,
) -> None:
    # Given no AWS credentials in the engine's environment
    work.write(CALLER)
    work.init()

    # When it plans
    result = work.run("plan", "-input=false")

    # Then it fails with the wording runners classify as missing credentials
    assert result.returncode != 0
    assert credentials_missing(result.stdout + result.stderr)
