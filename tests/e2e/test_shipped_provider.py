"""A provider binary shipped inside a configuration archive never runs.

The real engine is given a configuration that requires ``acme/evil`` 0.1.0 and ships
that provider, as a shell script that leaves a marker file, where ``init`` would take
it from: the working directory's provider cache (with a lock file pinning the script's
own hash, so ``init`` would reuse it as "previously installed") or the implied local
mirror ``terraform.d/plugins``. Extracted by the runner's extraction, the engine finds
no provider (the network is closed, so ``direct`` cannot download one) and the marker
never appears; extracted as is, the control shows the engine running the script.
"""

from __future__ import annotations

import base64
import hashlib
import io
import platform
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from runplane.runner.archive import ArchiveLimits, extract_configuration
from tests.engine import engine_env, engine_path

linux_amd64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}),
    reason="the pinned engine binary is linux_amd64",
)

PACKAGE = "registry.terraform.io/acme/evil/0.1.0/linux_amd64"
BINARY = "terraform-provider-evil_v0.1.0"
CONFIG = """\
terraform {
  required_providers {
    evil = {
      source  = "acme/evil"
      version = "0.1.0"
    }
  }
}

provider "evil" {}
"""
DIRECT_ONLY = "provider_installation {\n  direct {}\n}\n"

# Where each layout ships the provider, and the CLI configuration that would use it.
LAYOUTS = {
    "working-directory-cache": (f".terraform/providers/{PACKAGE}", DIRECT_ONLY),
    # No provider_installation block: the engine's implied mirrors, the working
    # directory's terraform.d/plugins among them.
    "implied-mirror": (f"terraform.d/plugins/{PACKAGE}", ""),
}


def package_hash(name: str, content: bytes) -> str:
    """The ``h1:`` hash of a one-file package directory, as the engine's lock file holds it."""
    summary = f"{hashlib.sha256(content).hexdigest()}  {name}\n"
    return "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()


def lock_file(script: bytes) -> bytes:
    return (
        'provider "registry.terraform.io/acme/evil" {\n'
        '  version     = "0.1.0"\n'
        '  constraints = "0.1.0"\n'
        f'  hashes = [\n    "{package_hash(BINARY, script)}",\n  ]\n'
        "}\n"
    ).encode()


def configuration_archive(provider_directory: str, marker: Path) -> bytes:
    script = f"#!/bin/sh\ntouch '{marker}'\n".encode()
    members = [
        ("main.tf", CONFIG.encode(), 0o644),
        (".terraform.lock.hcl", lock_file(script), 0o644),
        (f"{provider_directory}/{BINARY}", script, 0o755),
    ]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def engine(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(engine_path()), *args, "-input=false", "-no-color"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def environment(tmp_path: Path, cli_config: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "cli.tfrc"
    config.write_text(cli_config)
    return engine_env(home, config)


@linux_amd64
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_shipped_provider_is_not_extracted_and_never_runs(tmp_path: Path, layout: str) -> None:
    # Given an archive shipping the provider it requires, where the engine would look
    provider_directory, cli_config = LAYOUTS[layout]
    marker = tmp_path / "provider-ran"
    archive = configuration_archive(provider_directory, marker)
    env = environment(tmp_path, cli_config)

    # When the runner's extraction writes it out and the engine initialises and plans it
    work = tmp_path / "config"
    work.mkdir()
    extracted = extract_configuration(io.BytesIO(archive), work, ArchiveLimits())
    init = engine(["init"], work, env)
    plan = engine(["plan"], work, env)

    # Then the provider was left out (and said so), the engine finds no provider to
    # use, and the shipped script never ran
    assert extracted.skipped == (provider_directory.split("/")[0],)
    assert (work / ".terraform.lock.hcl").is_file()
    assert init.returncode != 0
    assert "Failed to query available provider packages" in init.stderr
    assert "Using previously-installed" not in init.stdout
    assert plan.returncode != 0
    assert not marker.exists()


@linux_amd64
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_control_the_same_archive_extracted_as_is_runs_the_shipped_provider(
    tmp_path: Path, layout: str
) -> None:
    # Given the same archive, extracted with every member and mode as it is
    provider_directory, cli_config = LAYOUTS[layout]
    marker = tmp_path / "provider-ran"
    archive = configuration_archive(provider_directory, marker)
    env = environment(tmp_path, cli_config)
    work = tmp_path / "config"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(work, filter="tar")

    # When the engine initialises (whatever it answers) and plans it
    engine(["init"], work, env)
    engine(["plan"], work, env)

    # Then the engine ran the shipped script: what the extraction keeps out is real
    assert marker.exists()
