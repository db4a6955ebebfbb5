"""The pinned engine binary: what it is, that it runs a config, and how it is fetched."""

from __future__ import annotations

import io
import json
import os
import platform
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.engine import ENGINE_DIR, REPO_ROOT, engine_env, engine_path
from tools.fetch_engine import BINARY_SHA256, FetchError, extract_member, sha256_of

linux_amd64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine().lower() in {"x86_64", "amd64"}),
    reason="the pinned engine binary is linux_amd64",
)

CONFIG = """\
terraform {
  backend "local" {
    path = "terraform.tfstate"
  }
}

output "greeting" { value = "hello" }
"""


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=120
    )


@linux_amd64
def test_pinned_binary_is_terraform_1_0_3(tmp_path: Path) -> None:
    # Given the engine binary installed by tools.fetch_engine
    engine = engine_path()
    assert sha256_of(engine) == BINARY_SHA256

    # When it is asked for its version
    result = run([str(engine), "version"], tmp_path, engine_env(tmp_path))

    # Then it reports Terraform v1.0.3
    assert result.stdout.splitlines()[0] == "Terraform v1.0.3"


@linux_amd64
def test_applies_an_output_only_config_with_a_local_backend(tmp_path: Path) -> None:
    # Given a working directory holding only an output and a local backend
    work = tmp_path / "work"
    work.mkdir()
    (work / "main.tf").write_text(CONFIG)
    home = tmp_path / "home"
    home.mkdir()
    cli_config = tmp_path / "cli.tfrc"
    cli_config.write_text("disable_checkpoint = true\n")
    env = engine_env(home, cli_config)
    engine = str(engine_path())

    # When it is initialised and applied
    run([engine, "init", "-input=false", "-no-color"], work, env)
    run([engine, "apply", "-auto-approve", "-input=false", "-no-color"], work, env)
    result = run([engine, "output", "-json"], work, env)

    # Then the output is in the local state
    assert json.loads(result.stdout) == {
        "greeting": {"sensitive": False, "type": "string", "value": "hello"}
    }
    assert (work / "terraform.tfstate").is_file()


@linux_amd64
def test_fetching_again_is_a_no_op_that_prints_the_path() -> None:
    # Given the engine already fetched and verified
    engine = engine_path()
    before = engine.stat()
    # ... and pip unable to download anything, so a fetch would fail
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull})

    # When the fetch runs again
    result = subprocess.run(
        [sys.executable, "-m", "tools.fetch_engine", "--dest", str(ENGINE_DIR)],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )

    # Then it prints the path and leaves the binary untouched
    assert Path(result.stdout.strip()) == engine.resolve()
    after = engine.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def _tar_with(path: Path, member: tarfile.TarInfo, data: bytes = b"evil") -> Path:
    member.size = len(data) if member.isreg() else 0
    with tarfile.open(path, "w:gz") as tar:
        tar.addfile(member, io.BytesIO(data) if member.isreg() else None)
    return path


@pytest.mark.parametrize("name", ["../evil", "a/../../evil", "{tmp}/evil"])
def test_extraction_refuses_members_escaping_the_destination(tmp_path: Path, name: str) -> None:
    # Given a tar whose only member has a traversing or absolute path
    name = name.format(tmp=tmp_path)
    archive = _tar_with(tmp_path / "bad.tar.gz", tarfile.TarInfo(name))
    dest = tmp_path / "dest"
    target = dest / "terraform"

    # When that member is extracted
    # Then it is refused and nothing is written
    with pytest.raises(FetchError, match="refusing"):
        extract_member(archive, name, target)
    assert not target.exists()
    assert not (tmp_path / "evil").exists()


def test_extraction_refuses_links(tmp_path: Path) -> None:
    # Given a tar whose wanted member is a symlink out of the destination
    link = tarfile.TarInfo("pkg/terraform")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    archive = _tar_with(tmp_path / "link.tar.gz", link)
    target = tmp_path / "dest" / "terraform"

    # When it is extracted
    # Then it is refused and nothing is written
    with pytest.raises(FetchError, match="not a regular file"):
        extract_member(archive, "pkg/terraform", target)
    assert not target.exists()


def test_extraction_writes_only_the_named_member(tmp_path: Path) -> None:
    # Given a tar with the wanted member and another one
    archive = tmp_path / "ok.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in [("pkg/lib/terraform", b"binary"), ("pkg/setup.py", b"x")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "dest"

    # When the wanted member is extracted
    written = extract_member(archive, "pkg/lib/terraform", dest / "terraform")

    # Then only it is written, flat, under the target name
    assert written == dest / "terraform"
    assert written.read_bytes() == b"binary"
    assert sorted(p.name for p in dest.iterdir()) == ["terraform"]
